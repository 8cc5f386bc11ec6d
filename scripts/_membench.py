"""What the memory-clock benches share (``bench_mem_battery.py``, ``bench_mem_cap.py``,
``bench_ppw_pairs.py``, ``bench_online_ppw_pairs.py``): the simulated boards with a memory
axis, temporary data and state directories, a board calibrated in a subprocess (``governor
calibrate --device sim:NAME``, this checkout's package) and the (core, memory) pair its
profile keeps. Not a bench itself: it prints no table.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def memory_boards(names, prog):
    """(the catalog, the names of its boards with more than one memory clock in catalog
    order): only those of ``names`` where given; an unknown name, or none with a memory axis,
    exits with one line."""
    from governor.devices.sim.catalog import load_catalog

    catalog = load_catalog()
    unknown = [n for n in names if n not in catalog]
    if unknown:
        sys.exit(f"{prog}: unknown boards: {', '.join(unknown)}")
    boards = [
        n for n, b in catalog.items() if len(b.mem_clocks_mhz) > 1 and (not names or n in names)
    ]
    if not boards:
        sys.exit(f"{prog}: none of these boards has more than one memory clock")
    return catalog, boards


@contextlib.contextmanager
def temp_dirs():
    """GOVERNOR_DATA_DIR and GOVERNOR_STATE_DIR in a temporary directory for the block;
    yields the data directory (where ``calibrated`` finds the profiles)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GOVERNOR_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["GOVERNOR_STATE_DIR"] = str(Path(tmp) / "state")
        yield Path(tmp) / "data"


def calibrated(name, data_dir, prog):
    """The profile document ``governor calibrate --device sim:NAME`` writes under
    ``data_dir`` (run in a subprocess with the environment's data directory); a failure
    exits with one line."""
    done = subprocess.run(
        [sys.executable, "-m", "governor", "calibrate", "--device", f"sim:{name}"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    if done.returncode != 0:
        sys.exit(f"{prog}: calibrating sim:{name} failed: {done.stderr}")
    found = sorted(Path(data_dir).rglob(f"{name}.json"))
    if not found:
        sys.exit(f"{prog}: no profile for {name} under {data_dir}")
    return json.loads(found[0].read_text())


def profile_pair(doc):
    """(core, memory) MHz of the pair the profile keeps for its calibration load
    (``tuning.ppw-pair``), None where it keeps none."""
    from governor.profiles.profile import ppw_pair

    return ppw_pair(doc)
