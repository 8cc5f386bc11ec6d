"""A per-clock configuration back into a launch: KernelConfig round-trips everything a
launch needs, build_launch compiles and runs it on the CPU emulation's CuPy
(tests/fakes/cuda_cpu), and the result is the NumPy reference's."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from fakes.cuda_cpu import CpuCupy, build

from governor.errors import InvalidRequestError, ProfileError
from governor.kernels import (
    KERNELS,
    ConfigTable,
    KernelConfig,
    build_launch,
    kernel_source,
    plan_launch,
    select_kernel_tiles,
)
from governor.kernels import select as select_module
from governor.runtime.kernel_config import KernelConfigFollower
from governor.tuning.occupancy import arch_limits

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")


def _config(kernel: str, precision: str = "single", fraction: float = 0.5) -> KernelConfig:
    tiles = KERNELS[kernel].small_tiles
    plan = plan_launch(kernel, tiles, arch_limits("8.7"), 128, fraction, precision)
    return KernelConfig(
        tile=dict(plan.tiles),
        thread_block=plan.thread_block,
        registers_per_thread=40,
        shared_memory_bytes=plan.shared_memory_bytes,
        work_per_thread=plan.work_per_thread,
        kernel=kernel,
        precision=precision,
        carveout_percent=plan.carveout_percent,
    )


def test_a_config_round_trips_and_gives_back_its_plan():
    config = _config("gemm")
    again = KernelConfig.from_dict(config.to_dict())
    assert again == config
    plan = again.plan()
    assert (
        plan == plan_launch("gemm", config.tile, arch_limits("8.7"), 128, 0.5, "single")
        and plan.carveout_percent == 50
        and plan.precision == "single"
    )


def test_a_table_names_its_kernel_and_precision_in_every_entry():
    bare = dataclasses.replace(_config("jacobi-2d", "single"), kernel="")
    table = ConfigTable("jacobi-2d", "agx-orin", "single", (300.0, 600.0), (bare,), (0, 0))
    assert table.at(300.0).kernel == "jacobi-2d" and table.at(600.0).precision == "single"
    assert ConfigTable.from_dict(table.to_dict()) == table
    old = table.to_dict()  # a profile written before entries named their kernel
    for entry in old["configs"]:
        del entry["kernel"], entry["precision"], entry["carveout_percent"]
    assert ConfigTable.from_dict(old).at(300.0).plan().precision == "single"


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"precision": "half"}, "precision 'half'"),
        ({"carveout_percent": 101}, "carveout_percent 101"),
        ({"thread_block": [1, 2]}, "3 dimensions"),
    ],
)
def test_a_bad_entry_is_one_profile_error(change, needle):
    doc = {**_config("gemm").to_dict(), **change}
    with pytest.raises(ProfileError, match=needle):
        KernelConfig.from_dict(doc)


def test_a_config_without_a_kernel_cannot_launch_unless_told():
    bare = dataclasses.replace(_config("jacobi-2d"), kernel="")
    with pytest.raises(InvalidRequestError, match="names no kernel"):
        bare.plan()
    with pytest.raises(InvalidRequestError, match="is of gemm, not jacobi-2d"):
        build_launch(_config("gemm"), kernel="jacobi-2d", cupy=object())


@needs_gxx
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_build_launch_runs_the_configuration_on_the_emulated_gpu(kernel, emulation_cache):
    config = _config(kernel)
    plan = config.plan()
    description = KERNELS[kernel]
    binary = build([(kernel_source(plan), description.entry)], emulation_cache)
    problem = description.problem(np.random.default_rng(3), plan.tiles, np.float32)
    with CpuCupy(binary, "87") as cp:
        launch = build_launch(config, cupy=cp)
        out = cp.asnumpy(launch(*(cp.asarray(a) for a in problem.arrays), **problem.params))
        (function,) = cp.kernels
        assert function.source == launch.source == kernel_source(plan)
        assert "typedef float real_t;" in function.source  # the precision came back
        assert function.preferred_shared_memory_carveout == 50  # and the carveout
        assert cp.launches and all(la["block"] == config.thread_block for la in cp.launches)
    want = description.expected(problem)
    error = np.abs(out - want).max() / np.abs(want).max()
    assert error <= description.tolerance_for("single")


def test_table_candidates_compile_at_the_selectors_shared_fraction(monkeypatch):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC not installed (extra nvrtc)")
    from governor.kernels import operating_points

    real = select_module.select_kernel_tiles

    def half(kernel, board, precision="double"):
        return dataclasses.replace(real(kernel, board, precision), shared_fraction=0.5)

    monkeypatch.setattr(select_module, "select_kernel_tiles", half)
    operating_points._compiled.cache_clear()
    try:
        found = operating_points.candidates("jacobi-2d", "a100-sxm")
    finally:
        operating_points._compiled.cache_clear()
    assert found and {c.config.carveout_percent for c in found} == {50}
    assert {c.config.kernel for c in found} == {"jacobi-2d"}
    assert select_kernel_tiles("jacobi-2d", "a100-sxm").shared_fraction == 0.0


def test_the_follower_says_why_there_is_no_table():
    follower = KernelConfigFollower("a100-sxm")
    lookup = follower.table("gemm")
    assert lookup.table is None and "no configuration table for gemm/double" in lookup.reason
    assert follower.config("gemm", 1410.0) == (None, lookup.reason)


def test_the_docs_launch_a_configuration_with_the_real_function():
    import re
    from pathlib import Path

    import governor.kernels as kernels

    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("runtime.md", "robotics.md", "tiles.md"):
        text = (docs / page).read_text(encoding="utf-8")
        for names in re.findall(r"from governor\.kernels import ([\w, ]+)", text):
            for name in names.split(","):
                assert hasattr(kernels, name.strip()), (page, name)
        for name in re.findall(r"cupy_run\.(\w+)\(", text):
            assert callable(getattr(kernels.cupy_run, name)), (page, name)
        if page != "tiles.md":
            assert "build_launch(config)" in text and "build_launch(config.tile" not in text
