"""Child process for test_truncate_crash: a follower-style loop of appends (in rising leader
epochs) and truncations to random offsets, until it is SIGKILLed."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from kafkalite.records.batch import build_batch
from kafkalite.storage import Log, LogConfig


def main() -> None:
    path, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    lg = Log.open(path, LogConfig(segment_bytes=2048, index_interval_bytes=128))
    epoch = lg.latest_epoch + 1
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for _ in range(rng.randint(1, 30)):
            values = [(None, b"v%d" % rng.randrange(10**6)) for _ in range(rng.randint(1, 4))]
            lg.append_as_leader(bytearray(build_batch(values)), epoch)
        if rng.random() < 0.5 and lg.log_end_offset > 0:
            lg.truncate_to(rng.randrange(lg.log_end_offset))
        epoch += 1


if __name__ == "__main__":
    main()
