"""tegrastats: every real log in tests/data/tegrastats (provenance in tests/data/README.md).

Expectations are read off the files themselves (the test's own regular expressions over the
raw lines) or are facts about the boards (rail names, GPU clock tables), never the parser's
own view of a line.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from governor.devices.tegrastats.parser import TegrastatsParser
from governor.devices.tegrastats.summary import summarize_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "tegrastats"

# GPU clock tables (MHz, devfreq available_frequencies; tegrastats prints them truncated).
GPU_TABLE_MHZ = {
    "tx1": (76.8, 998.4),
    "tx2": (114.75, 1300.5),
    "nano": (76.8, 921.6),
    "xavier-nx": (114.75, 1109.25),
    "agx-xavier": (114.75, 1377.0),
    "orin-nx": (306.0, 1173.0),
    "agx-orin": (306.0, 1300.5),
}
RAILS = {
    "tx1": {"VDD_IN", "VDD_CPU", "VDD_GPU"},
    "tx2-r28": {
        "VDD_SYS_GPU",
        "VDD_SYS_SOC",
        "VDD_4V0_WIFI",
        "VDD_IN",
        "VDD_SYS_CPU",
        "VDD_SYS_DDR",
    },
    "tx2-r28-4gb": {"VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"},
    "tx2-r32": {"VDD_IN", "VDD_CPU", "VDD_GPU", "VDD_SOC", "VDD_WIFI", "VDD_DDR"},
    "nano": {"POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"},
    "agx-xavier": {"GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"},
    "xavier-nx": {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"},
    "orin-nx": {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"},
    "agx-orin": {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"},
    "agx-orin-jp6": {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"},  # and NC
}

# file -> (board, rail set); multi-board files list one entry per sample line, in order.
LOGS = {
    "loudva_agx-xavier_a.log": ("agx-xavier", "agx-xavier"),
    "loudva_agx-xavier_b.log": ("agx-xavier", "agx-xavier"),
    "loudva_agx-xavier_c.log": ("agx-xavier", "agx-xavier"),
    "loudva_agx-xavier_small.log": ("agx-xavier", "agx-xavier"),
    "loudva_xavier-nx_a.log": ("xavier-nx", "xavier-nx"),
    "loudva_xavier-nx_b.log": ("xavier-nx", "xavier-nx"),
    "loudva_xavier-nx_c.log": ("xavier-nx", "xavier-nx"),
    "loudva_xavier-nx_d.log": ("xavier-nx", "xavier-nx"),
    "loudva_nano_a.log": ("nano", "nano"),
    "loudva_nano_b.log": ("nano", "nano"),
    "aptpod_tx2.txt": [("tx2", "tx2-r28-4gb")],
    "power_tegra_agx-xavier.txt": [("agx-xavier", "agx-xavier")],
    "gdwr_agx-orin.txt": [("agx-orin", "agx-orin-jp6")],
    "datadog_tegra_2020.txt": [("nano", "nano"), ("tx2", "tx2-r32"), ("agx-xavier", "agx-xavier")],
    "samples.txt": [
        ("tx1", "tx1"),
        ("tx2", "tx2-r28"),
        ("nano", "nano"),
        ("agx-xavier", "agx-xavier"),
        ("xavier-nx", "xavier-nx"),
        ("orin-nx", "orin-nx"),
        ("agx-orin", "agx-orin"),
        ("agx-orin", "agx-orin"),
    ],
}
STAMP = re.compile(r"^(\d{2})-(\d{2})-(\d{4}) (\d{2}):(\d{2}):(\d{2}) ")


def _lines(name):
    return (DATA / name).read_text().splitlines()


def _sample_lines(name):
    return [line for line in _lines(name) if "RAM " in line]


def _boards(name):
    spec = LOGS[name]
    n = len(_sample_lines(name))
    return spec if isinstance(spec, list) else [spec] * n


def _parse(name):
    parser = TegrastatsParser()
    return parser.parse(_lines(name)), parser


def test_every_data_file_is_listed_and_has_provenance():
    files = {p.name for p in DATA.iterdir() if p.suffix in (".log", ".txt")}
    assert files == set(LOGS)
    readme = (DATA.parent / "README.md").read_text()
    for name in files:
        assert f"tegrastats/{name}" in readme or f"`{name}`" in readme, name


@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_sample_line_is_a_sample(name):
    samples, parser = _parse(name)
    assert len(samples) == len(_sample_lines(name)) == len(_boards(name))
    assert parser.samples == len(samples)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_rails_are_the_boards_and_carry_the_printed_values(name):
    samples, _ = _parse(name)
    for line, sample, (_, rails) in zip(_sample_lines(name), samples, _boards(name)):
        assert set(sample.rails) == RAILS[rails]
        for rail, reading in sample.rails.items():
            printed = re.search(rf"(?:^|\s){rail} (\d+)(?:mW)?/(\d+)(?:mW)?(?:\s|$)", line)
            assert reading.power_w == pytest.approx(int(printed.group(1)) / 1000.0)
            assert reading.average_w == pytest.approx(int(printed.group(2)) / 1000.0)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_temperatures_are_the_printed_ones_without_dummies(name):
    samples, _ = _parse(name)
    for line, sample in zip(_sample_lines(name), samples):
        printed = dict(re.findall(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)@(-?[\d.]+)C", line))
        expected = {
            k: float(v) for k, v in printed.items() if k.upper() != "PMIC" and float(v) > -256
        }
        assert sample.temperatures_c == pytest.approx(expected)
        assert sample.gpu_temperature_c == expected.get("GPU", expected.get("gpu"))
        assert all(v > -256 for v in sample.temperatures_c.values())


@pytest.mark.parametrize("name", sorted(LOGS))
def test_gpu_clocks_are_in_the_boards_table(name):
    samples, _ = _parse(name)
    for line, sample, (board, _) in zip(_sample_lines(name), samples, _boards(name)):
        lo, hi = GPU_TABLE_MHZ[board]
        printed = re.search(r"GR3D_FREQ (?:(\d+)%)?(?:@\[?([\d,]+)\]?)?", line)
        if printed.group(2) is None:  # load only: run without root, or newer L4T
            assert sample.gpu_clock_mhz is None
            continue
        running = [float(c) for c in printed.group(2).split(",") if float(c) > 0]
        if not running:  # every GPC power-gated: no clock, not 0
            assert sample.gpu_clock_mhz is None
            continue
        assert sample.gpu_clock_mhz == max(running)
        assert lo - 1 <= sample.gpu_clock_mhz <= hi + 1
        assert sample.gpu_load_pct == (float(printed.group(1)) if printed.group(1) else None)


def _stamps(name):
    out = []
    for line in _sample_lines(name):
        m = STAMP.match(line)
        if m:
            mm, dd, yy, h, mi, s = (int(g) for g in m.groups())
            out.append(dt.datetime(yy, mm, dd, h, mi, s))
    return out


@pytest.mark.parametrize("name", sorted(LOGS))
def test_duration_comes_from_timestamps_when_the_log_has_them(name):
    doc = summarize_lines(_lines(name), interval_ms=1000)
    stamps = _stamps(name)
    assert doc["samples"] == len(_sample_lines(name))
    if len(stamps) < 2:  # no stamps, or one: nothing to measure time with
        assert doc["timing"] == "interval"
        assert doc["duration_s"] == pytest.approx(doc["samples"] * 1.0)
        return
    assert len(stamps) == doc["samples"] and doc["timing"] == "timestamps"
    span = (stamps[-1] - stamps[0]).total_seconds()
    interval = (span + 1) / doc["samples"]  # the log's own rate, from its stamps
    # last - first + one interval; stamps are whole seconds, so where the samples of the
    # last second end within it is known to within that second
    assert span + 0.5 * interval <= doc["duration_s"] <= span + 1 + 1e-9
    if interval < 0.7:  # faster than 1 Hz: --interval-ms must not be used
        assert doc["duration_s"] < doc["samples"] * 0.5


@pytest.mark.parametrize("name", sorted(LOGS))
def test_per_rail_means_are_energy_over_time(name):
    doc = summarize_lines(_lines(name), interval_ms=1000)
    lines = _sample_lines(name)
    for rail, values in doc["rails"].items():
        assert 0 <= values["mean_w"] <= values["max_w"] + 1e-12
        if all(re.search(rf"(?:^|\s){rail} \d", line) for line in lines):  # on every line
            assert values["mean_w"] == pytest.approx(values["energy_j"] / doc["duration_s"])
        else:  # multi-board files: only the time of the lines that print it (1 s each)
            n = sum(1 for line in lines if re.search(rf"(?:^|\s){rail} \d", line))
            assert values["mean_w"] == pytest.approx(values["energy_j"] / n)


def test_energy_of_the_small_agx_xavier_log_by_hand():
    # 22:31:04 x1, 22:31:05 x4, 22:31:06 x3 (SYS5V mW read off the file, in order):
    sys5v = [2243, 2243, 2163, 2043, 1963, 1883, 1883, 1883]
    assert [
        int(re.search(r"SYS5V (\d+)mW", line).group(1))
        for line in _sample_lines("loudva_agx-xavier_small.log")
    ] == sys5v
    # The lone 04 sample holds until 05; four samples share 05 (0.25 s each) and three share
    # 06 (1/3 s each, the last to the end of that second).
    holds = [1.0, 0.25, 0.25, 0.25, 0.25, 1 / 3, 1 / 3, 1 / 3]
    doc = summarize_lines(_lines("loudva_agx-xavier_small.log"), interval_ms=1000)
    assert doc["timing"] == "timestamps"
    assert doc["duration_s"] == pytest.approx(sum(holds))
    energy = sum(p / 1000.0 * h for p, h in zip(sys5v, holds))
    assert doc["rails"]["SYS5V"]["energy_j"] == pytest.approx(energy)
    assert doc["rails"]["SYS5V"]["mean_w"] == pytest.approx(energy / sum(holds))
    plain_mean = sum(sys5v) / len(sys5v) / 1000.0
    assert doc["rails"]["SYS5V"]["mean_w"] != pytest.approx(plain_mean, abs=1e-3)


def test_the_agx_orin_line_drops_offline_sensors_and_nc_channels():
    (line,) = _sample_lines("gdwr_agx-orin.txt")
    assert "GPU@-256C" in line and " NC 0mW/0mW " in line and "GR3D_FREQ 0%@[0,0]" in line
    (sample,), _ = _parse("gdwr_agx-orin.txt")
    assert "NC" not in sample.rails and sample.gpu_temperature_c is None
    assert sample.gpu_clock_mhz is None and sample.gpu_load_pct == 0
    assert not {"CV0", "CV1", "CV2", "GPU"} & set(sample.temperatures_c)


def test_sub_second_log_is_not_stretched_by_interval_ms():
    """~4.5 samples per second with 1 s stamps: the old fallback reported 40 s."""
    lines = _lines("loudva_agx-xavier_a.log")
    doc = summarize_lines(lines, interval_ms=1000)
    stamps = _stamps("loudva_agx-xavier_a.log")
    span = (stamps[-1] - stamps[0]).total_seconds()
    assert doc["duration_s"] == pytest.approx(span + 1, abs=0.3) and doc["samples"] == 40
    assert summarize_lines(lines, interval_ms=5)["duration_s"] == doc["duration_s"]


def test_cli_summarize_says_the_timing(tmp_path):
    for name, timing in (
        ("loudva_xavier-nx_a.log", "timestamps"),
        ("loudva_nano_a.log", "interval"),
    ):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "governor",
                "tegrastats",
                "summarize",
                str(DATA / name),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["timing"] == timing and doc["samples"] == len(_sample_lines(name))
        assert all(math.isfinite(r["energy_j"]) for r in doc["rails"].values())
