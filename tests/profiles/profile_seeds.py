"""Valid profile documents to start from: real calibrations of simulated boards (two loads
each, so ``workloads`` has two entries, plus tuning caches) and the shipped profiles."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List

SHIPPED = Path(__file__).resolve().parents[2] / "profiles"


@lru_cache(maxsize=None)
def _calibrated(board: str) -> str:
    import governor
    from governor.calibrate.loads import make_load
    from governor.calibrate.procedure import DeviceProber, calibrate
    from governor.profiles.profile import build_profile

    with governor.open_device(f"sim:{board}") as dev:
        doc: Dict[str, Any] = {}
        for load in ("builtin", "memory"):
            the_load = make_load(dev, load)
            result = calibrate(DeviceProber(dev, the_load))
            doc = build_profile(dev, result, {"kind": the_load.kind, "name": the_load.name}, doc)
    doc["tuning"] = {
        "tiles": {"gemm/double": {"tiles": {"i": 32, "j": 64, "k": 8}, "objective": 1.5}},
        "blocks": {
            "vector-add@energy": {"blocks": [[256, 1, 1]], "clock_mhz": 918.0, "energy_j": 0.2}
        },
        "hhc-constants": {board: {"name": board}},
    }
    return json.dumps(doc)


def calibrated(board: str = "agx-orin") -> Dict[str, Any]:
    """A fresh copy of a calibrated profile of ``sim:<board>``."""
    return json.loads(_calibrated(board))


def shipped() -> List[Dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(SHIPPED.glob("*.json"))]


def all_seeds(boards=("agx-orin", "nano", "t4", "rtx-a4000")) -> List[Dict[str, Any]]:
    docs = [calibrated(b) for b in boards] + shipped()
    docs.append({"schema_version": 1, "board": "orin-nx", "tuning": calibrated()["tuning"]})
    return [copy.deepcopy(d) for d in docs]
