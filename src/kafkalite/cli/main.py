"""The `kafkalite` command: serve, topics (create|list|describe|delete|alter), produce, consume, groups, transactions, acls, users, quotas, reassign, brokers, log-dirs.

`kafkalite serve` with no arguments keeps data in ./data and listens on 127.0.0.1:9092.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from typing import Any

from kafkalite.cli.wire import EXIT_ERROR, CliError


class StartupError(Exception):
    """An expected reason a broker cannot start, said in one line (exit status EXIT_ERROR, no traceback)."""


def _serve(args: argparse.Namespace) -> int:
    from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError

    if args.help_config:
        from kafkalite.broker.config.config_docs import print_table

        print_table()
        return 0
    from kafkalite.broker.config.log_config import LogLevelError, configure, level_of

    overrides = list(args.override or [])
    if args.data_dir:
        overrides.append(f"log.dirs={args.data_dir}")
    if args.listen:
        overrides.append(f"listeners=PLAINTEXT://{args.listen}")
    if args.console:
        overrides.append(f"http.listeners=http://{args.console}")
    try:
        if args.log_level:
            level_of(args.log_level)
        config = BrokerConfig.from_sources(args.config, overrides)
    except LogLevelError as exc:
        raise StartupError(f"configuration: --log-level {args.log_level}: {exc}") from None
    except ConfigError as exc:
        raise StartupError(f"configuration: {exc}") from None
    except OSError as exc:
        raise StartupError(f"configuration: {args.config}: {exc.strerror or exc}") from None
    try:  # log.format, log.level and log.level.<logger> from the properties; --log-level wins
        props = dict(config.props)
        if args.log_level:
            props["log.level"] = args.log_level
        configure(props)
    except LogLevelError as exc:
        raise StartupError(f"configuration: {exc}") from None
    return _run_broker(config)


def _run_broker(config: Any) -> int:
    """Start the broker and serve until a signal; every expected failure is a StartupError."""
    from kafkalite import web
    from kafkalite.broker.config.broker_config import ConfigError
    from kafkalite.broker.network.allocator import tune_for_request_buffers
    from kafkalite.broker.server import BrokerServer
    from kafkalite.cluster.metadata import MetadataError
    from kafkalite.storage.errors import StorageError

    tune_for_request_buffers()
    try:
        server = BrokerServer(config)
        http = web.attach(server)
    except ConfigError as exc:
        raise StartupError(f"configuration: {exc}") from None

    def announce(srv: BrokerServer) -> None:
        # startup objects (message classes, codecs, loaded state) never die: keep them out of GC passes
        gc.collect()
        gc.freeze()
        lst = srv.advertised[0]
        print(
            f"kafkalite broker {srv.broker_id} ready on {lst.host}:{lst.port} (cluster {srv.cluster_id})",
            flush=True,
        )
        if http is not None:
            print(f"console, REST API and metrics at {http.url}/", flush=True)

    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(server.serve_forever(on_started=announce))
    except KeyboardInterrupt:
        pass
    except ConfigError as exc:  # e.g. a listener certificate stored by AlterConfigs went bad
        raise StartupError(f"configuration: {exc}") from None
    except (StorageError, MetadataError) as exc:
        raise StartupError(f"cannot start: {exc}") from None
    except OSError as exc:
        from kafkalite.broker.network.listeners import ListenError

        if isinstance(exc, ListenError):
            raise StartupError(str(exc)) from None
        where = f" {exc.filename}" if exc.filename else ""
        raise StartupError(f"cannot start:{where} {exc.strerror or exc}") from None
    return 0


def build_parser() -> argparse.ArgumentParser:
    from kafkalite import __version__
    from kafkalite.cli import (
        acls,
        brokers,
        clients,
        cluster,
        configs,
        dump_log,
        groups,
        leaders,
        log_dirs,
        offsets_cmd,
        perf,
        pipeline,
        quotas,
        reassign,
        schemas,
        topics,
        transactions,
        users,
    )
    from kafkalite.cli.admin_common import OneLineErrorParser

    parser = OneLineErrorParser(
        prog="kafkalite",
        description="A Kafka-compatible broker in Python. Every subcommand exits 0 on success, 2 on an "
        "error (one 'error:' line on stderr) and 130 on Ctrl-C.",
    )
    parser.add_argument("--version", action="version", version=f"kafkalite {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser(
        "serve",
        help="run a broker (defaults: data in ./data, 127.0.0.1:9092)",
        description="Run a broker. Properties use Kafka's names; --help-config lists every one "
        "with its type, default, range and whether it can change at runtime.",
    )
    s.add_argument("config", nargs="?", help="server.properties file (Kafka property names)")
    s.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="set a property (repeatable)"
    )
    s.add_argument("--data-dir", help="shorthand for --override log.dirs=DIR")
    s.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="shorthand for --override listeners=PLAINTEXT://HOST:PORT",
    )
    s.add_argument(
        "--console",
        nargs="?",
        const="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="serve the web console, REST API and /metrics (default 127.0.0.1:8080); "
        "shorthand for --override http.listeners=http://HOST:PORT",
    )
    s.add_argument(
        "--log-level", help="the root log level (TRACE, DEBUG, INFO, WARN, ERROR); else log.level"
    )
    s.add_argument(
        "--help-config",
        action="store_true",
        help="print every broker property (type, default, dynamic, allowed values) and exit",
    )
    s.set_defaults(func=_serve)

    topics.add_parser(sub)
    cluster.add_parser(sub)
    clients.add_parsers(sub)
    groups.add_parser(sub)
    transactions.add_parser(sub)
    pipeline.add_parser(sub)
    acls.add_parser(sub)
    users.add_parser(sub)
    quotas.add_parser(sub)
    configs.add_parser(sub)
    leaders.add_parser(sub)
    offsets_cmd.add_parsers(sub)
    log_dirs.add_parser(sub)
    reassign.add_parser(sub)
    brokers.add_parser(sub)
    dump_log.add_parser(sub)
    perf.add_parser(sub)
    schemas.add_parser(sub)
    return parser


_GROUP_ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")


def kafka_style_groups(argv: list[str]) -> list[str]:
    """kafka-consumer-groups.sh's flag form (`groups --bootstrap-server B --describe --group G`)
    as kafkalite's subcommand form (`groups describe --bootstrap-server B --group G`)."""
    if not argv or argv[0] != "groups" or any(a in _GROUP_ACTIONS for a in argv[1:2]):
        return argv
    actions = [a for a in argv[1:] if a.startswith("--") and a[2:] in _GROUP_ACTIONS]
    if len(actions) != 1:
        return argv
    rest = [a for a in argv[1:] if a != actions[0]]
    return ["groups", actions[0][2:], *rest]


def main(argv: list[str] | None = None) -> int:
    try:
        from kafkalite.cli.reassign import kafka_style

        argv = kafka_style(kafka_style_groups(list(sys.argv[1:] if argv is None else argv)))
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except StartupError as exc:
        print(f"kafkalite: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
