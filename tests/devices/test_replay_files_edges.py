"""The sweep readers against two records of one measurement: Kernel Tuner's own caches and
the CSV exports of them (``tests/data``, both from the Kernel Tuner project). The cache is
read in milliseconds, by measured clock where it says one (the RTX A4000's top requests ran
power-capped), fastest configuration per clock; and the limits hold at their edges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governor.devices.replay_files import (
    MAX_CLOCK_MHZ,
    MAX_POWER_W,
    MIN_CLOCKS,
    check_value,
    nearest_index,
    read_sweep,
    sweep_optimum,
)
from governor.errors import InvalidRequestError

DATA = Path(__file__).resolve().parents[1] / "data"
PAIRS = [
    (
        DATA / "kernel_tuner" / "synthetic_fp32_cache_NVIDIA_A100-PCIE-40GB.json",
        DATA / "replay" / "a100_pcie_fp32_10pt.csv",
    ),
    (
        DATA / "kernel_tuner" / "synthetic_fp32_cache_NVIDIA_RTX_A4000.json",
        DATA / "replay" / "rtxa4000_fp32_10pt.csv",
    ),
]


@pytest.mark.parametrize("cache, csv", PAIRS, ids=lambda p: p.stem)
def test_a_kernel_tuner_cache_reads_as_its_csv_export(cache, csv):
    got, want = read_sweep(cache), read_sweep(csv)
    assert got.clock_mhz == pytest.approx(want.clock_mhz, abs=0.005)  # CSV: 2 decimals
    assert got.power_w == pytest.approx(want.power_w, rel=1e-9)
    assert got.time_s == pytest.approx(want.time_s, abs=6e-7)  # ms in the cache; s to 6 places
    doc = json.loads(cache.read_text())
    entries = {e["nvml_gr_clock"]: e for e in doc["cache"].values()}
    for measured, requested in zip(got.clock_mhz, got.requested_mhz):
        assert entries[requested].get("core_freq", requested) == pytest.approx(measured)
    assert list(got.clock_mhz) == sorted(got.clock_mhz)  # by the clock it ran at
    assert got.source == "Kernel Tuner cache" and got.device == doc["device_name"]


def test_a_power_capped_request_is_kept_at_the_clock_it_ran():
    got = read_sweep(PAIRS[1][0])
    capped = [(r, m) for m, r in zip(got.clock_mhz, got.requested_mhz) if r != m]
    assert capped and all(m < r for r, m in capped)  # 2100 and 1905 MHz ran near 1740


def test_the_fastest_configuration_at_a_clock_is_the_one_kept(tmp_path):
    doc = json.loads(PAIRS[0][0].read_text())
    key, entry = next(iter(doc["cache"].items()))
    slower = dict(entry, block_size_x=512, time=entry["time"] * 1.5, nvml_power=1.0)
    faster = dict(entry, block_size_x=256, time=entry["time"] * 0.5, nvml_power=2.0)
    doc["cache"]["slower"] = slower
    doc["cache"]["faster"] = faster
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(doc))
    got = read_sweep(path)
    i = got.requested_mhz.index(float(entry["nvml_gr_clock"]))
    assert (got.power_w[i], got.time_s[i]) == (2.0, pytest.approx(entry["time"] * 0.5 / 1000))
    assert len(got) == len(read_sweep(PAIRS[0][0]))


def test_three_clocks_make_a_sweep_and_two_do_not(tmp_path):
    assert MIN_CLOCKS == 3
    rows = "300,10,1\n600,20,0.5\n900,30,0.34\n"
    path = tmp_path / "three.csv"
    path.write_text("clock_mhz,power_w,time_s\n" + rows)
    assert read_sweep(path).clock_mhz == (300.0, 600.0, 900.0)
    path.write_text("clock_mhz,power_w,time_s\n" + rows.rsplit("900", 1)[0])
    with pytest.raises(InvalidRequestError, match="only 2 distinct clock"):
        read_sweep(path)


def test_clocks_apart_by_a_fraction_of_a_megahertz_are_two(tmp_path):
    path = tmp_path / "close.csv"
    path.write_text("clock_mhz,power_w,time_s\n300,10,1\n300.5,10.1,0.99\n900,30,0.34\n")
    assert read_sweep(path).clock_mhz == (300.0, 300.5, 900.0)


def test_the_limits_are_the_most_a_gpu_gives():
    assert check_value(MAX_POWER_W, "power_w") is None
    assert "more than any GPU draws" in check_value(MAX_POWER_W * 1.0001, "power_w")
    assert check_value(MAX_CLOCK_MHZ, "clock_mhz") is None
    assert "above any GPU's clock" in check_value(MAX_CLOCK_MHZ * 1.0001, "core_freq")


@pytest.mark.parametrize("_, csv", PAIRS, ids=lambda p: p.stem)
def test_the_optimum_is_the_least_measured_energy_per_run(_, csv):
    sweep = read_sweep(csv)
    energy = [p * t for p, t in zip(sweep.power_w, sweep.time_s)]
    assert list(sweep.energy_j()) == pytest.approx(energy)
    best = energy.index(min(energy))
    assert sweep_optimum(sweep) == (best, sweep.clock_mhz[best])
    assert nearest_index(sweep.clock_mhz, sweep.clock_mhz[best] + 1.0) == best


def test_a_cache_whose_entries_are_not_a_clock_sweep_is_refused(tmp_path):
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps({"cache": {"a": {"block_size_x": 128, "time": 1.0}}}))
    with pytest.raises(InvalidRequestError, match="has no 'nvml_gr_clock'"):
        read_sweep(path)
    path.write_text(json.dumps({"cache": {"a": [1, 2]}}))
    with pytest.raises(InvalidRequestError, match="has no 'nvml_gr_clock'"):
        read_sweep(path)
    path.write_text(json.dumps({"cache": []}))
    with pytest.raises(InvalidRequestError, match="not a Kernel Tuner cache"):
        read_sweep(path)


def test_a_clock_twice_names_both_rows(tmp_path):
    path = tmp_path / "twice.csv"
    path.write_text("# d\nclock_mhz,power_w,time_s\n300,10,1\n600,20,0.5\n300,11,1\n900,30,0.3\n")
    with pytest.raises(InvalidRequestError) as err:
        read_sweep(path)
    assert str(err.value) == f"{path}: clock 300 MHz appears twice (at 3 and 5)"


def test_a_cache_that_is_a_list_is_refused(tmp_path):
    path = tmp_path / "list.json"
    path.write_text(json.dumps({"cache": [{"nvml_gr_clock": 300}]}))
    with pytest.raises(InvalidRequestError, match="not a Kernel Tuner cache"):
        read_sweep(path)
