"""Chaos run: one replay tuning job through worker kills, coordinator kills, a Redis flush-and-
restart, a PostgreSQL restart, an API restart and a worker stopped past its lease (target scale);
then check that every trial was counted once.

    python -m benchmarks.reliability.chaos                 # the target: 1044 trials, 100 worker kills, ...
    python -m benchmarks.reliability.chaos --scale ci      # the scaled-down run the test suite uses
    python -m benchmarks.reliability.chaos --defaults      # default settings, strategy and profile mode
    python -m benchmarks.reliability.chaos --no-faults     # the same job without faults (the baseline)

The run itself is the installed test harness's (kernelfarm.testing.chaos), so this script and
tests/reliability/test_chaos.py run the same code. Faults are triggered by progress (fraction of the
job's trials finished) plus a random delay; kills are kill -9. Everything runs on servers the run
starts in its own directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from kernelfarm.testing.chaos import SCALES, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=sorted(SCALES), default="target")
    parser.add_argument("--seed", type=int, default=1, help="seeds the fault schedule")
    parser.add_argument("--dir", type=Path, default=None,
                        help="state directory, kept (default: a temporary one, removed at the end)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="the farm's default settings (no fast test clocks), default strategy and profile mode",
    )
    parser.add_argument(
        "--spares",
        type=int,
        default=None,
        help="warm spares of the workers (default: one per worker, as `kernelfarm up`; 0: none of any component)",
    )
    parser.add_argument(
        "--restart-delay",
        type=float,
        default=None,
        help="seconds from a kill to the replacement (default 0: `kernelfarm up` wakes on the death)",
    )
    parser.add_argument("--worker-kills", type=int, default=None, help="worker kills (default: the scale's)")
    parser.add_argument("--no-faults", action="store_true", help="inject nothing: the fault-free baseline")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before the run gives up")
    args = parser.parse_args()
    plan = SCALES[args.scale]
    if args.defaults:
        plan = replace(plan, strategy=None, profile="all", fast_clocks=False)
    if args.spares is not None:
        plan = replace(plan, worker_spares=args.spares, coordinator_spares=min(args.spares, 1))
    if args.worker_kills is not None:
        plan = replace(plan, worker_kills=args.worker_kills)
    if args.restart_delay is not None:
        plan = replace(plan, restart_delay_s=args.restart_delay)
    plan = replace(plan, faults=not args.no_faults, timeout_s=args.timeout or plan.timeout_s)
    # `timeout` and CI runners send SIGTERM: exit through the finally blocks that stop the farm.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    directory = args.dir or Path(tempfile.mkdtemp(prefix="kf-chaos-"))
    try:
        report, verdict = run(plan, directory, args.seed)
    finally:
        if args.dir is None:  # the servers' data and logs (~60 MB a run): --dir keeps them for a look
            shutil.rmtree(directory, ignore_errors=True)
    counts: dict[str, int] = {}
    for _, fault in report.events:
        counts[fault] = counts.get(fault, 0) + 1
    summary = {"seconds": report.seconds, "job_seconds": report.job_seconds, "faults": counts, **report.verdict}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2))
    raise SystemExit(0 if verdict.ok else 1)


if __name__ == "__main__":
    main()
