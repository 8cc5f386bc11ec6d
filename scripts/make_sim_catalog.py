#!/usr/bin/env python3
"""Write profiles/boards.toml, the catalog of simulated boards.

Two kinds of board go in:

- boards with real measurements (A100 PCIe, RTX A4000, GTX Titan X): the physics is *fitted*
  to the sweeps in tests/data/replay (power per clock with a shared ridge-point voltage curve,
  time per run with a smooth roofline), so the simulator reproduces them;
- every other board: the physics is *derived* from public facts (clock tables, idle power,
  module ratings, power limits) and a few assumptions marked as inferred (the ridge clock at
  about 70 % of the top clock, 35 % more voltage at the top, the compute load's power at the
  top clock). Their numbers are plausible, not measured: say so where they are used.

Run from the repository root: ``python scripts/make_sim_catalog.py`` (``--check`` exits 1 if
the committed file differs, which a test uses).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.devices.replay_files import read_sweep  # noqa: E402
from governor.devices.sim.fit import fit_power, fit_time  # noqa: E402
from governor.models import memory as mem_model  # noqa: E402

REPLAY = ROOT / "tests" / "data" / "replay"
OUT = ROOT / "profiles" / "boards.toml"

IDLE_ACTIVITY = 0.02
DC_LEAKAGE, JETSON_LEAKAGE = 0.006, 0.008  # static power rise per °C (fraction)
DC_TAU_S, JETSON_TAU_S = 15.0, 20.0
UNIT_S = 0.05  # a unit of the built-in loads takes ~50 ms at the top clock

# The Jetsons' memory clock (EMC) axis (boards.md, "Memory clock"): the EMC rates (MHz) each
# board's L4T offers, and the memory's background power at the top rate (W, inferred: no
# public per-rate measurement; the DDR rails of the tegrastats samples idle at 0.3-0.8 W and
# the memory controller sits in the SoC rail). Physics: governor/models/memory.py, with the
# share of background power that does not scale with the clock (refresh, PHY) and the share
# of the memory load's memory time that is latency, not bandwidth.
EMC_MHZ = {
    "nano": [204.0, 408.0, 665.6, 800.0, 1065.6, 1331.2, 1600.0],
    "tx2": [800.0, 1062.4, 1331.2, 1600.0, 1866.0],
    "xavier-nx": [204.0, 408.0, 665.6, 800.0, 1065.6, 1331.2, 1600.0, 1866.0],
    "agx-xavier": [204.0, 408.0, 665.6, 800.0, 1065.6, 1331.2, 1600.0, 1866.0, 2133.0],
    "orin-nano": [204.0, 665.6, 2133.0],
    "orin-nx": [204.0, 665.6, 2133.0, 3199.0],
    "agx-orin": [204.0, 665.6, 2133.0, 3199.0],
}
EMC_TOP_W = {
    "nano": 0.4,
    "tx2": 0.6,
    "xavier-nx": 0.6,
    "agx-xavier": 1.0,
    "orin-nano": 0.5,
    "orin-nx": 0.7,
    "agx-orin": 1.2,
}
EMC_FIXED_SHARE = 0.3
EMC_LATENCY_SHARE = 0.15


def hz_list(text: str) -> list:
    return [int(x) / 1e6 for x in text.split()]


def steps(lo: float, hi: float, step: float) -> dict:
    return {"min": lo, "max": hi, "step": step}


def expand(clocks) -> list:
    if isinstance(clocks, dict):
        n = int(round((clocks["max"] - clocks["min"]) / clocks["step"]))
        return [clocks["min"] + i * clocks["step"] for i in range(n + 1)]
    return list(clocks)


# ---------------------------------------------------------------------------- facts
# Jetson rails: (name, scope, domains, input rail?)
NANO_RAILS = [
    ("POM_5V_IN", "board input", [], True),
    ("POM_5V_GPU", "gpu", ["gpu"], False),
    ("POM_5V_CPU", "cpu", ["cpu"], False),
]
TX2_RAILS = [
    ("VDD_SYS_GPU", "gpu", ["gpu"], False),
    ("VDD_SYS_SOC", "soc", ["soc"], False),
    ("VDD_4V0_WIFI", "system", ["wifi"], False),
    ("VDD_IN", "board input", [], True),
    ("VDD_SYS_CPU", "cpu", ["cpu"], False),
    ("VDD_SYS_DDR", "memory", ["ddr"], False),
]
NX_RAILS = [
    ("VDD_IN", "board input", [], True),
    ("VDD_CPU_GPU_CV", "cpu+gpu+cv", ["cpu", "gpu", "cv"], False),
    ("VDD_SOC", "soc", ["soc"], False),
]
AGX_XAVIER_RAILS = [
    ("GPU", "gpu", ["gpu"], False),
    ("CPU", "cpu", ["cpu"], False),
    ("SOC", "soc", ["soc"], False),
    ("CV", "cv", ["cv"], False),
    ("VDDRQ", "memory", ["ddr"], False),
    ("SYS5V", "system", ["sys"], False),
]
AGX_ORIN_RAILS = [
    ("VDD_GPU_SOC", "gpu+soc", ["gpu", "soc"], False),
    ("VDD_CPU_CV", "cpu+cv", ["cpu", "cv"], False),
    ("VIN_SYS_5V0", "system", ["sys", "ddr"], False),
    ("VDDQ_VDD2_1V8AO", "memory", ["ddr"], False),
]

JETSONS = [
    dict(
        name="nano",
        display="Jetson Nano 4GB",
        clocks=hz_list(
            "76800000 153600000 230400000 307200000 384000000 460800000 537600000 614400000 691200000 768000000 844800000 921600000"
        ),
        rails=NANO_RAILS,
        domains={"cpu": 0.25, "soc": 0.35},
        idle_gpu_w=0.2,
        load_top_w=4.5,
        rating_w=10.0,
        modes={"MAXN": 921.6, "5W": 640.0},
        facts={"cc": "5.3", "sms": 1, "cuda_cores": 128, "l2_kb": 256},
        l4t="R32 (JetPack 4)",
        inferred=["ridge", "voltage_top", "load_top_w", "domains_w"],
    ),
    dict(
        name="tx2",
        display="Jetson TX2",
        clocks=hz_list(
            "114750000 216750000 318750000 420750000 522750000 624750000 726750000 828750000 930750000 1032750000 1134750000 1236750000 1300500000"
        ),
        rails=TX2_RAILS,
        domains={"cpu": 0.4, "soc": 0.6, "ddr": 0.4, "wifi": 0.1},
        idle_gpu_w=0.3,
        load_top_w=7.0,
        rating_w=15.0,
        modes={"MAXN": 1300.5, "MAXQ": 850.0, "MAXP_CORE_ALL": 1120.0, "MAXP_CORE_ARM": 1120.0},
        facts={"cc": "6.2", "sms": 2, "cuda_cores": 256, "l2_kb": 512},
        l4t="R32 (JetPack 4)",
        inferred=["clocks_mhz (13 steps)", "ridge", "voltage_top", "load_top_w", "domains_w"],
    ),
    dict(
        name="xavier-nx",
        display="Jetson Xavier NX",
        clocks=hz_list(
            "114750000 204000000 306000000 408000000 510000000 599250000 701250000 752250000 803250000 854250000 905250000 956250000 1007250000 1058250000 1109250000"
        ),
        rails=NX_RAILS,
        domains={"cpu": 1.2, "cv": 0.3, "soc": 1.6, "other": 1.0},
        idle_gpu_w=0.5,
        load_top_w=9.0,
        rating_w=20.0,
        modes={
            "20W_6CORE": 1109.25,
            "15W_6CORE": 1109.25,
            "10W_4CORE": 803.25,
            "10W_DESKTOP": 510.0,
        },
        facts={"cc": "7.2", "sms": 6, "cuda_cores": 384, "l2_kb": 512},
        l4t="R32 (JetPack 4)",
        inferred=["ridge", "voltage_top", "load_top_w", "domains_w"],
    ),
    dict(
        name="agx-xavier",
        display="Jetson AGX Xavier",
        clocks=hz_list(
            "114750000 216750000 318750000 420750000 522750000 624750000 675750000 828750000 905250000 1032750000 1198500000 1236750000 1338750000 1377000000"
        ),
        rails=AGX_XAVIER_RAILS,
        domains={"cpu": 1.0, "soc": 2.0, "cv": 0.3, "ddr": 0.8, "sys": 2.0},
        idle_gpu_w=0.8,
        load_top_w=16.0,
        rating_w=30.0,
        modes={"MAXN": 1377.0, "MODE_30W_ALL": 900.0, "MODE_15W": 670.0, "MODE_10W": 520.0},
        facts={"cc": "7.2", "sms": 8, "cuda_cores": 512, "l2_kb": 512},
        l4t="R32 (JetPack 4)",
        inferred=["ridge", "voltage_top", "load_top_w", "domains_w"],
    ),
    dict(
        name="orin-nano",
        display="Jetson Orin Nano 8GB",
        clocks=hz_list("306000000 408000000 510000000 624750000"),
        rails=NX_RAILS,
        domains={"cpu": 0.8, "cv": 0.1, "soc": 1.2, "other": 0.8},
        idle_gpu_w=0.4,
        load_top_w=7.0,
        rating_w=15.0,
        modes={"15W": 624.75, "7W": 408.0},
        facts={"cc": "8.7", "sms": 8, "cuda_cores": 1024, "l2_kb": 2048},
        l4t="R35 (JetPack 5)",
        inferred=["clocks_mhz (408 MHz entry)", "ridge", "voltage_top", "load_top_w", "domains_w"],
    ),
    dict(
        name="orin-nx",
        display="Jetson Orin NX 16GB",
        clocks=[306.0 + 102.0 * i for i in range(7)],
        rails=NX_RAILS,
        domains={"cpu": 1.0, "cv": 0.2, "soc": 1.6, "other": 1.0},
        idle_gpu_w=0.5,
        load_top_w=14.0,
        rating_w=25.0,
        modes={"MAXN": 918.0, "15W": 612.0, "10W": 612.0},
        facts={"cc": "8.7", "sms": 8, "cuda_cores": 1024, "l2_kb": 2048},
        l4t="R35 (JetPack 5)",
        inferred=["idle", "ridge", "voltage_top", "load_top_w", "domains_w"],
    ),
    dict(
        name="agx-orin",
        display="Jetson AGX Orin 64GB",
        clocks=hz_list(
            "306000000 408000000 510000000 612000000 714000000 816000000 918000000 1020000000 1122000000 1224000000 1300500000"
        ),
        rails=AGX_ORIN_RAILS,
        domains={"soc": 2.6, "cpu": 1.0, "cv": 0.2, "sys": 1.5, "ddr": 0.6},
        idle_gpu_w=0.9,
        load_top_w=37.0,
        rating_w=60.0,
        modes={"MAXN": 1300.5, "MODE_50W": 816.0, "MODE_30W": 612.0, "MODE_15W": 408.0},
        facts={"cc": "8.7", "sms": 16, "cuda_cores": 2048, "l2_kb": 4096},
        l4t="R35/R36 (JetPack 5/6)",
        inferred=["ridge", "voltage_top", "domains_w"],
    ),
]

# Datacenter boards derived from facts: clocks, power limit (range), idle W, memory clock.
DATACENTER = [
    dict(
        name="a100-sxm",
        display="NVIDIA A100-SXM4-80GB",
        clocks=steps(210, 1410, 15),
        limit=400.0,
        limit_range=(100.0, 400.0),
        idle=67.0,
        mem=[1593.0],
        avg_s=0.0,
        energy=True,
        facts={"cc": "8.0", "sms": 108, "l2_kb": 40960},
        inferred=["ridge", "voltage_top", "load_top_w"],
    ),
    dict(
        name="h100-pcie",
        display="NVIDIA H100 PCIe",
        clocks=steps(210, 1755, 15),
        limit=350.0,
        limit_range=(200.0, 350.0),
        idle=50.0,
        mem=[1593.0],
        avg_s=1.0,
        energy=True,
        facts={"cc": "9.0", "sms": 114, "l2_kb": 51200},
        inferred=["power_limit", "power_limit_range", "idle", "ridge", "voltage_top", "load_top_w"],
    ),
    dict(
        name="h100-sxm",
        display="NVIDIA H100 SXM5",
        clocks=steps(345, 1980, 15),
        limit=700.0,
        limit_range=(200.0, 700.0),
        idle=75.0,
        mem=[2619.0],
        avg_s=1.0,
        energy=True,
        facts={"cc": "9.0", "sms": 132, "l2_kb": 51200},
        inferred=["lowest clock", "ridge", "voltage_top", "load_top_w"],
    ),
    dict(
        name="v100",
        display="NVIDIA V100-SXM2",
        clocks=steps(135, 1530, 7.5),
        limit=300.0,
        limit_range=(150.0, 300.0),
        idle=40.0,
        mem=[877.0],
        avg_s=0.0,
        energy=True,
        facts={"cc": "7.0", "sms": 80, "l2_kb": 6144},
        inferred=["clocks_mhz", "power_limit_range", "idle", "ridge", "voltage_top", "load_top_w"],
    ),
    dict(
        name="t4",
        display="NVIDIA T4",
        clocks=steps(300, 1590, 15),
        limit=70.0,
        limit_range=(60.0, 70.0),
        idle=27.0,
        mem=[5001.0],
        avg_s=0.0,
        energy=True,
        load_frac=1.15,
        facts={"cc": "7.5", "sms": 40, "l2_kb": 4096},
        inferred=["ridge", "voltage_top", "load_top_w"],
    ),
    dict(
        name="l4",
        display="NVIDIA L4",
        clocks=steps(210, 2040, 15),
        limit=72.0,
        limit_range=(40.0, 72.0),
        idle=28.0,
        mem=[6251.0],
        avg_s=1.0,
        energy=True,
        load_frac=1.15,
        facts={"cc": "8.9", "sms": 58, "l2_kb": 49152},
        inferred=["ridge", "voltage_top", "load_top_w"],
    ),
    dict(
        name="rtx-a6000",
        display="NVIDIA RTX A6000",
        clocks=steps(210, 2100, 15),
        limit=300.0,
        limit_range=(100.0, 300.0),
        idle=30.0,
        mem=[8001.0],
        avg_s=1.0,
        energy=True,
        facts={"cc": "8.6", "sms": 84, "l2_kb": 6144},
        inferred=["lowest clock", "ridge", "voltage_top", "load_top_w"],
    ),
]


# ---------------------------------------------------------------------------- fitting
def r4(x: float) -> float:
    return float(f"{x:.6g}")


# ---------------------------------------------------------------------------- derivation
def derive(
    board: dict,
    f_clocks: list,
    idle_gpu_w: float,
    load_top_w: float,
    r_c_per_w: float,
    leakage: float,
    ridge_frac: float = 0.7,
    v_top: float = 1.35,
) -> dict:
    """Static power, dynamic coefficient and voltage curve from idle and top-clock load power."""
    f_min, f_max = f_clocks[0], f_clocks[-1]
    ridge = f_min + ridge_frac * (f_max - f_min)
    beta = (v_top - 1.0) / (f_max - ridge)
    static = idle_gpu_w
    for _ in range(50):  # S and g depend on each other; converges in a few steps
        g = static * leakage * r_c_per_w
        alpha = ((1 - g) * load_top_w - static) / (f_max * v_top**2)
        static = (1 - g) * idle_gpu_w - alpha * IDLE_ACTIVITY * f_min
    board.update(
        static_w=r4(static), dyn_w_per_mhz=r4(alpha), ridge_mhz=r4(ridge), beta_per_mhz=r4(beta)
    )
    return board


def generic_workloads(f_max: float, load_top_w: float, idle_w: float, mem_clock) -> dict:
    compute = dict(
        description="compute-bound FMA chain filling every SM (the built-in load)",
        compute_mcycles=r4(UNIT_S * f_max),
        mem_s=0.0,
        overlap_k=1.0,
        a_stall=0.0,
        a_busy=1.0,
        mem_w=0.0,
    )
    memory = dict(
        description="memory-bound streaming copy: speed set by DRAM, little gain from clock",
        compute_mcycles=r4(0.3 * UNIT_S * f_max),
        mem_s=UNIT_S,
        overlap_k=3.0,
        a_stall=0.5,
        a_busy=0.5,
        mem_w=r4(0.1 * (load_top_w - idle_w)),
    )
    if mem_clock:
        memory["mem_clock_mhz"] = mem_clock
    return {"compute": compute, "memory": memory}


def jetson_board(spec: dict) -> dict:
    clocks = spec["clocks"]
    r = 40.0 / spec["rating_w"]
    board = dict(
        display_name=spec["display"],
        kind="jetson",
        clocks_mhz=[r4(c) for c in clocks],
        power_limit_w=spec["rating_w"],
        leakage_per_c=JETSON_LEAKAGE,
        ambient_c=30.0,
        thermal_r_c_per_w=r4(r),
        thermal_tau_s=JETSON_TAU_S,
        idle_activity=IDLE_ACTIVITY,
        sensor="ina3221",
        refresh_hz=100.0,
        noise_rel=0.005,
        energy_counter=False,
        power_modes={k: v for k, v in spec["modes"].items()},
        default_power_mode=next(iter(spec["modes"])),
        domains_w=spec["domains"],
        regulator_efficiency=0.9,
        source=f"clock table, rails and modes from public L4T {spec['l4t']} captures; power derived",
        inferred=spec["inferred"],
        facts=spec["facts"],
    )
    derive(board, clocks, spec["idle_gpu_w"], spec["load_top_w"], r, JETSON_LEAKAGE)
    board["rails"] = [
        dict(name=n, scope=s, domains=d, voltage_v=5.0, input=i) for n, s, d, i in spec["rails"]
    ]
    board["workloads"] = generic_workloads(clocks[-1], spec["load_top_w"], spec["idle_gpu_w"], None)
    emc_axis(board, spec["name"])
    return board


def emc_axis(board: dict, name: str) -> None:
    """The memory clock axis of a Jetson: its EMC table (the top rate is the default, as
    BPMP runs it under load), the change of the memory's background power from the top rate
    (0 at the top: the board's figures there are exactly those without the axis), and the
    memory load's memory time at each rate (models.memory)."""
    table = EMC_MHZ[name]
    top = table[-1]
    board["mem_clocks_mhz"] = table
    board["default_mem_clock_mhz"] = top
    p_top = EMC_TOP_W[name]
    board["mem_static_w"] = {
        f"{m:g}": 0.0
        if m == top
        else r4(
            mem_model.mem_background_w(m, p_top, top, EMC_FIXED_SHARE)
            - mem_model.mem_background_w(top, p_top, top, EMC_FIXED_SHARE)
        )
        for m in table
    }
    board["mem_traffic_scales"] = True
    board["inferred"] = list(board["inferred"]) + [
        "memory power (mem_static_w)",
        "EMC latency share",
    ]
    memory = board["workloads"]["memory"]
    t_top = memory["mem_s"]
    memory["mem_s_at"] = {
        f"{m:g}": t_top if m == top else r4(mem_model.mem_time_s(t_top, m, top, EMC_LATENCY_SHARE))
        for m in table
    }


def datacenter_board(spec: dict) -> dict:
    clocks = expand(spec["clocks"])
    load_top = spec.get("load_frac", 0.9) * spec["limit"]
    r = 45.0 / spec["limit"]
    board = dict(
        display_name=spec["display"],
        kind="datacenter",
        clocks_mhz=spec["clocks"],
        power_limit_w=spec["limit"],
        power_limit_range_w=list(spec["limit_range"]),
        mem_clocks_mhz=spec["mem"],
        default_mem_clock_mhz=spec["mem"][0],
        leakage_per_c=DC_LEAKAGE,
        ambient_c=30.0,
        thermal_r_c_per_w=r4(r),
        thermal_tau_s=DC_TAU_S,
        idle_activity=IDLE_ACTIVITY,
        sensor="nvml",
        power_average_s=spec["avg_s"],
        refresh_hz=10.0,
        noise_rel=0.005,
        energy_counter=spec["energy"],
        source="clock table, power limits and idle power from public nvidia-smi captures; power derived",
        inferred=spec["inferred"],
        facts=spec["facts"],
    )
    derive(board, clocks, spec["idle"], load_top, r, DC_LEAKAGE)
    board["rails"] = [dict(name="gpu", scope="gpu", domains=["gpu"], voltage_v=12.0, input=False)]
    board["workloads"] = generic_workloads(clocks[-1], load_top, spec["idle"], spec["mem"][0])
    return board


def fitted_workload(
    path: Path,
    name: str,
    static_w: float,
    mem_bg_w: float,
    g: float,
    alpha: float,
    mem_clock,
    keep_voltage: bool,
) -> tuple:
    sweep = read_sweep(path)
    f, p, t = (np.array(v) for v in (sweep.clock_mhz, sweep.power_w, sweep.time_s))
    k, tm, c = fit_time(f, t)
    ridge, beta, (p0, xs, xb) = fit_power(f, p, t, k, tm, c)
    mem_w = (1 - g) * p0 - static_w - mem_bg_w
    if mem_w < -1e-6:
        raise SystemExit(
            f"{path.name}: static power {static_w} W + memory {mem_bg_w} W exceed the fit's {p0:.1f} W"
        )
    w = dict(
        description=f"{sweep.workload} as measured on {sweep.device}",
        source=f"fitted to tests/data/replay/{path.name} ({sweep.source})",
        compute_mcycles=r4(c),
        mem_s=r4(tm),
        overlap_k=k,
        a_stall=r4((1 - g) * xs / alpha),
        a_busy=r4((1 - g) * xb / alpha),
        mem_w=r4(max(0.0, mem_w)),
    )
    if mem_clock:
        w["mem_clock_mhz"] = mem_clock
    if keep_voltage:
        w["voltage"] = {"ridge_mhz": r4(ridge), "beta_per_mhz": r4(beta)}
    return w, (ridge, beta, p0, xs, xb)


def fitted_single(
    name: str,
    display: str,
    path: Path,
    clocks,
    limit: float,
    limit_range,
    mem: float,
    avg_s: float,
    facts: dict,
    inferred: list,
) -> dict:
    sweep = read_sweep(path)
    f, p, t = (np.array(v) for v in (sweep.clock_mhz, sweep.power_w, sweep.time_s))
    k, tm, c = fit_time(f, t)
    ridge, beta, (p0, xs, xb) = fit_power(f, p, t, k, tm, c)
    r = 45.0 / limit
    static = 0.8 * p0
    for _ in range(50):
        g = static * DC_LEAKAGE * r
        static = 0.8 * (1 - g) * p0
    alpha = (1 - g) * (xs + xb)
    board = dict(
        display_name=display,
        kind="datacenter",
        clocks_mhz=clocks,
        power_limit_w=limit,
        power_limit_range_w=list(limit_range),
        mem_clocks_mhz=[mem],
        default_mem_clock_mhz=mem,
        static_w=r4(static),
        dyn_w_per_mhz=r4(alpha),
        ridge_mhz=r4(ridge),
        beta_per_mhz=r4(beta),
        leakage_per_c=DC_LEAKAGE,
        ambient_c=30.0,
        thermal_r_c_per_w=r4(r),
        thermal_tau_s=DC_TAU_S,
        idle_activity=IDLE_ACTIVITY,
        sensor="nvml",
        power_average_s=avg_s,
        refresh_hz=10.0,
        noise_rel=0.005,
        energy_counter=True,
        source=f"power and speed fitted to tests/data/replay/{path.name} ({sweep.source})",
        inferred=inferred,
        facts=facts,
    )
    compute, _ = fitted_workload(path, "compute", static, 0.0, g, alpha, mem, keep_voltage=False)
    compute["description"] = (
        "compute-bound FP32 FMA loop (Kernel Tuner synthetic_fp32), the built-in load"
    )
    top = expand(clocks)[-1]
    load_top = (static + alpha * top * (1 + beta * max(0, top - ridge)) ** 2) / (1 - g)
    workloads = generic_workloads(top, load_top, static, mem)
    workloads["compute"] = compute
    board["rails"] = [dict(name="gpu", scope="gpu", domains=["gpu"], voltage_v=12.0, input=False)]
    board["workloads"] = workloads
    return board


def titan_x() -> dict:
    files = sorted(REPLAY.glob("titanx_*_mem*.csv"))
    limit, r = 250.0, 45.0 / 250.0
    static, mem_bg = 15.0, {810.0: 12.0, 3505.0: 58.0}
    g = static * DC_LEAKAGE * r
    # The board's own curve and dynamic coefficient come from the compute-bound md5hash sweep.
    ref = REPLAY / "titanx_md5hash_mem3505.csv"
    sw = read_sweep(ref)
    f, p, t = (np.array(v) for v in (sw.clock_mhz, sw.power_w, sw.time_s))
    k, tm, c = fit_time(f, t)
    ridge, beta, (_, xs, xb) = fit_power(f, p, t, k, tm, c)
    alpha = (1 - g) * (xs + xb)
    workloads = {}
    for path in files:
        app, mem = path.stem.split("_")[1], float(path.stem.split("mem")[-1])
        w, _ = fitted_workload(path, app, static, mem_bg[mem], g, alpha, mem, keep_voltage=True)
        workloads[f"{app}-mem{int(mem)}"] = w
    compute = dict(workloads["md5hash-mem3505"])
    compute["description"] = "compute-bound hashing (md5hash as measured), the built-in load"
    generic = generic_workloads(1164.0, 200.0, 75.0, 3505.0)
    board = dict(
        display_name="NVIDIA GeForce GTX TITAN X",
        kind="datacenter",
        clocks_mhz=[
            595.0,
            633.0,
            671.0,
            709.0,
            747.0,
            785.0,
            823.0,
            861.0,
            899.0,
            937.0,
            975.0,
            1013.0,
            1050.0,
            1088.0,
            1126.0,
            1164.0,
        ],
        power_limit_w=limit,
        power_limit_range_w=[150.0, 275.0],
        mem_clocks_mhz=[810.0, 3505.0],
        default_mem_clock_mhz=3505.0,
        mem_static_w={"810": mem_bg[810.0], "3505": mem_bg[3505.0]},
        static_w=static,
        dyn_w_per_mhz=r4(alpha),
        ridge_mhz=r4(ridge),
        beta_per_mhz=r4(beta),
        leakage_per_c=DC_LEAKAGE,
        ambient_c=30.0,
        thermal_r_c_per_w=r4(r),
        thermal_tau_s=DC_TAU_S,
        idle_activity=IDLE_ACTIVITY,
        sensor="nvml",
        power_average_s=0.0,
        refresh_hz=10.0,
        noise_rel=0.005,
        energy_counter=False,
        source="power and speed fitted to the gpuPTXModel Titan X sweeps in tests/data/replay (INESC-ID, BSD-3-Clause); "
        "each measured application is a workload with its own fitted voltage curve",
        inferred=[
            "clocks_mhz (only the measured clocks)",
            "power_limit_range",
            "static/memory split of idle power",
        ],
        facts={"cc": "5.2", "sms": 24, "l2_kb": 3072},
    )
    board["rails"] = [dict(name="gpu", scope="gpu", domains=["gpu"], voltage_v=12.0, input=False)]
    board["workloads"] = {"compute": compute, "memory": generic["memory"], **workloads}
    return board


def build_catalog() -> dict:
    boards = {}
    for spec in JETSONS:
        boards[spec["name"]] = jetson_board(spec)
    boards["a100-pcie"] = fitted_single(
        "a100-pcie",
        "NVIDIA A100-PCIE-40GB",
        REPLAY / "a100_pcie_fp32_10pt.csv",
        steps(210, 1410, 15),
        250.0,
        (150.0, 250.0),
        1215.0,
        0.0,
        {"cc": "8.0", "sms": 108, "l2_kb": 40960},
        ["power_limit", "power_limit_range"],
    )
    boards["rtx-a4000"] = fitted_single(
        "rtx-a4000",
        "NVIDIA RTX A4000",
        REPLAY / "rtxa4000_fp32_10pt.csv",
        steps(210, 2100, 15),
        140.0,
        (100.0, 140.0),
        7001.0,
        1.0,
        {"cc": "8.6", "sms": 48, "l2_kb": 4096},
        ["clocks_mhz (210-2100 step 15)", "power_limit_range"],
    )
    for spec in DATACENTER:
        boards[spec["name"]] = datacenter_board(spec)
    boards["titan-x"] = titan_x()
    return boards


# ---------------------------------------------------------------------------- TOML out
def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(r4(v))
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _key(k: str) -> str:
    k = str(k)
    return k if k.replace("-", "").replace("_", "").isalnum() and not k[0].isdigit() else f'"{k}"'


def to_toml(boards: dict) -> str:
    lines = [
        "# Simulated boards for governor (sim:<name>). GENERATED by scripts/make_sim_catalog.py: edit that script.",
        "# Units: MHz, W, s, degC. 'inferred' lists values not read from a capture or measurement.",
        "# Physics: see governor/devices/sim/physics.py. Measured data: tests/data/README.md.",
        "schema_version = 1",
        "",
    ]
    for name, b in boards.items():
        lines.append(f"[boards.{_key(name)}]")
        for k, v in b.items():
            if k in ("workloads", "rails"):
                continue
            lines.append(f"{_key(k)} = {_value(v)}")
        for rail in b["rails"]:
            lines.append(f"[[boards.{_key(name)}.rails]]")
            lines.extend(f"{_key(k)} = {_value(v)}" for k, v in rail.items())
        for wname, w in b["workloads"].items():
            lines.append(f"[boards.{_key(name)}.workloads.{_key(wname)}]")
            lines.extend(f"{_key(k)} = {_value(v)}" for k, v in w.items())
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if profiles/boards.toml is stale"
    )
    args = parser.parse_args()
    text = to_toml(build_catalog())
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("profiles/boards.toml is up to date" if same else "profiles/boards.toml is stale")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
