"""``twin:PATH``: a simulated board fitted to a measured sweep (governor/devices/sim/fit.py).

Every expected value is read from the sweep files in the test, never copied from the twin.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import governor
from governor.devices.replay_files import read_sweep
from governor.errors import InvalidRequestError
from tests.cli_helpers import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
SORT_HI = DATA / "titanx_sort_mem3505.csv"  # memory-bound: run time flat above ~1000 MHz
SORT_LO = DATA / "titanx_sort_mem810.csv"


def _steady(dev, clock_mhz, mem_clock_mhz=None):
    """Power (W) and time per unit (s) the twin settles at, read through the device API."""
    dev.lock_gpu_clocks(clock_mhz)
    if mem_clock_mhz is not None:
        dev.lock_mem_clock(mem_clock_mhz)
    dev.run_workload("compute")
    dev.clock.sleep(60.0)
    w0, t0 = dev.work_done(), dev.clock.now_s()
    dev.clock.sleep(5.0)
    rate = (dev.work_done() - w0) / (dev.clock.now_s() - t0)
    power = dev.sample().power_w
    dev.stop_workload()
    dev.restore()
    return power, 1.0 / rate


def _with_probe(tmp_path, row_index):
    """The 3505 MHz sweep plus one row of the 810 MHz sweep, in one CSV with mem_clock_mhz."""
    hi, lo = read_sweep(SORT_HI), read_sweep(SORT_LO)
    lines = ["# device: GTX Titan X", "# workload: sort", "clock_mhz,power_w,time_s,mem_clock_mhz"]
    lines += [f"{f},{p},{t},3505" for f, p, t in zip(hi.clock_mhz, hi.power_w, hi.time_s)]
    lines.append(f"{lo.clock_mhz[row_index]},{lo.power_w[row_index]},{lo.time_s[row_index]},810")
    path = tmp_path / "sort_two_mem.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_twin_reproduces_its_sweep_and_answers_between_measured_clocks():
    sweep = read_sweep(SORT_HI)
    with governor.open_device(f"twin:{SORT_HI}") as dev:
        clocks = dev.supported_clocks_mhz()
        unmeasured = [c for c in clocks if c not in sweep.clock_mhz]
        assert unmeasured, "the twin offers clocks between the measured ones"
        for i in (0, len(sweep) // 2, len(sweep) - 1):
            power, time = _steady(dev, sweep.clock_mhz[i])
            assert power == pytest.approx(sweep.power_w[i], rel=0.03)
            assert time == pytest.approx(sweep.time_s[i], rel=0.03)
        # a clock between two measured ones: power between theirs (within 3 %)
        c = unmeasured[len(unmeasured) // 2]
        j = max(i for i, f in enumerate(sweep.clock_mhz) if f < c)
        power, time = _steady(dev, c)
        lo_p, hi_p = sorted((sweep.power_w[j], sweep.power_w[j + 1]))
        assert 0.97 * lo_p <= power <= 1.03 * hi_p
        lo_t, hi_t = sorted((sweep.time_s[j], sweep.time_s[j + 1]))
        assert 0.97 * lo_t <= time <= 1.03 * hi_t


def test_one_row_at_a_second_memory_clock_changes_the_fit(tmp_path):
    lo = read_sweep(SORT_LO)
    j = len(lo) // 2
    with governor.open_device(f"twin:{SORT_HI}") as plain:
        assert plain.supported_mem_clocks_mhz() == ()
        assert not plain.capabilities.lock_mem_clock
    with governor.open_device(f"twin:{_with_probe(tmp_path, j)}") as dev:
        assert dev.supported_mem_clocks_mhz() == (810.0, 3505.0)
        power, time = _steady(dev, lo.clock_mhz[j], 810.0)
        # the probe row itself is reproduced
        assert power == pytest.approx(lo.power_w[j], rel=0.02)
        assert time == pytest.approx(lo.time_s[j], rel=0.02)


def test_lower_memory_clock_slows_a_memory_bound_load_and_saves_memory_power(tmp_path):
    hi, lo = read_sweep(SORT_HI), read_sweep(SORT_LO)
    top = hi.clock_mhz[-1]
    assert lo.time_s[-1] > hi.time_s[-1] and lo.power_w[-1] < hi.power_w[-1]  # what the data says
    with governor.open_device(f"twin:{_with_probe(tmp_path, len(lo) // 2)}") as dev:
        p_hi, t_hi = _steady(dev, top, 3505.0)
        p_lo, t_lo = _steady(dev, top, 810.0)
        assert t_lo > 1.2 * t_hi
        assert p_lo < 0.9 * p_hi
        board = dev.board
        assert board.mem_background_w(810.0) < board.mem_background_w(3505.0)
        # an unmeasured memory clock in between lies in between
        w = board.workloads["compute"]
        assert (
            w.time_per_unit_s(top, 810.0)
            > w.time_per_unit_s(top, 2000.0)
            > w.time_per_unit_s(top, 3505.0)
        )


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "cannot read"),
        ("clock_mhz,power_w,time_s\n600,abc,0.1\n700,80,0.09\n800,90,0.08\n", "not a number"),
        ("clock_mhz,power_w,time_s\n600,70,0.1\n700,80,0.09\n", "at least 3"),
        ("clock_mhz,power_w\n600,70\n700,80\n800,90\n", "lacks time_s"),
        (
            "clock_mhz,power_w,time_s,mem_clock_mhz\n600,70,0.1,x\n700,80,0.09,810\n800,90,0.08,810\n",
            "mem_clock_mhz",
        ),
    ],
)
def test_bad_twin_inputs_give_one_line_errors(tmp_path, capsys, content, words):
    path = tmp_path / "sweep.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidRequestError, match=words):
        governor.open_device(f"twin:{path}")
    code, out, err = run_cli(capsys, "calibrate", "--device", f"twin:{path}", "--no-save")
    assert code != 0 and words in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_calibrate_a_twin_through_the_cli(capsys):
    sweep = read_sweep(SORT_HI)
    code, out, err = run_cli(
        capsys, "calibrate", "--device", f"twin:{SORT_HI}", "--no-save", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    energy = sweep.energy_j()
    best = min(range(len(energy)), key=energy.__getitem__)
    chosen = doc["ppw_optimal_clock_mhz"]
    # within one measured step of the sweep's own energy optimum
    step = max(b - a for a, b in zip(sweep.clock_mhz, sweep.clock_mhz[1:]))
    assert abs(chosen - sweep.clock_mhz[best]) <= step + 1e-6


def test_twin_of_a_kernel_tuner_cache():
    path = DATA.parent / "kernel_tuner" / "synthetic_fp32_cache_NVIDIA_A100-PCIE-40GB.json"
    sweep = read_sweep(path)
    with governor.open_device(f"twin:{path}") as dev:
        i = len(sweep) // 2
        power, time = _steady(dev, sweep.clock_mhz[i])
        assert power == pytest.approx(sweep.power_w[i], rel=0.03)
        assert time == pytest.approx(sweep.time_s[i], rel=0.03)


def test_a_twin_takes_the_options_of_a_simulated_board(tmp_path):
    """twin: takes sim:'s options (they were parsed twice, and fail_rate was dropped)."""
    from governor.errors import GovernorError

    sweep = Path(__file__).resolve().parents[1] / "data" / "replay" / "titanx_gemm_mem3505.csv"
    with governor.open_device(f"twin:{sweep}?fail_rate=1&noise=0") as dev:
        with pytest.raises(GovernorError):
            dev.sample()  # every reading fails, as on sim:NAME?fail_rate=1
