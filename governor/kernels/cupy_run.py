"""Launch the library kernels with CuPy (extra ``cuda``).

:func:`compile_plan` turns a :class:`~governor.kernels.mapping.LaunchPlan` into a CuPy
``RawKernel`` of the plan's source (CuPy caches kernels by source) with the plan's carveout
set through ``preferred_shared_memory_carveout`` where CuPy exposes it; :func:`run_kernel`
launches it the way the kernel's description says (grid, waves, arguments). Every function
takes the CuPy module as ``cupy=`` (a stand-in in tests), else imports it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from governor.errors import InvalidRequestError, UnsupportedError
from governor.kernels.build import kernel_source
from governor.kernels.mapping import LaunchPlan, find_template, plan_launch

__all__ = ["compile_plan", "device_plan", "import_cupy", "run_kernel"]


def import_cupy() -> Any:
    """The CuPy module.

    Raises:
        UnsupportedError: CuPy is not installed.
    """
    try:
        import cupy
    except ImportError as err:
        raise UnsupportedError(
            "running kernels needs CuPy: pip install 'gpu-governor[cuda]'"
        ) from err
    return cupy


def device_compute_capability(device: int = 0, cupy: Any = None) -> str:
    """The compute capability of CUDA device ``device`` as ``"8.7"``."""
    cp = cupy if cupy is not None else import_cupy()
    text = str(cp.cuda.Device(device).compute_capability)  # "87", "90", "100"
    return f"{text[:-1]}.{text[-1]}"


def device_plan(
    kernel: str,
    tiles: Mapping[str, int],
    threads_per_block: Optional[int] = None,
    precision: str = "double",
    shared_fraction: float = 0.0,
    device: int = 0,
    cupy: Any = None,
) -> LaunchPlan:
    """The launch plan of ``kernel`` for the compute capability of CUDA device ``device``."""
    from governor.tuning.occupancy import arch_limits

    cc = device_compute_capability(device, cupy)
    return plan_launch(
        kernel, tiles, arch_limits(cc), threads_per_block, shared_fraction, precision
    )


def compile_plan(plan: LaunchPlan, cupy: Any = None) -> Any:
    """The CuPy ``RawKernel`` of ``plan`` with its shared-memory carveout."""
    cp = cupy if cupy is not None else import_cupy()
    func = cp.RawKernel(kernel_source(plan), find_template(plan.kernel).entry)
    try:
        func.preferred_shared_memory_carveout = plan.carveout_percent
    except (AttributeError, cp.cuda.driver.CUDADriverError):
        pass  # a CuPy without the attribute: the driver's default carveout
    return func


def run_kernel(plan: LaunchPlan, *arrays: Any, cupy: Any = None, **params: Any) -> Any:
    """Launch ``plan``'s kernel on device ``arrays`` with ``params`` as its description's
    ``run`` does (``run_kernel(plan, a, b, c, alpha=1.0, beta=0.0)`` for gemm,
    ``run_kernel(plan, a, steps=10)`` for jacobi-2d, ...); returns the result array."""
    cp = cupy if cupy is not None else import_cupy()
    description = find_template(plan.kernel)
    return description.run(cp, compile_plan(plan, cp), plan, *arrays, **params)


def _runner(kernel: str, entry: str) -> Callable[..., Any]:
    def run(plan: LaunchPlan, *arrays: Any, **params: Any) -> Any:
        if plan.kernel != kernel:
            raise InvalidRequestError(f"run_{entry} given a plan of {plan.kernel}")
        return run_kernel(plan, *arrays, **params)

    return run


def __getattr__(name: str) -> Any:
    """``run_gemm(plan, ...)``, ``run_jacobi_2d(plan, ...)``: :func:`run_kernel` for the
    kernel whose entry point is so named."""
    if name.startswith("run_"):
        from governor.kernels.description import descriptions

        for description in descriptions().values():
            if description.entry == name[len("run_") :]:
                return _runner(description.name, description.entry)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
