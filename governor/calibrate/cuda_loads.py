"""Calibration loads on NVIDIA GPUs (extra ``cuda`` = CuPy): a compute-bound FMA kernel and a
memory-bound copy, each launched back to back in a background thread while calibration
measures. One kernel launch (or one copy) is one unit of work.

- ``builtin``: every thread runs four independent FMA chains (enough instruction-level
  parallelism to keep the FMA pipes busy) and writes one float, so memory traffic is nil. The
  grid is sized to fill every SM: (threads per SM / block size) blocks per SM, times a few
  waves so the tail of one wave does not idle SMs.
- ``memory``: one device-to-device copy of a buffer many times the L2 size, so every byte
  comes from DRAM.

The load runs on the CUDA device that *is* the governed GPU, matched by UUID or PCI bus id:
CUDA's ordinals follow ``CUDA_VISIBLE_DEVICES`` and put the fastest GPU first, NVML's follow
the PCI bus, so ``nvml:1`` may well be CUDA device 0.

CuPy is imported only when a load is made, through :func:`_import_cupy` (tests replace it).
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Optional, Tuple

from governor.calibrate.load_base import Load, LoadFailed, ThreadedLoad
from governor.devices.base import Device
from governor.errors import InvalidRequestError, UnsupportedError

__all__ = ["CudaComputeLoad", "CudaMemoryLoad", "compute_grid", "make_cuda_load", "memory_elements"]

BLOCK_THREADS = 256
WAVES = 4
FMA_ITERATIONS = 4096  # per chain and launch: a few ms on any GPU, since the grid scales with SMs
_FLOAT_BYTES = 4

_FMA_SOURCE = r"""
extern "C" __global__ void governor_fma(float *out, const int iterations) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float b = 0.9999f, c = 0.0001f;
    float x = 1.0f + i * 1e-7f, y = x * 0.5f, z = x * 0.25f, w = x * 0.125f;
    for (int k = 0; k < iterations; ++k) {
        x = fmaf(x, b, c); y = fmaf(y, b, c); z = fmaf(z, b, c); w = fmaf(w, b, c);
    }
    out[i] = x + y + z + w;
}
"""


def _import_cupy() -> Any:
    """The cupy module. Tests replace this function."""
    import cupy

    return cupy


def compute_grid(
    sm_count: int, max_threads_per_sm: int, block_threads: int = BLOCK_THREADS, waves: int = WAVES
) -> int:
    """Blocks for a launch that fills every SM ``waves`` times over.

    Raises:
        InvalidRequestError: non-positive inputs, or a block larger than an SM holds.
    """
    if sm_count < 1 or max_threads_per_sm < 1 or block_threads < 1 or waves < 1:
        raise InvalidRequestError("SM count, threads per SM, block size and waves must be positive")
    per_sm = max_threads_per_sm // block_threads
    if per_sm < 1:
        raise InvalidRequestError(
            f"a block of {block_threads} threads does not fit an SM of {max_threads_per_sm}"
        )
    return sm_count * per_sm * waves


def memory_elements(
    free_bytes: int, l2_bytes: int, *, share: float = 0.25, cap_bytes: int = 1 << 30
) -> int:
    """Floats per buffer of the copy load: two buffers within ``share`` of free memory, capped,
    and at least 16x the L2 cache so the copy streams from DRAM.

    Raises:
        UnsupportedError: not enough free memory for buffers well beyond the L2 cache.
    """
    per_buffer = min(int(free_bytes * share) // 2, cap_bytes)
    needed = 16 * max(int(l2_bytes), 1 << 20)
    if per_buffer < needed:
        raise UnsupportedError(
            f"only {free_bytes / 2**20:.0f} MiB of GPU memory free: the memory load needs "
            f"{4 * needed / 2**20:.0f} MiB free to copy buffers larger than the cache"
        )
    return per_buffer // _FLOAT_BYTES


class _CudaLoad(ThreadedLoad):
    """Launches ``_launch`` back to back on one CUDA stream; one completed launch is one unit."""

    def __init__(self, cupy: Any, cuda_index: int) -> None:
        super().__init__()
        self._cp = cupy
        self.cuda_index = cuda_index
        self._stream: Any = None

    def _launch(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    @contextlib.contextmanager
    def _context(self):
        try:
            with self._cp.cuda.Device(self.cuda_index):
                self._stream = self._cp.cuda.Stream(non_blocking=True)
                with self._stream:
                    yield
        except LoadFailed:
            raise
        except Exception as err:  # a CUDA error: report it through check()
            raise LoadFailed(f"{self.name} failed on CUDA device {self.cuda_index}: {err}") from err

    def _run_once(self) -> None:
        self._launch()
        self._stream.synchronize()


class CudaComputeLoad(_CudaLoad):
    """The FMA kernel over a grid that fills every SM (see module docstring)."""

    kind = "builtin"

    def __init__(self, cupy: Any, cuda_index: int, iterations: int = FMA_ITERATIONS) -> None:
        super().__init__(cupy, cuda_index)
        attrs = cupy.cuda.Device(cuda_index).attributes
        self.sm_count = int(attrs["MultiProcessorCount"])
        self.blocks = compute_grid(self.sm_count, int(attrs["MaxThreadsPerMultiProcessor"]))
        self.iterations = int(iterations)
        self.name = (
            f"cuda-fma ({self.blocks} blocks x {BLOCK_THREADS} threads on {self.sm_count} SMs)"
        )
        with cupy.cuda.Device(cuda_index):
            self._out = cupy.empty(self.blocks * BLOCK_THREADS, dtype=cupy.float32)
            self._kernel = cupy.RawKernel(_FMA_SOURCE, "governor_fma")

    def _launch(self) -> None:
        self._kernel((self.blocks,), (BLOCK_THREADS,), (self._out, self._cp.int32(self.iterations)))


class CudaMemoryLoad(_CudaLoad):
    """A device-to-device copy of a buffer far larger than the L2 cache."""

    kind = "memory"

    def __init__(self, cupy: Any, cuda_index: int) -> None:
        super().__init__(cupy, cuda_index)
        with cupy.cuda.Device(cuda_index):
            free, _total = cupy.cuda.runtime.memGetInfo()
            l2 = int(cupy.cuda.Device(cuda_index).attributes.get("L2CacheSize", 4 << 20))
            self.elements = memory_elements(int(free), l2)
            self._src = cupy.ones(self.elements, dtype=cupy.float32)
            self._dst = cupy.empty_like(self._src)
        self.name = f"cuda-copy ({self.elements * _FLOAT_BYTES / 2**20:.0f} MiB)"

    def _launch(self) -> None:
        self._cp.copyto(self._dst, self._src)


def _uuid_hex(text: Any) -> Optional[str]:
    """The 32 hex digits of a GPU or MIG UUID: NVML's ``GPU-``/``MIG-`` text, or CUDA's 16 bytes."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) != 16:
            return None
        return bytes(text).hex()
    if not isinstance(text, str):
        return None
    digits = re.sub(r"^(GPU|MIG)-|-", "", text.strip(), flags=re.IGNORECASE).lower()
    return digits if re.fullmatch(r"[0-9a-f]{32}", digits) else None


def _cuda_ids(cupy: Any, index: int) -> Tuple[Optional[str], Optional[Tuple[int, int, int, int]]]:
    """(UUID hex, PCI bus id) of CUDA device ``index``; None for what CuPy cannot tell."""
    from governor.devices.nvml import parse_pci_bus_id

    uuid = pci = None
    try:
        props = cupy.cuda.runtime.getDeviceProperties(index)
        uuid = _uuid_hex(props.get("uuid")) if hasattr(props, "get") else None
    except Exception:  # an old CuPy without the field, or a CUDA error
        pass
    try:
        pci = parse_pci_bus_id(str(cupy.cuda.runtime.deviceGetPCIBusId(index)))
    except Exception:
        pass
    return uuid, pci


def _cuda_index(cupy: Any, count: int, device: Device) -> int:
    """The CUDA ordinal of ``device``, found by its UUID, else its PCI bus id.

    CUDA numbers GPUs its own way (fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and
    only those in ``CUDA_VISIBLE_DEVICES``), so NVML's index says nothing about it. A device
    that carries neither (a Jetson, with its one GPU) is CUDA device 0 when CUDA sees one GPU.

    Raises:
        UnsupportedError: CUDA does not see the device, or it cannot be told apart.
    """
    from governor.devices.nvml import parse_pci_bus_id

    uuid = _uuid_hex(device.identity.uuid)
    pci_text = getattr(device, "pci_bus_id", None)
    pci = parse_pci_bus_id(pci_text) if isinstance(pci_text, str) else None
    if uuid is None and pci is None:
        if count == 1:
            return 0
        raise UnsupportedError(
            f"cannot tell which of the {count} CUDA GPUs is {device.uri}: it reports no UUID "
            "or PCI bus id"
        )
    ids = [_cuda_ids(cupy, i) for i in range(count)]
    for wanted, position in ((uuid, 0), (pci, 1)):
        if wanted is None:
            continue
        matches = [i for i, found in enumerate(ids) if found[position] == wanted]
        if len(matches) == 1:
            return matches[0]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise UnsupportedError(
        f"CuPy sees {count} CUDA GPU(s) and {device.uri} ({device.identity.name}"
        + (f", PCI {pci_text}" if pci_text else "")
        + ") is not among them"
        + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "")
    )


def make_cuda_load(device: Device, kind: str) -> Load:
    """The built-in CUDA load of ``kind`` (``builtin``: compute-bound, ``memory``: copy).

    Raises:
        UnsupportedError: CuPy is not installed, or no CUDA GPU is visible.
        InvalidRequestError: unknown kind.
    """
    if kind not in ("builtin", "memory"):
        raise InvalidRequestError(f"unknown CUDA load {kind!r}; known: builtin, memory")
    try:
        cupy = _import_cupy()
    except ImportError as err:
        raise UnsupportedError(
            "the built-in GPU load needs CuPy: pip install 'gpu-governor[cuda]' "
            '(on Jetson use NVIDIA\'s CuPy wheel for your JetPack), or pass --load "COMMAND"'
        ) from err
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as err:  # cupy raises CUDARuntimeError without a driver
        raise UnsupportedError(
            f"CuPy sees no CUDA GPU ({err}): is the NVIDIA driver loaded?"
        ) from err
    if count < 1:
        raise UnsupportedError("CuPy sees no CUDA GPU: is the NVIDIA driver loaded?")
    index = _cuda_index(cupy, count, device)
    return CudaComputeLoad(cupy, index) if kind == "builtin" else CudaMemoryLoad(cupy, index)
