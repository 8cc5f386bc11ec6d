"""Real kernels on the GPU: the kernel library's tile configurations, and the SAXPY kernel
``tune-blocks`` tunes.

The kernel library (``governor.kernels``, built separately) is reached through one function,
so this step is wired to it in one place::

    governor.kernels.gpu_check_cases(cupy, cuda_index, compute_capability) -> [case, ...]

where each case has ``kernel`` (name), ``tiles`` (the tile sizes, a dict), ``role``
(``"default"``: a plain default tiling, ``"chosen"``: the selector's choice for this board,
or ``"other"``), ``run()`` (one launch on the current CUDA device; may return before it
ends), ``max_error()`` (largest relative error of the last result against the NumPy
reference) and ``tolerance`` (the largest error that counts as correct). Without the module
(or without CuPy) the step says why and skips.
"""

from __future__ import annotations

import importlib
import math
import statistics
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

from gpucheck.core import Context, Skip, StepOut, one_line, rel, rounded

__all__ = ["kernels", "measure_runs", "saxpy_bench"]

_SAXPY = r"""
extern "C" __global__ void governor_saxpy(const float a, const float *x, float *y,
                                          const unsigned int n) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
SAXPY_ELEMENTS = 1 << 25  # 128 MiB per array: streams from memory on any GPU


def _cupy_and_index(ctx: Context) -> Tuple[Any, int]:
    """CuPy and the CUDA ordinal of the checked GPU.

    Raises:
        Skip: no CuPy, or CUDA does not see the GPU.
    """
    from governor.calibrate import cuda_loads

    try:
        cupy = cuda_loads._import_cupy()
    except ImportError:
        raise Skip("CuPy is not installed (pip install cupy-cuda12x or cupy-cuda13x)") from None
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
        return cupy, cuda_loads._cuda_index(cupy, count, ctx.device)
    except Exception as err:
        raise Skip(f"CUDA does not see the GPU: {one_line(err)}") from None


def compute_capability(cupy: Any, index: int) -> str:
    """``"9.0"`` for CuPy's ``"90"``."""
    text = str(cupy.cuda.Device(index).compute_capability)
    return f"{text[:-1]}.{text[-1]}"


def measure_runs(
    ctx: Context, run: Callable[[], None], sync: Callable[[], None], runs: int
) -> Tuple[float, float]:
    """(time s, energy J) per run of ``runs`` back-to-back runs: time on the wall clock,
    energy from the energy counter (else mean power times time)."""
    dev = ctx.device
    run()
    sync()  # warm: compiled, caches and clocks up
    s0 = dev.sample()
    t0 = time.perf_counter()
    for _ in range(runs):
        run()
    sync()
    elapsed = time.perf_counter() - t0
    s1 = dev.sample()
    if s0.energy_j is not None and s1.energy_j is not None and s1.energy_j > s0.energy_j:
        energy = s1.energy_j - s0.energy_j
    else:
        energy = 0.5 * ((s0.power_w or 0.0) + (s1.power_w or 0.0)) * elapsed
    return elapsed / runs, energy / runs


def saxpy_bench(ctx: Context, clocks: Sequence[float]) -> Tuple[Any, str, Any, str]:
    """(bench, compute capability, kernel resources, name) of SAXPY on the checked GPU: each
    measurement locks the clock and runs the kernel at the block size for about
    ``tune_run_s``."""
    from governor.tuning.blocks import KernelResources, Measurement
    from governor.tuning.blocks.bench import CallableBench

    cupy, index = _cupy_and_index(ctx)
    dev = ctx.device
    with cupy.cuda.Device(index):
        kernel = cupy.RawKernel(_SAXPY, "governor_saxpy")
        x = cupy.ones(SAXPY_ELEMENTS, dtype=cupy.float32)
        y = cupy.zeros(SAXPY_ELEMENTS, dtype=cupy.float32)
        n = cupy.uint32(SAXPY_ELEMENTS)
        a = cupy.float32(1e-3)

        def launch(threads: int) -> Callable[[], None]:
            grid = (SAXPY_ELEMENTS + threads - 1) // threads
            return lambda: kernel((grid,), (threads,), (a, x, y, n))

        sync = cupy.cuda.Device(index).synchronize
        per_run, _ = measure_runs(ctx, launch(256), sync, 5)
    runs = max(3, int(math.ceil(ctx.settings.tune_run_s / max(per_run, 1e-6))))

    done = [0]

    def point(block: Tuple[int, int, int], clock_mhz: float) -> Any:
        if ctx.out_of_time(0):
            raise RuntimeError(f"tune-blocks ran past its budget after {done[0]} measurements")
        done[0] += 1
        threads = block[0] * block[1] * block[2]
        dev.lock_gpu_clocks(clock_mhz)
        try:
            with cupy.cuda.Device(index):
                t, e = measure_runs(ctx, launch(threads), sync, runs)
        except Exception:  # a block that cannot launch is a failed point, not an error
            return Measurement(math.inf, math.inf)
        return Measurement(t, e, clock_mhz=dev.sample().gpu_clock_mhz)

    resources = KernelResources(
        int(getattr(kernel, "num_regs", 0) or 0),
        int(getattr(kernel, "shared_size_bytes", 0) or 0),
        0,
    )
    cc = compute_capability(cupy, index)
    return CallableBench(point, clocks), cc, resources, f"saxpy ({SAXPY_ELEMENTS} floats)"


def kernels(ctx: Context, out: StepOut) -> None:
    """The kernel library at a few tile configurations: correct against NumPy, time and
    energy each, and the selector's choice against a plain default tiling."""
    try:  # the module as sys.modules holds it (a test may stand in for it there)
        library = importlib.import_module("governor.kernels")
    except ImportError:
        raise Skip("governor.kernels not available") from None
    cases_of = getattr(library, "gpu_check_cases", None)
    if cases_of is None:
        raise Skip("governor.kernels has no gpu_check_cases(cupy, cuda_index, cc)")
    cupy, index = _cupy_and_index(ctx)
    cc = compute_capability(cupy, index)
    rows: List[Dict[str, Any]] = []
    with cupy.cuda.Device(index):
        sync = cupy.cuda.Device(index).synchronize
        for case in cases_of(cupy, index, cc):
            if ctx.out_of_time(3):
                out.note("budget spent before every configuration ran")
                break
            row: Dict[str, Any] = {
                "kernel": case.kernel,
                "tiles": dict(case.tiles),
                "role": case.role,
            }
            try:
                case.run()
                sync()
                error = float(case.max_error())
                per_run, _ = measure_runs(ctx, case.run, sync, 3)
                runs = max(3, int(math.ceil(ctx.settings.tune_run_s / max(per_run, 1e-6))))
                t, e = measure_runs(ctx, case.run, sync, runs)
            except Exception as err:
                row["error"] = one_line(err)
                out.check(f"{case.kernel} {case.tiles} runs", False, row["error"], "runs")
                rows.append(row)
                continue
            row.update(max_error=error, correct=error <= case.tolerance, time_s=t, energy_j=e)
            out.check(
                f"{case.kernel} {case.tiles} correct",
                error <= case.tolerance,
                error,
                f"<= {case.tolerance:g} relative",
            )
            rows.append(row)
    out.figure("configurations", rows)
    gains = _chosen_over_default(rows)
    out.figure("perf_per_watt_chosen_over_default", {k: rounded(v) for k, v in gains.items()})
    if gains:
        median = statistics.median(gains.values())
        out.figure("median_gain", rounded(median))
        out.summary = (
            f"{len(rows)} configurations; chosen vs default tiles: median "
            f"{rounded(median)}x performance per watt (EATSS reports 1.5x on GA100)"
        )
    else:
        out.summary = f"{len(rows)} configurations"


def _chosen_over_default(rows: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """Per kernel: work per joule of the chosen tiles over the default's (energy ratio), for
    kernels whose both configurations computed the right result."""
    gains: Dict[str, float] = {}
    for name in sorted({r["kernel"] for r in rows}):
        by_role = {r["role"]: r for r in rows if r["kernel"] == name and r.get("correct")}
        if "chosen" in by_role and "default" in by_role:
            ratio = rel(by_role["default"]["energy_j"], by_role["chosen"]["energy_j"])
            if ratio is not None:
                gains[name] = ratio
    return gains
