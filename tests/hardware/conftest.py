"""Fixtures for the hardware backends: a private state directory, and no stray real hardware."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Journals go to a temporary state dir; the sysfs root starts empty; no CUDA mask."""
    monkeypatch.setenv("GOVERNOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(tmp_path / "empty-root"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
