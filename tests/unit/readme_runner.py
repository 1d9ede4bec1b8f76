"""The README's shell blocks as a test runs them: parsed with their `<!-- readme-test: ... -->` markers and
run in order, in a sandbox standing in for a fresh checkout, on free ports instead of the fixed ones.

Markers (an HTML comment on the line before a fenced block, words as a shell splits them):
`skip 'why'` never runs; `cluster` runs in tests/cluster's README test, `spark` in a Spark test, others in
tests/unit/test_readme.py; `background until 'TEXT'` starts the block, waits for TEXT on its output and
leaves it running until the sandbox closes; `stdout-has 'TEXT' ...` checks the block's output.
The sandbox has `scripts/serve` and `.venv/bin/kafkalite` as thin shims over this checkout's source (what
`./scripts/serve` would have installed), and rewrites the documented ports to free ones: `localhost:9092`
and `127.0.0.1:8080` in the text, the defaults of `serve --console` and `cluster up` in the shims.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHELL_LANGS = ("bash", "sh", "shell", "console")
KNOWN_WORDS = {"skip", "cluster", "spark", "background", "until", "stdout-has"}
_MARKER = re.compile(r"^\s*<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(\s*)```\s*([\w-]*)\s*$")


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    words: list[str] = field(default_factory=list)  # the marker's words (arguments left out)
    until: str | None = None
    skip_reason: str = ""
    stdout_has: list[str] = field(default_factory=list)

    @property
    def shell(self) -> bool:
        return self.lang in SHELL_LANGS

    @property
    def skipped(self) -> bool:
        return "skip" in self.words

    @property
    def room(self) -> str:
        """Which test runs it: "cluster", "spark" or "single" (tests/unit/test_readme.py)."""
        for room in ("cluster", "spark"):
            if room in self.words:
                return room
        return "single"

    def __str__(self) -> str:
        return f"README.md:{self.line}"


def parse(text: str) -> list[Block]:
    """Every fenced block, with the marker on the line before it (blank lines between allowed)."""
    blocks: list[Block] = []
    marker: list[str] | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _MARKER.match(lines[i])
        f = _FENCE.match(lines[i])
        if m:
            marker = shlex.split(m.group(1))
        elif f:
            indent, lang = f.group(1), f.group(2)
            opened = i + 1
            body: list[str] = []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                ln = lines[i]
                body.append(ln[len(indent) :] if ln.startswith(indent) else ln.lstrip())
                i += 1
            if lang == "console":  # commands are the `$ ` lines
                body = [ln[2:] for ln in body if ln.startswith("$ ")]
            block = Block(opened, lang, "\n".join(body) + "\n")
            _read_marker(block, marker or [])
            blocks.append(block)
            marker = None
        elif lines[i].strip():
            marker = None
        i += 1
    return blocks


def _read_marker(block: Block, tokens: list[str]) -> None:
    """Words into flags (`skip`, `cluster`, `spark`, `background`, or an unknown one, kept for the test
    to refuse); `until X` and `stdout-has X...` take arguments, as does `skip` (its reason)."""
    j = 0
    while j < len(tokens):
        w = tokens[j]
        block.words.append(w)
        if w == "until" and j + 1 < len(tokens):
            block.until = tokens[j + 1]
            j += 1
        elif w in ("stdout-has", "skip"):
            if w == "stdout-has":
                block.stdout_has = tokens[j + 1 :]
            else:
                block.skip_reason = " ".join(tokens[j + 1 :])
            break
        j += 1


def readme_blocks() -> list[Block]:
    return parse(README.read_text(encoding="utf-8"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports_in_a_row(count: int) -> int:
    """The first of `count` consecutive free ports."""
    for _ in range(200):
        first = free_port()
        if first + count > 65535:
            continue
        ok = True
        for p in range(first + 1, first + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return first
    raise RuntimeError(f"no {count} consecutive free ports")


class Sandbox:
    """A directory standing in for a fresh checkout, where blocks run with bash -euo pipefail."""

    def __init__(self, base: Path) -> None:
        self.base = base
        (base / "tmp").mkdir(parents=True, exist_ok=True)
        first_broker = free_ports_in_a_row(3)
        self.ports = {
            9092: free_port(),
            8080: free_port(),
            2181: free_port(),
            9093: first_broker,
            9094: first_broker + 1,
            9095: first_broker + 2,
        }
        py = sys.executable
        self._shim(
            "scripts/serve",
            f"exec {py} -m kafkalite.cli.main serve --listen 127.0.0.1:{self.ports[9092]} "
            f'"${{@/#--console/--console=127.0.0.1:{self.ports[8080]}}}"',
        )
        self._shim(
            ".venv/bin/kafkalite",
            'if [ "${1:-} ${2:-}" = "cluster up" ]; then '
            f'set -- "$@" --first-port {self.ports[9093]} --zookeeper-port {self.ports[2181]}; fi\n'
            f'exec {py} -m kafkalite.cli.main "$@"',
        )
        (base / ".venv/bin/python").symlink_to(py)
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT / "src"),
            "TMPDIR": str(base / "tmp"),
            "PYTHONUNBUFFERED": "1",
        }
        self.background: list[subprocess.Popen[str]] = []

    def _shim(self, rel: str, body: str) -> None:
        path = self.base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/usr/bin/env bash\nset -euo pipefail\n{body}\n")
        path.chmod(0o755)

    def rewrite(self, text: str) -> str:
        """The documented ports as this sandbox's free ones."""

        def port(m: re.Match[str]) -> str:
            return f"{m.group(1)}:{self.ports.get(int(m.group(2)), int(m.group(2)))}"

        return re.sub(r"\b(localhost|127\.0\.0\.1):(\d+)\b", port, text)

    def run(self, block: Block, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        if block.until is not None:
            return self.start(block, timeout)
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.rewrite(block.text)],
            cwd=self.base,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, block: Block, timeout: float) -> subprocess.CompletedProcess[str]:
        """A background block: running once its output has `until` (exit code 0), else what it said."""
        script = self.rewrite(block.text)
        assert len(script.strip().splitlines()) == 1, f"{block}: a background block is one command"
        log = (self.base / "tmp" / f"background-{block.line}.log").open("wb")
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", f"exec {script.strip()}"],
            cwd=self.base,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.background.append(proc)
        assert block.until is not None
        deadline = time.monotonic() + timeout
        said = ""
        while time.monotonic() < deadline:
            said = Path(log.name).read_text(errors="replace")
            if block.until in said:
                return subprocess.CompletedProcess(proc.args, 0, said, "")
            if proc.poll() is not None:
                return subprocess.CompletedProcess(proc.args, proc.returncode, said, "it exited")
            time.sleep(0.1)  # polling the block's output file, up to the deadline
        return subprocess.CompletedProcess(proc.args, -1, said, "timed out")

    def close(self) -> None:
        """Ctrl-C for every background block (its process group), then a kill after 60 s."""
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for proc in self.background:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.background.clear()


def run_in_order(blocks: list[Block], sandbox: Sandbox) -> None:
    """Each block in order; the first failure raises with the block's place, exit code and output."""
    for block in blocks:
        done = sandbox.run(block)
        where = f"{block} ({block.text.strip().splitlines()[0][:60]}...)"
        assert done.returncode == 0, (
            f"{where} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
        for text in block.stdout_has:
            assert text in done.stdout, f"{where}: {text!r} not in its output:\n{done.stdout}"
