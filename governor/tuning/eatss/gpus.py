"""GPU resource figures for EATSS: warp and block sizes, registers, L1+shared, L2, shared per block.

Byte figures are bytes and thread/register figures are counts, per streaming multiprocessor
unless the name says otherwise. Sets come from the shipped catalog (``profiles/eatss``), from a
user's TOML file with ``[gpu.NAME]`` tables, or from the live device through CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from governor.errors import DeviceNotFoundError, InvalidRequestError, UnsupportedError

__all__ = ["GpuResources", "gpu_from_cuda_properties", "live_gpu", "load_gpus", "parse_gpus"]

_INT_FIELDS = (
    "threads_per_warp",
    "threads_per_block",
    "registers_per_sm",
    "l1_bytes",
    "l2_bytes",
    "shared_per_block_bytes",
)

# Combined L1 + shared memory per SM by compute capability, bytes (NVIDIA tuning guides).
_L1_SHARED_BYTES_BY_CC = {
    (7, 0): 128 * 1024,
    (7, 2): 128 * 1024,
    (7, 5): 96 * 1024,
    (8, 0): 192 * 1024,
    (8, 6): 128 * 1024,
    (8, 7): 192 * 1024,
    (8, 9): 128 * 1024,
    (9, 0): 256 * 1024,
}

# Maxwell and Pascal: the unified L1/texture cache alone, bytes (CUDA C++ Programming Guide,
# "Compute Capability 5.x" and "6.x": 24 KB, 48 KB on 6.1); shared memory is separate.
_L1_TEXTURE_BYTES_BY_CC = {(6, 1): 48 * 1024}


@dataclass(frozen=True)
class GpuResources:
    """The resources EATSS models for one GPU (per SM unless named otherwise).

    Raises:
        InvalidRequestError: a missing, non-integer or non-positive figure, or a shared
            fraction outside [0, 1].
    """

    name: str
    threads_per_warp: int
    threads_per_block: int
    registers_per_sm: int
    l1_bytes: int  # combined L1 + shared memory per SM (the L1 cache alone when separate)
    l2_bytes: int
    shared_per_block_bytes: int
    shared_fractions: Tuple[float, ...] = (0.0,)
    source: str = field(default="", compare=False)
    # Maxwell and Pascal (compute capability 5.x, 6.x) keep shared memory apart from the L1
    # cache: this is then their shared memory per SM, ``l1_bytes`` the L1 cache alone, and a
    # shared fraction is the share of this shared memory the tiles may use (the cache keeps
    # its size). None: one pool of L1 + shared split by the shared fraction (Volta on).
    shared_per_sm_bytes: Optional[int] = None

    def __post_init__(self) -> None:
        for key in _INT_FIELDS:
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidRequestError(f"GPU {self.name}: {key} must be a positive integer")
        separate = self.shared_per_sm_bytes
        if separate is not None and (
            not isinstance(separate, int) or isinstance(separate, bool) or separate <= 0
        ):
            raise InvalidRequestError(
                f"GPU {self.name}: shared_per_sm_bytes must be a positive integer"
            )
        fractions = tuple(float(s) for s in self.shared_fractions)
        for s in fractions:
            if not 0.0 <= s <= 1.0:
                raise InvalidRequestError(f"GPU {self.name}: shared fraction {s} is not in [0, 1]")
        object.__setattr__(self, "shared_fractions", fractions or (0.0,))

    @classmethod
    def from_dict(cls, name: str, doc: Mapping[str, Any], source: str = "") -> GpuResources:
        if not isinstance(doc, Mapping):
            raise InvalidRequestError(f"GPU {name}: expected a table")
        missing = [k for k in _INT_FIELDS if k not in doc]
        if missing:
            raise InvalidRequestError(f"GPU {name}: missing {', '.join(missing)}")
        fractions = doc.get("shared_fractions", [0.0])
        if not isinstance(fractions, list) or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) for s in fractions
        ):
            raise InvalidRequestError(f"GPU {name}: shared_fractions must be a list of numbers")
        return cls(
            name=name,
            shared_fractions=tuple(fractions),
            source=source,
            shared_per_sm_bytes=doc.get("shared_per_sm_bytes"),
            **{k: doc[k] for k in _INT_FIELDS},
        )

    @property
    def separate_shared(self) -> bool:
        """Whether shared memory is apart from the L1 cache (Maxwell, Pascal)."""
        return self.shared_per_sm_bytes is not None

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {"name": self.name}
        for key in _INT_FIELDS:
            doc[key] = getattr(self, key)
        if self.shared_per_sm_bytes is not None:
            doc["shared_per_sm_bytes"] = self.shared_per_sm_bytes
        doc["shared_fractions"] = list(self.shared_fractions)
        return doc


def parse_gpus(doc: Mapping[str, Any], source: str = "gpus") -> Dict[str, GpuResources]:
    """GPU resource sets of a parsed document with ``[gpu.NAME]`` tables, by name."""
    table = doc.get("gpu")
    if not isinstance(table, Mapping) or not table:
        raise InvalidRequestError(f"{source}: no [gpu.NAME] tables")
    return {str(n): GpuResources.from_dict(str(n), body, source) for n, body in table.items()}


def load_gpus(path: Path) -> Dict[str, GpuResources]:
    """GPU resource sets of a TOML file, by name.

    Raises:
        InvalidRequestError: unreadable file, bad TOML, or an invalid resource set.
    """
    from governor.tuning.eatss.model import read_toml

    return parse_gpus(read_toml(Path(path), "GPU spec"), str(path))


def gpu_from_cuda_properties(props: Mapping[str, Any], name: Optional[str] = None) -> GpuResources:
    """A resource set from CUDA device properties (``cudaGetDeviceProperties`` field names).

    The combined L1 + shared size is not a device attribute: it comes from the compute
    capability, or falls back to the shared memory per SM when the capability is not known.
    Maxwell and Pascal (5.x, 6.x) get their separate shared memory and their L1/texture cache.
    """
    cc = (int(props.get("major", 0)), int(props.get("minor", 0)))
    shared_sm = int(props.get("sharedMemPerMultiprocessor", 0))
    separate: Optional[int] = None
    if cc[0] in (5, 6):  # Maxwell, Pascal: shared memory apart from the L1/texture cache
        l1 = _L1_TEXTURE_BYTES_BY_CC.get(cc, 24 * 1024)
        separate = shared_sm
    else:
        l1 = _L1_SHARED_BYTES_BY_CC.get(cc, shared_sm)
    raw_name = props.get("name", b"cuda")
    if isinstance(raw_name, bytes):
        raw_name = raw_name.decode("utf-8", "replace")
    try:
        return GpuResources(
            name=name or str(raw_name),
            threads_per_warp=int(props.get("warpSize", 0)),
            threads_per_block=int(props.get("maxThreadsPerBlock", 0)),
            registers_per_sm=int(props.get("regsPerMultiprocessor", 0)),
            l1_bytes=l1,
            l2_bytes=int(props.get("l2CacheSize", 0)),
            shared_per_block_bytes=int(props.get("sharedMemPerBlock", 0)),
            shared_fractions=(0.0, 0.25, 0.5),
            shared_per_sm_bytes=separate,
            source=f"CUDA device properties (compute capability {cc[0]}.{cc[1]})",
        )
    except InvalidRequestError as err:
        raise UnsupportedError(
            f"the CUDA device does not report every figure EATSS needs: {err}"
        ) from err


def live_gpu(index: int = 0) -> GpuResources:
    """The resource set of CUDA device ``index``, read through CuPy.

    Raises:
        UnsupportedError: CuPy is not installed.
        DeviceNotFoundError: no such CUDA device.
    """
    try:
        import cupy
    except ImportError as err:
        raise UnsupportedError(
            "reading GPU resources from the live device needs CuPy (pip install 'gpu-governor[cuda]')"
        ) from err
    try:
        props = cupy.cuda.runtime.getDeviceProperties(index)
    except Exception as err:  # CuPy raises its own CUDARuntimeError
        raise DeviceNotFoundError(f"no CUDA device {index}: {err}") from err
    return gpu_from_cuda_properties(props, name=f"cuda:{index}")
