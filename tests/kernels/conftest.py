"""Fixtures of the kernel tests: where the CPU emulation keeps its compiled objects."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def emulation_cache(pytestconfig, tmp_path_factory):
    """A folder for the CPU emulation's objects and binaries: pytest's cache (kept between
    runs, so an unchanged source is not compiled again) or, without it, a session folder."""
    cache = getattr(pytestconfig, "cache", None)
    if cache is not None:
        return cache.mkdir("cuda_cpu")
    return tmp_path_factory.mktemp("cuda_cpu")
