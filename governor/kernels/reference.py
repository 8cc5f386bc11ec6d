"""NumPy references of the library kernels, on the same boundary rules: what a kernel's
result is checked against (the CPU emulation's tests, the GPU tests and the GPU check).

Each reference lives in its kernel's description (``governor.kernels.library``); here they
are reached by kernel name, or as ``<kernel>_ref`` (``gemm_ref``, ``jacobi_2d_ref``, ...).
"""

from __future__ import annotations

from typing import Any

from governor.kernels.description import Problem
from governor.kernels.mapping import find_template

__all__ = ["expected", "reference"]


def reference(kernel: str, *arrays: Any, **params: Any) -> Any:
    """The NumPy result of ``kernel`` on host ``arrays`` with ``params``.

    Raises:
        InvalidRequestError: unknown kernel.
    """
    return find_template(kernel).reference(*arrays, **params)


def expected(kernel: str, problem: Problem) -> Any:
    """The NumPy result of ``kernel`` on ``problem`` (its arrays are not changed)."""
    return find_template(kernel).expected(problem)


def __getattr__(name: str) -> Any:
    """``gemm_ref``, ``jacobi_2d_ref``, ...: the reference of the kernel so named."""
    if name.endswith("_ref"):
        from governor.kernels.description import descriptions

        for description in descriptions().values():
            if description.entry == name[: -len("_ref")]:
                return description.reference
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
