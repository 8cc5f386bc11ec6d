"""Every configuration of every library kernel that the selector or a per-clock table can
hand out, on every catalog board, in both precisions, run as real CUDA C on the CPU
emulation (tests/fakes/cuda_cpu) through the library's own launch code, against the NumPy
reference; each under three schedules of a block's threads (forward, reversed, shuffled),
which must agree bit for bit (a race that one schedule hides changes another's result)."""

from __future__ import annotations

import shutil
from typing import Dict, List, Tuple

import numpy as np
import pytest
from fakes.cuda_cpu import CpuCupy, EmulationError, build

from governor.devices.sim.catalog import board_names
from governor.kernels import KERNELS, board_arch, kernel_source, plan_launch, select_kernel_tiles
from governor.kernels.cupy_run import run_kernel
from governor.kernels.mapping import LaunchPlan
from governor.kernels.operating_points import candidate_plans
from governor.tuning.occupancy import arch_limits

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")

PRECISIONS = ("single", "double")
SCHEDULES = (("forward", 0), ("reversed", 0), ("shuffled", 7))


def _configurations() -> List[Tuple[str, LaunchPlan]]:
    """(board, plan) of every configuration a board's selector or table can hand out: the
    selector's tiles at its thread block, and every table candidate (tile options x thread
    targets that pass the board's limits, a superset of what NVRTC's figures let through)."""
    out = []
    for board in board_names():
        limits = board_arch(board).limits
        for kernel in KERNELS:
            for precision in PRECISIONS:
                sel = select_kernel_tiles(kernel, board, precision)
                chosen = plan_launch(
                    kernel, sel.tiles, limits, None, sel.shared_fraction, precision
                )
                plans = candidate_plans(kernel, board, precision)
                assert chosen in plans  # the selector's own configuration is a candidate
                out += [(board, plan) for plan in plans]
    return out


@pytest.fixture(scope="module")
def emulation(emulation_cache):
    configs = _configurations()
    unique: Dict[str, LaunchPlan] = {}
    for _, plan in configs:
        unique.setdefault(kernel_source(plan), plan)
    cache = emulation_cache
    binary = build(((src, KERNELS[p.kernel].entry) for src, p in unique.items()), cache)
    return configs, unique, binary


def _run(cp: CpuCupy, plan: LaunchPlan, schedule: Tuple[str, int]) -> Tuple[object, object]:
    description = KERNELS[plan.kernel]
    dtype = np.float64 if plan.precision == "double" else np.float32
    problem = description.problem(np.random.default_rng(1), plan.tiles, dtype)
    cp.schedule = schedule
    out = run_kernel(plan, *(cp.asarray(a) for a in problem.arrays), cupy=cp, **problem.params)
    return cp.asnumpy(out), problem


def test_every_configuration_matches_numpy_under_every_schedule(emulation, record_property):
    configs, unique, binary = emulation
    per_kernel: Dict[str, int] = {}
    for _, plan in configs:
        per_kernel[plan.kernel] = per_kernel.get(plan.kernel, 0) + 1
    bad = []
    with CpuCupy(binary) as cp:
        for plan in unique.values():
            description = KERNELS[plan.kernel]
            results = []
            for schedule in SCHEDULES:
                got, problem = _run(cp, plan, schedule)
                results.append(got)
            want = description.expected(problem)
            scale = float(np.abs(want).max()) or 1.0
            error = float(np.abs(results[0].astype(np.float64) - want).max()) / scale
            if error > description.tolerance_for(plan.precision):
                bad.append(
                    f"{plan.kernel} {plan.tiles} {plan.thread_block} {plan.precision}: "
                    f"relative error {error:.2e}"
                )
            for (name, _), other in zip(SCHEDULES[1:], results[1:]):
                if not np.array_equal(other, results[0], equal_nan=False):
                    bad.append(
                        f"{plan.kernel} {plan.tiles} {plan.thread_block} "
                        f"{plan.precision}: the {name} schedule gives another result"
                    )
    summary = (
        f"{len(configs)} configurations (board x kernel x precision x tile x thread block; "
        f"{', '.join(f'{k} {n}' for k, n in sorted(per_kernel.items()))}), "
        f"{len(unique)} distinct sources, {len(SCHEDULES)} schedules each"
    )
    print(summary)
    record_property("emulated_configurations", len(configs))
    record_property("emulated_sources", len(unique))
    assert not bad, "\n".join(bad)
    assert len(unique) >= 4 * len(KERNELS)


def test_the_emulation_catches_a_missing_barrier_and_a_write_out_of_bounds(emulation_cache):
    limits = arch_limits("8.0")
    gemm = plan_launch("gemm", {"i": 8, "j": 64, "k": 8}, limits, 64, 0.0, "double")
    jacobi = plan_launch("jacobi-2d", {"i": 4, "j": 64}, limits, None, 0.0, "double")
    # the barrier between staging A's slab and reading it, taken out
    no_barrier = kernel_source(gemm).replace("__syncthreads();", "", 1)
    # rows up to n instead of n - 1: the last one writes past the end of B
    past_end = kernel_source(jacobi).replace("i >= n - 1) continue;", "i >= n + 1) continue;")
    assert no_barrier != kernel_source(gemm) and past_end != kernel_source(jacobi)
    binary = build([(no_barrier, "gemm"), (past_end, "jacobi_2d")], emulation_cache)
    rng = np.random.default_rng(0)
    gemm_problem = KERNELS["gemm"].problem(rng, gemm.tiles, np.float64)
    want = KERNELS["gemm"].expected(gemm_problem)
    with CpuCupy(binary) as cp:
        errors = []
        for schedule in SCHEDULES:
            cp.schedule = schedule
            func = cp.RawKernel(no_barrier, "gemm")
            arrays = [cp.asarray(a) for a in gemm_problem.arrays]
            got = cp.asnumpy(KERNELS["gemm"].run(cp, func, gemm, *arrays, **gemm_problem.params))
            errors.append(float(np.abs(got - want).max()))
        assert max(errors) > 1e-3  # some schedule reads the slab before it is staged
        func = cp.RawKernel(past_end, "jacobi_2d")
        a = cp.asarray(KERNELS["jacobi-2d"].problem(rng, jacobi.tiles, np.float64).arrays[0])
        with pytest.raises(EmulationError, match="a write outside array"):
            KERNELS["jacobi-2d"].run(cp, func, jacobi, a, steps=1)
