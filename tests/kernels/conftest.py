"""Fixtures of the kernel tests: where the CPU emulation keeps its compiled objects."""

from __future__ import annotations

import platform

import pytest


@pytest.fixture(scope="session")
def emulation_cache(pytestconfig, tmp_path_factory):
    """A folder for the CPU emulation's objects and binaries: pytest's cache (kept between
    runs, so an unchanged source is not compiled again) or, without it, a session folder.
    The emulation switches its fibers with x86-64 assembly: elsewhere (a Jetson) its tests
    skip and say so."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"the CPU emulation of CUDA is written for x86-64, not {platform.machine()}")
    cache = getattr(pytestconfig, "cache", None)
    if cache is not None:
        return cache.mkdir("cuda_cpu")
    return tmp_path_factory.mktemp("cuda_cpu")
