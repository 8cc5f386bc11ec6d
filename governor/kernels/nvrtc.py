"""Compile CUDA C to a cubin with NVRTC, without a GPU, and read what ptxas reports.

NVRTC ships as the ``nvidia-cuda-nvrtc-cu12`` wheel and is driven through ``cuda-bindings``
(``pip install 'gpu-governor[nvrtc]'``). ``-Xptxas=-v`` makes ptxas write registers per thread,
shared memory, stack and spills per kernel into the program log; those are the figures used
for launch checks and occupancy. CUDA 12 still compiles for sm_50 to sm_90 (13 dropped the
Maxwell to Volta targets the Nano, TX2 and Xavier need), hence the ``-cu12`` wheel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from governor.errors import GovernorError, UnsupportedError

__all__ = ["CompileError", "CompileReport", "compile_source", "nvrtc_version", "parse_ptxas"]


class CompileError(GovernorError):
    """NVRTC rejected the source; the message carries the first line of its log."""


@dataclass(frozen=True)
class CompileReport:
    """What NVRTC and ptxas report for one kernel compiled for one architecture."""

    arch: str  # "sm_87"
    registers_per_thread: int
    shared_memory_bytes: int  # static shared memory per block
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    cubin_bytes: int
    nvrtc_version: str
    log: str

    def to_dict(self) -> Dict[str, Any]:
        return {
            "arch": self.arch,
            "registers_per_thread": self.registers_per_thread,
            "shared_memory_bytes": self.shared_memory_bytes,
            "stack_frame_bytes": self.stack_frame_bytes,
            "spill_store_bytes": self.spill_store_bytes,
            "spill_load_bytes": self.spill_load_bytes,
            "cubin_bytes": self.cubin_bytes,
            "nvrtc_version": self.nvrtc_version,
        }


_USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(log: str, entry: str) -> Dict[str, int]:
    """Registers, shared memory, stack and spills of ``entry`` from a ``ptxas -v`` log.

    Raises:
        CompileError: the log has no report for ``entry``.
    """
    marker = f"Function properties for {entry}"
    at = log.find(marker)
    if at < 0:
        raise CompileError(f"ptxas printed no report for kernel {entry}")
    section = log[at:]
    frame = _FRAME.search(section)
    used = _USED.search(section)
    if used is None:
        raise CompileError(f"ptxas printed no register count for kernel {entry}")
    return {
        "registers_per_thread": int(used.group(1)),
        "shared_memory_bytes": int(used.group(2) or 0),
        "stack_frame_bytes": int(frame.group(1)) if frame else 0,
        "spill_store_bytes": int(frame.group(2)) if frame else 0,
        "spill_load_bytes": int(frame.group(3)) if frame else 0,
    }


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as err:
        raise UnsupportedError(
            "compiling kernels needs NVRTC: pip install 'gpu-governor[nvrtc]'"
        ) from err
    return nvrtc


def _check(result: Any, what: str) -> Any:
    status = result[0]
    if int(status) != 0:
        raise CompileError(f"NVRTC {what} failed: {status!r}")
    return result[1] if len(result) > 1 else None


def nvrtc_version() -> str:
    """NVRTC's version, "12.9".

    Raises:
        UnsupportedError: NVRTC is not installed.
    """
    result = _nvrtc().nvrtcVersion()
    _check(result, "version")
    return f"{result[1]}.{result[2]}"


def compile_source(
    source: str, entry: str, arch: str, options: Optional[Sequence[str]] = None
) -> CompileReport:
    """Compile ``source`` to a cubin for ``arch`` (``sm_87``) and report on ``entry``.

    Raises:
        UnsupportedError: NVRTC is not installed.
        CompileError: the source does not compile (first error line of the log).
    """
    nvrtc = _nvrtc()
    version_text = nvrtc_version()
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []), "create")
    try:
        opts: List[bytes] = [f"--gpu-architecture={arch}".encode(), b"-Xptxas=-v"]
        opts += [o.encode() for o in (options or ())]
        status = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\x00 ").decode("utf-8", "replace")
        if int(status) != 0:
            errors = [ln.strip() for ln in log.splitlines() if "error" in ln]
            first = errors[0] if errors else (log.strip().splitlines() or ["no log"])[0]
            raise CompileError(f"{entry} does not compile for {arch}: {first}")
        cubin_size = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    figures = parse_ptxas(log, entry)
    return CompileReport(
        arch=arch, cubin_bytes=int(cubin_size), nvrtc_version=version_text, log=log, **figures
    )
