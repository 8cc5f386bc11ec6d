"""Kernel tables with a memory axis (issue 48 item 6): the cost model takes the memory clock,
the table holds the best configuration per (core, memory) pair where the board has several
memory clocks, old tables without the axis load and answer as before, and the follower (and
``Governor.kernel_config``) answer for the memory clock the governor holds."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

import governor
from governor.devices.sim.catalog import get_board
from governor.errors import InvalidRequestError, ProfileError
from governor.kernels.operating_points import ConfigTable, KernelConfig, load_table, save_table
from governor.profiles.store import put_tuning, read_profile_file
from governor.runtime import Governor
from governor.runtime.kernel_config import KernelConfigFollower
from governor.tuning.blocks.simkernels import EXAMPLE_KERNELS, evaluate

A = KernelConfig({"i": 16, "j": 256}, (256, 1, 1), 39, 0, kernel="jacobi-2d")
B = KernelConfig({"i": 32, "j": 32}, (32, 8, 1), 39, 0, kernel="jacobi-2d")
CLOCKS = (306.0, 714.0, 1300.5)
MEMS = (204.0, 665.6, 2133.0, 3199.0)  # agx-orin's EMC table; 3199 MHz is its default


def _axis_table() -> ConfigTable:
    """A at every pair but the top core clocks at the lowest memory clock, where B is."""
    return ConfigTable(
        "jacobi-2d",
        "agx-orin",
        "double",
        CLOCKS,
        (A, B),
        (0, 0, 0),
        energy_j=(3.0, 2.0, 2.5),
        mem_clocks_mhz=MEMS,
        default_mem_clock_mhz=3199.0,
        mem_index=((0, 1, 1), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        mem_energy_j=((2.0, 1.5, 1.9), (2.5, 1.8, 2.2), (2.9, 1.9, 2.4), (3.0, 2.0, 2.5)),
    )


# -- the cost model -------------------------------------------------------------------------


@pytest.mark.parametrize("board", ["nano", "agx-orin", "titan-x", "a100-sxm"])
def test_the_default_memory_clock_gives_the_figures_without_it_bit_for_bit(board):
    spec = get_board(board)
    for model in EXAMPLE_KERNELS.values():
        for clock in spec.clocks_mhz[:: max(1, len(spec.clocks_mhz) // 5)]:
            plain = evaluate(spec, [model], [(256, 1, 1)], clock)
            named = evaluate(spec, [model], [(256, 1, 1)], clock, spec.default_mem_clock_mhz)
            assert (named.time_s, named.energy_j) == (plain.time_s, plain.energy_j)


@pytest.mark.parametrize(
    "board, kernel, time_s, energy_j",
    [  # evaluate() at the top clock before the memory axis existed (commit 83c40f0)
        ("nano", "vector-add", 0.021399931833032744, 0.02357738959714372),
        ("nano", "gemm-tile", 0.012176677741931855, 0.06300036692332214),
        ("titan-x", "vector-add", 0.004216857440873519, 0.41981354508016944),
        ("titan-x", "gemm-tile", 0.01010610786496939, 2.149913672513594),
    ],
)
def test_the_figures_at_the_default_memory_clock_are_those_from_before_the_axis(
    board, kernel, time_s, energy_j
):
    spec = get_board(board)
    for mem in (None, spec.default_mem_clock_mhz):
        point = evaluate(spec, [EXAMPLE_KERNELS[kernel]], [(256, 1, 1)], spec.clocks_mhz[-1], mem)
        # to 1e-12: the same arithmetic (the digest in docs/tiles.md is the bit-for-bit proof;
        # a libm of another platform may round a power's last bit otherwise)
        assert point.time_s == pytest.approx(time_s, rel=1e-12, abs=0)
        assert point.energy_j == pytest.approx(energy_j, rel=1e-12, abs=0)


def test_a_lower_memory_clock_slows_the_memory_part_and_saves_the_memorys_power():
    spec = get_board("agx-orin")
    streaming, nbody = EXAMPLE_KERNELS["vector-add"], EXAMPLE_KERNELS["nbody"]
    top = spec.clocks_mhz[-1]
    fast = evaluate(spec, [streaming], [(256, 1, 1)], top)
    slow = evaluate(spec, [streaming], [(256, 1, 1)], top, 204.0)
    # 90 % memory at 3199 MHz; the board's memory load is 9x slower at 204 MHz
    load = spec.workloads["memory"]
    scale = load.mem_time_s(204.0) / load.mem_time_s(3199.0)
    assert scale > 8 and slow.time_s > 0.5 * scale * fast.time_s
    assert slow.power_w < fast.power_w  # the memory's background power falls with its clock
    compute_fast = evaluate(spec, [nbody], [(256, 1, 1)], top)
    compute_slow = evaluate(spec, [nbody], [(256, 1, 1)], top, 204.0)
    assert compute_slow.time_s / compute_fast.time_s < slow.time_s / fast.time_s
    with pytest.raises(InvalidRequestError, match="memory clock must be positive"):
        evaluate(spec, [nbody], [(256, 1, 1)], top, 0.0)


# -- the table -----------------------------------------------------------------------------


def test_the_table_answers_per_pair_and_for_the_default_memory_clock_without_one():
    t = _axis_table()
    assert t.at(1300.5, 204.0) is B and t.at(714.0, 204.0) is B and t.at(306.0, 204.0) is A
    assert t.at(1300.5, 3199.0) is A and t.at(1300.5) is A  # None: the default memory clock
    # off the table: the highest clock at or below each, the lowest's below
    assert t.at(1000.0, 300.0) is B and t.at(1000.0, 100.0) is B and t.at(1000.0, 700.0) is A
    assert [(lo, hi) for lo, hi, _ in t.bands(204.0)] == [(306.0, 306.0), (714.0, 1300.5)]
    assert [(lo, hi) for lo, hi, _ in t.bands()] == [(306.0, 1300.5)]
    assert t.ppw_pair_mhz() == (714.0, 204.0) and t.ppw_clock_mhz() == 714.0
    with pytest.raises(InvalidRequestError, match="not a memory clock of the table"):
        t.bands(800.0)


def test_a_table_with_the_axis_round_trips_through_the_profile_and_its_schema():
    save_table(_axis_table())
    loaded = load_table("agx-orin", "jacobi-2d")
    assert loaded == _axis_table() and loaded.at(1300.5, 204.0) == B


def test_an_old_table_without_the_axis_loads_and_answers_as_before():
    # a table as every profile saved before the memory axis holds it
    old = {
        "kernel": "jacobi-2d",
        "board": "agx-orin",
        "precision": "double",
        "clocks_mhz": [306.0, 714.0, 1300.5],
        "configs": [
            {
                "tile": {"i": 16, "j": 256},
                "thread_block": [256, 1, 1],
                "threads_per_block": 256,
                "registers_per_thread": 39,
                "shared_memory_bytes": 0,
                "work_per_thread": 1,
                "precision": "double",
                "carveout_percent": 0,
            },
            {
                "tile": {"i": 32, "j": 32},
                "thread_block": [32, 8, 1],
                "threads_per_block": 256,
                "registers_per_thread": 39,
                "shared_memory_bytes": 0,
                "work_per_thread": 1,
                "precision": "double",
                "carveout_percent": 0,
            },
        ],
        "index": [0, 1, 1],
        "energy_j": [3.0, 2.0, 2.5],
    }
    path = put_tuning("agx-orin", "kernel_configs", "jacobi-2d@double", old)
    assert read_profile_file(path)["tuning"]["kernel_configs"]["jacobi-2d@double"] == old
    table = load_table("agx-orin", "jacobi-2d")
    assert table is not None and not table.has_mem_axis
    for mem in (None, 204.0, 3199.0, 1000.0):  # every memory clock answers the same
        assert table.at(306.0, mem) == A and table.at(714.0, mem) == B
        assert table.at(1000.0, mem) == B and table.at(100.0, mem) == A
    assert table.to_dict() == {
        **old,
        "configs": [dict(c, kernel="jacobi-2d") for c in old["configs"]],
    }
    follower = KernelConfigFollower("agx-orin")
    config, reason = follower.config("jacobi-2d", 714.0, mem_clock_mhz=204.0)
    assert config == B and "no memory axis" in reason


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda d: d.update(default_mem_clock_mhz=800.0), "default_mem_clock_mhz must be one of"),
        (lambda d: d["mem_index"][3].__setitem__(2, 1), "mem_index at the default memory clock"),
        (lambda d: d["mem_index"].pop(), "mem_index"),
        (lambda d: d.update(mem_clocks_mhz=[3199.0, 204.0, 665.6, 2133.0]), "ascend"),
        (lambda d: d.pop("mem_clocks_mhz"), "mem_clocks_mhz"),
        (lambda d: d["mem_energy_j"][0].pop(), "mem_energy_j"),
    ],
)
def test_a_damaged_memory_axis_is_refused_by_the_table_and_the_schema(change, needle, tmp_path):
    doc = _axis_table().to_dict()
    change(doc)
    with pytest.raises(ProfileError, match=needle):
        ConfigTable.from_dict(doc)
    path = tmp_path / "agx-orin.json"
    path.write_text(
        json.dumps({"schema_version": 1, "tuning": {"kernel_configs": {"jacobi-2d@double": doc}}})
    )
    with pytest.raises(ProfileError, match=needle.split(" ")[0]):
        read_profile_file(path)


# -- the follower and the governor ---------------------------------------------------------


def test_the_follower_answers_for_a_changed_memory_clock_and_fires_on_the_move():
    save_table(_axis_table())
    follower = KernelConfigFollower("agx-orin")
    seen = []
    follower.on_change(lambda kernel, config: seen.append((kernel, config)))
    config, reason = follower.config("jacobi-2d", 1300.5)
    assert config == A and "default memory clock" in reason
    follower.clock_changed(1300.5, 3199.0)  # the same config: nothing fires
    assert follower.generation == 0 and not seen
    follower.clock_changed(1300.5, 204.0)  # the memory clock alone moves it
    assert follower.generation == 1 and seen == [("jacobi-2d", B)]
    config, reason = follower.config("jacobi-2d", 1300.5, mem_clock_mhz=204.0)
    assert config == B and "memory 204 MHz" in reason
    follower.clock_changed(306.0, 204.0)  # the core clock moves it back at that memory clock
    assert follower.generation == 2 and seen[-1] == ("jacobi-2d", A)


def test_the_governor_answers_for_the_memory_clock_it_holds():
    save_table(_axis_table())
    dev = governor.open_device("sim:agx-orin")
    dev.run_workload("memory")
    seen = []
    try:
        with Governor(dev, {"policy": "max"}, background=False) as gov:
            gov.step()
            assert gov.applied_clock_mhz == 1300.5 and gov.applied_mem_clock_mhz is None
            assert gov.kernel_config("jacobi-2d").value == A  # the default memory clock
            gov.on_kernel_config_change(lambda kernel, config: seen.append((kernel, config)))
            start = gov.kernel_config_generation
            # what memory-governing code does: write the device, then record the clock
            applied = dev.lock_mem_clock(204.0)
            gov._mem_clock_set(applied)
            assert dev.state().mem_clock_mhz == 204.0 and gov.applied_mem_clock_mhz == 204.0
            assert gov.kernel_config("jacobi-2d").value == B
            assert gov.kernel_config_generation == start + 1 and seen == [("jacobi-2d", B)]
            gov.step()  # a control step at the same pair moves nothing
            assert gov.kernel_config("jacobi-2d").value == B and len(seen) == 1
        assert gov.applied_mem_clock_mhz is None  # stopped: it holds nothing
    finally:
        dev.stop_workload()


def test_a_memory_clock_locked_before_the_governor_starts_is_the_one_answered_for():
    save_table(_axis_table())
    dev = governor.open_device("sim:agx-orin")
    dev.run_workload("memory")
    try:
        with dev:  # the path of governor run --mem-clock and of device.lock_mem_clock first
            assert dev.lock_mem_clock(204.0) == 204.0
            with Governor(dev, {"policy": "max"}, background=False) as gov:
                gov.step()
                assert gov.applied_mem_clock_mhz is None  # it sets no memory clock itself
                config, reason = gov.kernel_config("jacobi-2d")
                assert config == B and "memory 204 MHz" in reason
    finally:
        dev.stop_workload()


# -- from the real cost model (compiles with NVRTC) ------------------------------------------


def test_a_memory_bound_kernels_best_configuration_moves_with_the_memory_clock(capsys):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC not installed (extra nvrtc)")
    from governor.kernels.operating_points import best_table, candidates, run_cost

    table = best_table("jacobi-2d", "agx-orin")
    spec = get_board("agx-orin")
    assert table.mem_clocks_mhz == spec.mem_clocks_mhz and table.default_mem_clock_mhz == 3199.0
    top = spec.clocks_mhz[-1]
    assert table.at(top, 204.0) != table.at(top, 3199.0) == table.at(top)
    # each answer is the least-energy candidate at its pair, recomputed here
    cands = candidates("jacobi-2d", "agx-orin")
    for mem in spec.mem_clocks_mhz:
        costs = [run_cost(spec, c, top, mem)[1] for c in cands]
        assert table.at(top, mem) == cands[costs.index(min(costs))].config
    # the default memory clock's column is the table a board without the axis gets
    plain = best_table("jacobi-2d", "agx-orin", mem_clocks_mhz=[3199.0])
    assert not plain.has_mem_axis
    assert [plain.at(c) for c in plain.clocks_mhz] == [table.at(c) for c in table.clocks_mhz]
    assert plain.energy_j == table.energy_j

    code, out, _ = run_cli(
        capsys, "kernels", "table", "jacobi-2d", "--board", "agx-orin", "--save", "--json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["mem_clocks_mhz"] == list(spec.mem_clocks_mhz)
    assert [b["mem_clock_mhz"] for b in doc["mem_bands"]] == list(spec.mem_clocks_mhz)
    assert len(doc["mem_bands"][0]["bands"]) == 2  # 204 MHz: two configurations
    saved = load_table("agx-orin", "jacobi-2d")
    assert saved is not None and saved.at(top, 204.0) == table.at(top, 204.0)
    code, out, _ = run_cli(capsys, "kernels", "table", "jacobi-2d", "--board", "agx-orin")
    lines = out.splitlines()
    assert code in (0, None) and "  memory clock 3199 MHz (default)" in lines
    low = lines[lines.index("  memory clock 204 MHz") + 1 :]
    assert len(low) == 2 and "tile i=32 x j=32" in low[1]  # the top clocks' own configuration
