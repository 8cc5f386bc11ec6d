"""The runtime path stays light: no numpy or scipy after governing a board for a while."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import json, sys
import governor
from governor.runtime import Governor
dev = governor.open_device("sim:agx-orin")
dev.run_workload("compute")
with Governor(dev, {"policy": "power-cap", "cap_w": 25}, background=False) as gov:
    for _ in range(50):
        gov.step()
with Governor(dev, {"policy": "throughput", "rate_hz": 30}, background=False) as gov:
    for _ in range(10):
        gov.tick(); gov.step()
print(json.dumps(sorted(sys.modules)))
"""


def test_runtime_imports_neither_scipy_nor_numpy():
    out = subprocess.run(
        [sys.executable, "-c", CODE], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert not [m for m in ("scipy", "numpy", "rich", "typer") if m in loaded]
