"""Instructions per control step on simulated boards, counted by valgrind (issue 15, item 7).

    python scripts/bench_step_instructions.py [--boards agx-orin,a100-sxm] [--steps 2000]
    python scripts/bench_step_instructions.py --tree /path/to/other/checkout   # A/B

The wall-clock medians of ``bench_runtime.py --only overhead`` move with the host: on the
2-core machine the same code's battery step measured 82 and 140 µs ten minutes apart, and
the power-cap step 47 and 76 µs. This bench counts what the code itself does instead:
each step kind of the overhead table (its own loop, ``_ticking_steps``, and policies,
``overhead_spec``, imported from bench_runtime.py; the same profiles) runs under ``valgrind --tool=callgrind``, which dumps
its count at every ``time.perf_counter()`` call; the loop calls it just before and just
after each ``gov.update()``, so every second part is one control step. Printed: the median
and 95th percentile of instructions per step over all the steps, as the overhead table's
medians span them. The count is the same at any load, so two trees compare on it where
their wall-clock medians cannot; it is not a time (a step's instructions run at 3-5 per
ns here). Needs valgrind (Debian's ``valgrind``); about a minute per row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# the child: one step kind on one board, the overhead bench's own loop (_ticking_steps:
# time.perf_counter() just before and just after each update)
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import logging
logging.getLogger("governor.runtime").addHandler(logging.NullHandler())
import governor
from governor.runtime import Governor
sys.path.insert(1, sys.argv[6])  # (governor is the tree's, imported above)
from bench_runtime import _ticking_steps, overhead_spec
board, kind, steps, profile_path = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
doc = json.load(open(profile_path)) if profile_path != "-" else None
spec, busy_s, tick = overhead_spec(kind, board)
dev = governor.open_device(f"sim:{board}")
dev.run_workload("compute")
with Governor(dev, spec, profile=doc, background=False) as gov:
    _ticking_steps(gov, dev, steps, busy_s=busy_s, tick=tick)
"""


def step_counts(board: str, kind: str, steps: int, profile, tree: Path = REPO) -> list:
    """Instructions of each ``gov.update()`` of one run, in order, of the ``governor``
    package in ``tree``."""
    with tempfile.TemporaryDirectory(prefix="governor-steps-") as tmp:
        prof = "-"
        if profile is not None:
            prof = os.path.join(tmp, "profile.json")
            with open(prof, "w") as f:
                json.dump(profile, f)
        out = os.path.join(tmp, "callgrind.out")
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=time_perf_counter",
            "--combine-dumps=yes",
            "--dump-line=no",
            f"--callgrind-out-file={out}",
            os.path.realpath(sys.executable),
            "-c",
            CHILD,
            str(tree),
            board,
            kind,
            str(steps),
            prof,
            str(REPO / "scripts"),
        ]
        env = dict(os.environ, PYTHONHASHSEED="0")
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"bench_step_instructions: {board} {kind} failed: {tail}")
        parts = []
        with open(out) as f:
            for line in f:
                if line.startswith("summary:"):
                    parts.append(int(line.split()[1]))
    # part 1: the start, up to the first mark; then (update, the loop's rest) by turns
    updates = parts[1::2]
    if len(updates) < steps:
        raise RuntimeError(f"{board} {kind}: {len(updates)} steps counted of {steps}")
    return updates[:steps]


def main() -> None:
    # as bench_runtime.py: no stored state or profile of this machine's user is read
    os.environ.setdefault("GOVERNOR_STATE_DIR", tempfile.mkdtemp(prefix="governor-bench-state-"))
    os.environ.setdefault("GOVERNOR_DATA_DIR", tempfile.mkdtemp(prefix="governor-bench-data-"))
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_runtime import OVERHEAD_KINDS as KINDS
    from bench_runtime import calibrated

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="agx-orin,a100-sxm")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    parser.add_argument(
        "--tree", type=Path, default=REPO, help="checkout whose governor package is counted"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit(
            "bench_step_instructions: valgrind is not installed (Debian: apt-get install valgrind)"
        )
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or args.steps < 10:
        sys.exit(f"bench_step_instructions: kinds are {', '.join(KINDS)}; steps >= 10")
    if not (args.tree / "governor" / "__init__.py").is_file():
        sys.exit(f"bench_step_instructions: {args.tree} holds no governor package")
    print("| step | board | instructions, median | p95 | steps |")
    print("|---|---|---:|---:|---:|")
    for board in [b for b in args.boards.split(",") if b]:
        doc = calibrated(board)
        for kind in kinds:
            profile = None if kind == "power-cap" else doc
            counts = sorted(step_counts(board, kind, args.steps, profile, args.tree))
            med = statistics.median(counts)
            p95 = counts[int(0.95 * len(counts))]
            print(f"| {kind} | sim:{board} | {med:,.0f} | {p95:,.0f} | {len(counts)} |", flush=True)


if __name__ == "__main__":
    main()
