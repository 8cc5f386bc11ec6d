"""What the decision-digest scripts share (check_battery_decisions.py, check_decisions.py):
the boards checked, their profiles calibrated once by this checkout, and the child process
that runs the missions with the ``governor`` package of another checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, List

REPO = Path(__file__).resolve().parents[1]


def run_missions(prog: str, tree: Path, boards_text: str, argv: Callable[[str], List[str]]) -> None:
    """Calibrate the boards named in ``boards_text`` (comma-separated; empty: every catalog
    board) and run ``[python, "-c", *argv(profiles_json_path)]``; exits with one line on a
    bad board or a failed child."""
    # as bench_runtime.py: no stored state or profile of this machine's user is read
    os.environ.setdefault("GOVERNOR_STATE_DIR", tempfile.mkdtemp(prefix="governor-bench-state-"))
    os.environ.setdefault("GOVERNOR_DATA_DIR", tempfile.mkdtemp(prefix="governor-bench-data-"))
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_runtime import calibrated

    from governor.devices.sim.catalog import board_names

    boards = [b for b in boards_text.split(",") if b] or list(board_names())
    unknown = [b for b in boards if b not in board_names()]
    if unknown:
        sys.exit(f"{prog}: unknown boards {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="governor-decisions-") as tmp:
        profiles = os.path.join(tmp, "profiles.json")
        with open(profiles, "w") as f:
            json.dump({b: calibrated(b) for b in boards}, f)
        env = dict(os.environ, PYTHONHASHSEED="0")
        done = subprocess.run([sys.executable, "-c", *argv(profiles)], env=env)
        if done.returncode:
            sys.exit(f"{prog}: the missions failed in {tree} (above)")
