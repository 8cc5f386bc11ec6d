"""Block-size procedures on the three kinds of benchmark function, and their CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from governor.devices.registry import open_device
from governor.errors import InvalidRequestError
from governor.tuning.blocks import (
    KernelResources,
    Measurement,
    default_blocks,
    exhaustive,
    rank_candidates,
    tune_energy,
    tune_energy_multi,
    tune_time,
    tune_time_multi,
)
from governor.tuning.blocks.bench import (
    CallableBench,
    CommandBench,
    RecordedBench,
    SimBench,
    guess_cc,
)
from governor.tuning.blocks.cache import load_choice, ppw_start_clock_mhz
from governor.tuning.blocks.simkernels import EXAMPLE_KERNELS, evaluate, split_sms

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner"
ADA = DATA / "blocksize_energy_cache_RTX4000Ada.json"


# -- candidates -----------------------------------------------------------------------------
def test_candidates_ranked_by_occupancy_then_size():
    # CC 8.9 (48 warps, 24 blocks): 768, 512, 384, 256, 192, 128 fill all 48 warps; then
    # 704 (22 warps x 2 = 44, 91.7 %), 448 (14 x 3 = 42, 87.5 %), 640 and 320 (40, 83.3 %)
    cands = rank_candidates("8.9", KernelResources(16), RecordedBench(ADA).blocks(), threshold=0.8)
    assert [c.threads for c in cands] == [768, 512, 384, 256, 192, 128, 704, 448, 640, 320]
    smaller = rank_candidates("8.9", KernelResources(16), [128, 256, 704], larger_first=False)
    assert [c.threads for c in smaller] == [128, 256, 704]


def test_threshold_falls_back_to_the_best_the_kernel_can_reach():
    # 40 registers on CC 8.0: rpw 1280 -> floor(16384/1280)*4 = 48 warps of 64 at best (75 %)
    cands = rank_candidates("8.0", KernelResources(40), threshold=0.8)
    assert cands[0].occupancy == pytest.approx(0.75)
    assert all(c.occupancy >= 0.75 * 0.8 - 1e-9 for c in cands)
    with pytest.raises(InvalidRequestError):
        rank_candidates("8.0", threshold=1.5)


# -- a user's callable -------------------------------------------------------------------------
def _bowl(calls):
    """Energy least at block 256 and 900 MHz; time falls with the clock."""

    def fn(block, clock):
        calls.append((block, clock))
        b = block[0]
        energy = 1.0 + ((b - 256) / 512.0) ** 2 + ((clock - 900.0) / 600.0) ** 2
        return 1000.0 / clock * (1 + abs(b - 256) / 1024), energy

    return fn


def test_alg2_on_a_callable_finds_the_bowl_and_counts_every_measurement():
    calls = []
    clocks = [300.0 + 100 * i for i in range(11)]  # 300..1300
    bench = CallableBench(_bowl(calls), clocks)
    cands = [512, 384, 256, 128, 64]
    res = tune_energy(bench, cands)
    assert res.block == (256, 1, 1) and res.clock_mhz == 900.0
    assert res.measurements == len(set(calls)) == len(calls)  # each point measured once
    full = exhaustive(bench, [cands])
    assert full.measurements == 55 and full.energy_j == res.energy_j


def test_alg1_stops_when_time_rises():
    times = {512: 3.0, 384: 2.0, 256: 1.5, 128: 1.6, 64: 0.1}
    calls = []

    def fn(block, clock):
        calls.append(block[0])
        return times[block[0]], 1.0

    res = tune_time(CallableBench(fn, [1000.0]), [512, 384, 256, 128, 64])
    assert res.block == (256, 1, 1) and res.measurements == 4 and calls == [512, 384, 256, 128]


def test_clock_walk_skips_requests_above_a_power_cap():
    # the board sustains only 1000 MHz: requests above run there (same energy, reported clock)
    def fn(block, clock):
        ran = min(clock, 1000.0)
        return Measurement(1.0 / ran, (ran - 700.0) ** 2 + 10.0, clock_mhz=ran)

    clocks = [500.0 + 50 * i for i in range(17)]  # 500..1300
    res = tune_energy(CallableBench(fn, clocks), [256])
    assert res.clock_mhz == 700.0


def test_alg3_visits_kernels_in_decreasing_time_order():
    visited = []

    def fn(blocks, clock):
        visited.append(blocks)
        t = (1.0 + blocks[0][0] / 1024, 5.0 + blocks[1][0] / 1024)
        return Measurement(max(t), sum(t), kernel_time_s=t, kernel_energy_j=t)

    res = tune_time_multi(CallableBench(fn, [1000.0], n_kernels=2), [[512, 256], [512, 256]])
    # kernel 1 is slower, so it is tried first: its second candidate changes before kernel 0's
    assert visited[1] == ((512, 1, 1), (256, 1, 1))
    # kernel 0 never sets the makespan here, so its block stays: time is the slowest kernel's
    assert res.blocks == ((512, 1, 1), (256, 1, 1))
    with pytest.raises(InvalidRequestError):
        tune_time_multi(CallableBench(fn, [1000.0], n_kernels=2), [[512]])


# -- the recorded Kernel Tuner table ------------------------------------------------------------
def test_recorded_rtx4000ada_table():
    bench = RecordedBench(ADA)
    assert guess_cc(bench.device_name) == "8.9"
    assert bench.clocks_mhz() == (1080.0,) and len(bench.blocks()) == 15
    cands = rank_candidates("8.9", KernelResources(16), bench.blocks())
    res = tune_energy(bench, cands)
    # 768 (0.23481 J) then 512 (0.23549 J): energy rose, stop after 2 measurements
    assert res.block == (768, 1, 1) and res.measurements == 2
    assert res.energy_j == pytest.approx(0.2348117851425529)
    full = exhaustive(bench, [bench.blocks()])
    assert full.block == (896, 1, 1) and full.measurements == 15
    assert full.energy_j == pytest.approx(0.22485707456937543)
    assert tune_time(bench, cands).block == (768, 1, 1)


def test_recorded_table_errors(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(InvalidRequestError, match="Kernel Tuner"):
        RecordedBench(bad)
    with pytest.raises(InvalidRequestError, match="not in the recording"):
        RecordedBench(ADA).measure(((100, 1, 1),), 1080.0)


# -- the simulated board --------------------------------------------------------------------------
def _sim_case(board, names):
    dev = open_device(f"sim:{board}")
    models = [EXAMPLE_KERNELS[n] for n in names]
    bench = SimBench(dev, models)
    cc = str(dev.board.facts["cc"])
    cands, space = [], []
    for m in models:
        r = KernelResources(
            m.registers_per_thread, m.static_shared_bytes, m.shared_bytes_per_thread
        )
        cands.append(rank_candidates(cc, r))
        space.append([c.block for c in rank_candidates(cc, r, default_blocks(), 0.0)])
    return dev, bench, cands, space


@pytest.mark.parametrize(
    "board,names",
    [
        ("agx-orin", ["reduce"]),
        ("a100-pcie", ["stencil-2d"]),
        ("a100-pcie", ["vector-add", "gemm-tile", "nbody"]),
    ],
)
def test_sim_energy_within_2pct_of_exhaustive_with_10pct_of_its_measurements(board, names):
    dev, bench, cands, space = _sim_case(board, names)
    with dev:
        res = tune_energy_multi(bench, cands)
        best = exhaustive(bench, space)
        chosen = bench.truth(res.blocks, res.clock_mhz).energy_j
        assert chosen <= best.energy_j * 1.02
        assert res.measurements <= 0.10 * best.measurements
        if dev.board.kind == "datacenter":  # NVML-style GPU scope; Jetson rails add the SoC
            # the measured energy agrees with the model's truth (sensors, not a shortcut)
            assert res.energy_j == pytest.approx(chosen, rel=0.05)
    assert not dev.changed  # locked clocks restored


def test_sim_optimum_matches_brute_force_on_a_small_space():
    dev, bench, _, _ = _sim_case("xavier-nx", ["stencil-2d", "reduce"])
    space = [[(64, 1, 1), (256, 1, 1), (1024, 1, 1)], [(96, 1, 1), (512, 1, 1)]]
    clocks = bench.clocks_mhz()[-4:]
    fast = bench.optimum(space, "energy", clocks)
    brute = min(
        (bench.truth((a, b), c).energy_j, (a, b), c)
        for a in space[0]
        for b in space[1]
        for c in clocks
    )
    assert fast[0] == brute[1] and fast[1] == brute[2]


def test_kernel_model_shares_sms_and_quantises_waves():
    from governor.devices.sim.catalog import get_board

    board = get_board("a100-pcie")
    k = EXAMPLE_KERNELS
    assert sum(split_sms([k["reduce"], k["nbody"], k["gemm-tile"]], 108)) == 108
    with pytest.raises(InvalidRequestError, match="SMs"):
        split_sms([k["reduce"], k["nbody"]], 1)
    # more blocks per SM than the grid needs in one wave leaves SMs idle: a block shape whose
    # grid is one block over a whole wave takes two waves
    alone = evaluate(board, [k["gemm-tile"]], [(64, 1, 1)], 1410.0)
    both = evaluate(board, [k["gemm-tile"], k["reduce"]], [(64, 1, 1), (64, 1, 1)], 1410.0)
    assert both.kernel_time_s[0] > alone.time_s  # fewer SMs when sharing
    assert both.time_s == max(both.kernel_time_s)


def test_ppw_clock_from_profile_starts_the_walk(tmp_path, monkeypatch):
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(tmp_path))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "agx-orin.json").write_text(
        json.dumps({"board": "agx-orin", "ppw_optimal_clock_mhz": 800.0})
    )
    assert ppw_start_clock_mhz("agx-orin") == 800.0
    dev, bench, cands, _ = _sim_case("agx-orin", ["reduce"])
    with dev:
        res = tune_energy_multi(bench, cands, start_clock_mhz=ppw_start_clock_mhz("agx-orin"))
    assert res.history[0][1] == 816.0  # the table clock nearest 800 MHz


# -- a command on a device ------------------------------------------------------------------------
def test_command_bench_fills_placeholders_and_treats_failures_as_data():
    dev = open_device("sim:a100-pcie?realtime=1")
    script = "import sys; sys.exit(0 if int(sys.argv[1]) <= 256 else 3)"
    with dev:
        bench = CommandBench(
            dev, [sys.executable, "-c", script, "{bx}", "{block}"], interval_s=0.01
        )
        assert bench.render(((16, 16, 1),), 900.0)[-2:] == ["16", "16x16"]
        ok = bench.measure(((256, 1, 1),), 1410.0)
        assert ok.ok and ok.time_s > 0 and ok.energy_j > 0
        bad = bench.measure(((512, 1, 1),), 1410.0)
        assert not bad.ok and bench.last_returncode == 3
        res = tune_time(bench, [512, 256, 128], clock_mhz=1410.0)
        assert res.block in ((256, 1, 1), (128, 1, 1)) and res.measurements >= 2
    assert not dev.changed


# -- the CLI ---------------------------------------------------------------------------------
def _cli(capsys, *args):
    from governor.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def test_cli_tune_blocks_recorded_json(capsys):
    code, out, _ = _cli(capsys, "tune-blocks", "--recorded", str(ADA), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["block_labels"] == ["768"] and doc["measurements"] == 2
    assert doc["exhaustive"]["block_labels"] == ["896"] and doc["exhaustive"]["measurements"] == 15


def test_cli_tune_blocks_sim_save(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(tmp_path))
    code, out, _ = _cli(
        capsys, "tune-blocks", "--device", "sim:xavier-nx", "-k", "reduce", "-k", "nbody", "--save"
    )
    assert code == 0 and "exhaustive" in out and "saved to" in out
    saved = load_choice("xavier-nx", "reduce+nbody@energy")
    assert saved["procedure"] == "alg4-energy-multi" and len(saved["blocks"]) == 2


@pytest.mark.parametrize(
    "args,expected",
    [
        (("tune-blocks", "--device", "sim:a100-pcie", "-k", "nope"), 1),
        (("tune-blocks", "--device", "sim:nano", "-k", "reduce", "-k", "nbody"), 1),
        (("tune-blocks", "--recorded", "/nonexistent.json"), 1),
        (("tune-blocks", "--threshold", "1.5"), 2),  # a usage error, from the option's check
    ],
)
def test_cli_tune_blocks_errors_are_one_line(capsys, args, expected):
    code, _, err = _cli(capsys, *args)
    assert code == expected and err.count("\n") == 1 and "Traceback" not in err
