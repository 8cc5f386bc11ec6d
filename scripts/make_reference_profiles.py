#!/usr/bin/env python3
"""Write the shipped reference profiles fitted from real measurements.

profiles/a100-pcie.json  <- tests/data/replay/a100_pcie_fp32_10pt.csv (Kernel Tuner tutorial, Apache-2.0)
profiles/rtx-a4000.json  <- tests/data/replay/rtxa4000_fp32_10pt.csv (Kernel Tuner project, Apache-2.0)

Every measured clock is used; the PPW-optimal clock is the measured clock with the least
energy per run (the probes are trusted over the model), the ridge the fitted one. The
fingerprint carries the board's full clock table from the catalog, so the profile applies to
the real card (and to its simulated twin, which is fitted to the same data).
Run from the repository root: ``python scripts/make_reference_profiles.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor._version import __version__  # noqa: E402
from governor.calibrate.procedure import Probe  # noqa: E402
from governor.devices.replay_files import read_sweep  # noqa: E402
from governor.devices.sim.catalog import get_board  # noqa: E402
from governor.models.power import fit_power_model  # noqa: E402
from governor.models.time import fit_time_model  # noqa: E402
from governor.profiles.store import SCHEMA_VERSION, write_profile_file  # noqa: E402

SOURCES = {
    "a100-pcie": (
        "a100_pcie_fp32_10pt.csv",
        "NVIDIA A100-PCIE-40GB",
        "Kernel Tuner tutorial data (KernelTuner/kernel_tuner_tutorial), Apache-2.0",
    ),
    "rtx-a4000": (
        "rtxa4000_fp32_10pt.csv",
        "NVIDIA RTX A4000",
        "Kernel Tuner project test data (KernelTuner/kernel_tuner), Apache-2.0",
    ),
}


def reference_profile(board_name: str) -> dict:
    filename, device_name, notice = SOURCES[board_name]
    sweep = read_sweep(ROOT / "tests" / "data" / "replay" / filename)
    power = fit_power_model(sweep.clock_mhz, sweep.power_w)
    time = fit_time_model(sweep.clock_mhz, sweep.time_s)
    probes = [
        Probe(
            requested_mhz=r,
            clock_mhz=c,
            power_w=p,
            time_per_unit_s=t,
            status="ok",
            method="recorded",
        )
        for r, c, p, t in zip(sweep.requested_mhz, sweep.clock_mhz, sweep.power_w, sweep.time_s)
    ]
    best = min(probes, key=lambda p: p.energy_per_unit_j)
    board = get_board(board_name)
    entry = {
        "load": {
            "kind": "builtin",
            "name": "compute-bound FP32 FMA loop (Kernel Tuner synthetic_fp32)",
        },
        "created": "reference",
        "device_uri": f"replay:tests/data/replay/{filename}",
        "ppw_optimal_clock_mhz": best.clock_mhz,
        "ridge_clock_mhz": power.ridge_clock_mhz,
        "idle_power_w": None,
        "power_model": power.to_dict(),
        "time_model": time.to_dict(),
        "probes": [p.to_dict() for p in probes],
        "notes": [f"fitted to all {len(probes)} measured clocks"],
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "board": board_name,
        "fingerprint": {
            "model": board_name,
            "name": device_name,
            "kind": "reference",
            "serial": None,
            "uuid": None,
            "driver_version": None,
            "l4t_version": None,
            "supported_clocks_mhz": list(board.clocks_mhz),
        },
        "created": "reference",
        "provenance": {
            "source": f"measurements by others: {notice}",
            "data": f"tests/data/replay/{filename}",
            "generator": "scripts/make_reference_profiles.py",
            "versions": {"governor": __version__},
        },
        "ppw_optimal_clock_mhz": entry["ppw_optimal_clock_mhz"],
        "ridge_clock_mhz": entry["ridge_clock_mhz"],
        "power_model": entry["power_model"],
        "time_model": entry["time_model"],
        "load": entry["load"],
        "probes": entry["probes"],
        "workloads": {"builtin": entry},
        "tuning": {},
    }


def main() -> int:
    for board_name in SOURCES:
        path = write_profile_file(
            ROOT / "profiles" / f"{board_name}.json", reference_profile(board_name)
        )
        doc = reference_profile(board_name)
        print(
            f"wrote {path.relative_to(ROOT)}: PPW-optimal {doc['ppw_optimal_clock_mhz']:g} MHz, ridge {doc['ridge_clock_mhz']:.0f} MHz"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
