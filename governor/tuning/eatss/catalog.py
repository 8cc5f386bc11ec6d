"""The built-in kernels and GPU resource sets (``profiles/eatss``), looked up by name."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Dict, Optional

from governor.errors import DeviceNotFoundError, InvalidRequestError
from governor.tuning.eatss.gpus import GpuResources, live_gpu, load_gpus
from governor.tuning.eatss.model import Kernel, iter_names, load_kernels

__all__ = ["builtin_gpus", "builtin_kernels", "catalog_dir", "find_gpu", "find_kernel"]

_SUBDIR = "eatss"


def catalog_dir() -> Path:
    """The folder of the shipped EATSS data (kernels.toml, gpus.toml, boards.toml)."""
    from governor.paths import shipped_profiles_dir

    shipped = shipped_profiles_dir() / _SUBDIR
    if (shipped / "kernels.toml").is_file():
        return shipped
    # GOVERNOR_PROFILES_DIR may point at a folder of board profiles only: use our own copy.
    here = Path(__file__).resolve().parents[2]
    for candidate in (here / "_shipped_profiles" / _SUBDIR, here.parent / "profiles" / _SUBDIR):
        if (candidate / "kernels.toml").is_file():
            return candidate
    return shipped


@functools.lru_cache(maxsize=4)
def _kernels(folder: str) -> Dict[str, Kernel]:
    return load_kernels(Path(folder) / "kernels.toml")


@functools.lru_cache(maxsize=4)
def _gpus(folder: str) -> Dict[str, GpuResources]:
    gpus = dict(load_gpus(Path(folder) / "gpus.toml"))
    boards = Path(folder) / "boards.toml"
    if boards.is_file():
        for name, gpu in load_gpus(boards).items():
            gpus.setdefault(name, gpu)
    return gpus


def builtin_kernels() -> Dict[str, Kernel]:
    """The catalog kernels by name (30 Polybench and other affine kernels)."""
    return dict(_kernels(str(catalog_dir())))


def builtin_gpus() -> Dict[str, GpuResources]:
    """The catalog GPU resource sets by name: a100, xavier, 2080ti, then catalog boards."""
    return dict(_gpus(str(catalog_dir())))


def find_kernel(name: str, kernels_file: Optional[Path] = None) -> Kernel:
    """A kernel by name, from ``kernels_file`` first when given, then the catalog.

    Raises:
        InvalidRequestError: no kernel of that name (the message lists the known ones).
    """
    known: Dict[str, Kernel] = {}
    if kernels_file is not None:
        known.update(load_kernels(Path(kernels_file)))
    for key, kernel in builtin_kernels().items():
        known.setdefault(key, kernel)
    if name not in known:
        raise InvalidRequestError(f"unknown kernel {name!r}; known: {iter_names(known)}")
    return known[name]


def find_gpu(name: str, gpu_spec_file: Optional[Path] = None) -> GpuResources:
    """A GPU resource set by name: ``gpu_spec_file`` first, then the catalog; ``cuda[:N]``
    reads the live device through CuPy.

    Raises:
        DeviceNotFoundError: no GPU of that name (the message lists the known ones).
    """
    known: Dict[str, GpuResources] = {}
    if gpu_spec_file is not None:
        known.update(load_gpus(Path(gpu_spec_file)))
    if name in known:
        return known[name]
    if name.startswith("sim:"):  # a simulated board's URI names its GPU
        name = name[len("sim:") :].split("?", 1)[0]
    if name == "cuda" or name.startswith("cuda:"):
        index = name.partition(":")[2] or "0"
        if not index.isdigit():
            raise DeviceNotFoundError(f"bad CUDA device {name!r}: use cuda or cuda:N")
        return live_gpu(int(index))
    for key, gpu in builtin_gpus().items():
        known.setdefault(key, gpu)
    if name not in known:
        from governor.devices.sim.catalog import board_names
        from governor.names import did_you_mean

        if name in board_names():
            raise DeviceNotFoundError(
                f"{name} is a catalog board, but its GPU has no EATSS resource description "
                "in profiles/eatss/boards.toml; describe it in a file and pass --gpu-spec FILE"
            )

        raise DeviceNotFoundError(
            f"unknown GPU {name!r}{did_you_mean(name, known) or ';'} known: {iter_names(known)} "
            "(or cuda:N for the live device)"
        )
    return known[name]
