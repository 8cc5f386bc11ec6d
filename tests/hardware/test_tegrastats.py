"""tegrastats: every real sample line, property tests of the parser, the CLI, the live device."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hw_trees import install_tools
from hypothesis import given, settings
from hypothesis import strategies as st

import governor
from governor.devices.tegrastats.parser import TegrastatsParser, parse_line
from governor.devices.tegrastats.summary import summarize_lines

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "tegrastats" / "samples.txt"


def _sample_lines():
    """(board, line) for every sample in samples.txt (each follows a '# board' line)."""
    out, board = [], None
    for line in SAMPLES.read_text().splitlines():
        if line.startswith("#"):
            board = line[1:].strip().split(" ")[0]
        elif line.strip():
            out.append((board, line))
    return out


ALL = _sample_lines()

# Expected values read off each line by hand: (gpu load %, gpu clocks MHz, emc MHz, rails W, GPU °C, CPUs)
EXPECTED = {
    0: (0, (76,), 408, {"VDD_IN": 2.532, "VDD_CPU": 0.076, "VDD_GPU": 0.019}, 39.0, 4),
    1: (
        0,
        (624,),
        1600,
        {
            "VDD_SYS_GPU": 0.152,
            "VDD_SYS_SOC": 0.687,
            "VDD_4V0_WIFI": 0.0,
            "VDD_IN": 3.056,
            "VDD_SYS_CPU": 0.152,
            "VDD_SYS_DDR": 0.883,
        },
        35.0,
        6,
    ),
    2: (0, (76,), 204, {"POM_5V_IN": 1.022, "POM_5V_GPU": 0.0, "POM_5V_CPU": 0.204}, 36.0, 4),
    3: (
        0,
        (318,),
        665,
        {"GPU": 0.0, "CPU": 0.311, "SOC": 0.932, "CV": 0.0, "VDDRQ": 0.621, "SYS5V": 1.482},
        37.5,
        8,
    ),
    4: (62, (306,), 1600, {"VDD_IN": 4.067, "VDD_CPU_GPU_CV": 0.738, "VDD_SOC": 1.353}, 43.0, 6),
    5: (0, (611,), 2133, {"VDD_IN": 5.299, "VDD_CPU_GPU_CV": 0.773, "VDD_SOC": 1.424}, 45.875, 8),
    6: (
        0,
        (305, 305),
        2133,
        {"VDD_GPU_SOC": 3.205, "VDD_CPU_CV": 4.405, "VIN_SYS_5V0": 4.767},
        47.812,
        12,
    ),
    7: (0, (), None, {"VDD_GPU_SOC": 4.94, "VDD_CPU_CV": 0.988, "VIN_SYS_5V0": 4.442}, 37.75, 12),
}


@pytest.mark.parametrize("index", sorted(EXPECTED))
def test_every_sample_line_parses_with_the_right_values(index):
    board, line = ALL[index]
    load, clocks, emc, rails, gpu_c, cpus = EXPECTED[index]
    s = parse_line(line)
    assert s is not None, board
    assert s.gpu_load_pct == load and s.gpu_clocks_mhz == clocks and s.emc_clock_mhz == emc
    assert {n: r.power_w for n, r in s.rails.items()} == pytest.approx(rails)
    assert s.gpu_temperature_c == gpu_c
    assert len(s.cpu_load_pct) == cpus
    assert "PMIC" not in s.temperatures_c
    assert s.ram_used_mb > 0 and s.ram_total_mb > s.ram_used_mb


def test_format_variants():
    base = "RAM 100/200MB CPU [1%@100,off] "
    assert parse_line(base + "GR3D_FREQ @[1000,1000,1000] VDD_GPU 1/2/3").gpu_clocks_mhz == (
        1000,
        1000,
        1000,
    )
    s = parse_line(base + "GR3D_FREQ 99% EMC_FREQ 0% VIN 2798mW/2798 VDD_GPU 7/8/9")
    assert s.gpu_load_pct == 99 and s.gpu_clock_mhz is None and s.emc_load_pct == 0
    assert s.rails["VIN"].power_w == 2.798 and s.rails["VIN"].average_w == 2.798
    assert s.rails["VDD_GPU"].power_w == 0.007  # three values (JetPack 7): the first is instant
    assert parse_line(base + "GR3D_FREQ @0").gpu_clocks_mhz == (0,)
    stamped = parse_line("03-14-2024 09:26:53 " + base + "gpu@40.5C")
    assert (
        stamped.timestamp.isoformat() == "2024-03-14T09:26:53" and stamped.gpu_temperature_c == 40.5
    )
    assert parse_line("RAM 2/4GB GR3D_FREQ 1%").ram_total_mb == 4096
    assert parse_line("RAM 2/4GB SWAP 0/1GB") is None  # cut short: nothing measured


def test_text_before_ram_is_a_prefix_and_may_hold_a_timestamp():
    _, line = ALL[4]  # a real Xavier NX line
    for prefix, stamp in (
        ("1712345678---", "2024-04-05T19:34:38"),
        ("1712345678.25 ", "2024-04-05T19:34:38.250000"),
        ("1712345678123 ", "2024-04-05T19:34:38.123000"),
        ("[12:01:02] ", "1900-01-01T12:01:02"),
        ("2024-03-14 09:26:53,120 INFO tegrastats: ", "2024-03-14T09:26:53.120000"),
        ("2024-03-14T09:26:53 ", "2024-03-14T09:26:53"),
        ("03-14-2024 09:26:53 ", "2024-03-14T09:26:53"),
        ("E/TegraStats( 3627): ", None),
        ("jetson | ", None),
    ):
        s = parse_line(prefix + line)
        assert s is not None, prefix
        assert (s.timestamp.isoformat() if s.timestamp else None) == stamp, prefix
        assert s.gpu_load_pct == 62 and s.rails["VDD_IN"].power_w == 4.067
    assert parse_line("[12:01:02] " + line).time_only
    assert parse_line("IRAM 0/252kB CPU [1%@102]") is None  # IRAM is not RAM


def test_l4t_r28_format_of_the_tx1():
    # the layout of tegrastats on L4T R28.1 (TX1): lower-case cpu list with one clock after
    # it, EMC and GR3D without _FREQ
    s = parse_line(
        "RAM 3468/3983MB (lfb 48x4MB) SWAP 873/8192MB (cached 295MB) "
        "cpu [17%,13%,29%,off]@408 EMC 1%@408 APE 25 GR3D 3%@76"
    )
    assert s.cpu_load_pct == (17, 13, 29, None) and s.cpu_clock_mhz == (408, 408, 408, None)
    assert s.emc_load_pct == 1 and s.emc_clock_mhz == 408
    assert s.gpu_load_pct == 3 and s.gpu_clock_mhz == 76


def test_gated_gpcs_offline_sensors_nc_rails_and_jetpack7_fields():
    base = "RAM 100/200MB CPU [1%@100,off] "
    one_gated = parse_line(base + "GR3D_FREQ 39%@[305,0]")
    assert one_gated.gpu_clock_mhz == 305 and one_gated.gpu_clocks_mhz == (305, 0)
    all_gated = parse_line(base + "GR3D_FREQ 0%@[0,0] GPU@-256C gpu@-256.0C cpu@41C")
    assert all_gated.gpu_clock_mhz is None and all_gated.gpu_load_pct == 0
    assert all_gated.temperatures_c == {"cpu": 41.0} and all_gated.gpu_temperature_c is None
    assert parse_line(base + "GR3D_FREQ @[1574,off,1574]").gpu_clocks_mhz == (1574, None, 1574)
    assert parse_line(base + "GR3D_FREQ @[1574,off,1574]").gpu_clock_mhz == 1574
    assert parse_line(base + "GR3D_FREQ 0%@0").gpu_clock_mhz is None
    thor = parse_line(
        base + "EMC_FREQ @4266 cpu@52.968C/52.968C tj@66.625C/66.625C soc012@55.375C/58.781C "
        "VDD_GPU 37939mW/8660mW/37939mW VDD_CPU_SOC_MSS NC VIN_SYS_5V0 NC/NC "
        "VIN 124486mW/36487mW/124486mW VDD_X 1.5W/2W"
    )
    assert thor.emc_clock_mhz == 4266 and thor.emc_load_pct is None
    assert thor.temperatures_c == {"cpu": 52.968, "tj": 66.625, "soc012": 55.375}
    assert set(thor.rails) == {"VDD_GPU", "VIN", "VDD_X"}  # NC: not connected, no reading
    assert thor.rails["VDD_GPU"].power_w == 37.939 and thor.rails["VDD_GPU"].average_w == 8.66
    assert thor.rails["VDD_X"].power_w == 1.5


def test_timing_spreads_samples_that_share_a_second():
    _, line = ALL[4]
    stamped = [f"01-02-2025 10:00:{s:02d} " + line for s in (0, 0, 0, 0, 1, 1, 1, 1, 2, 2)]
    doc = summarize_lines(stamped, interval_ms=1000)
    assert doc["timing"] == "timestamps" and doc["duration_s"] == pytest.approx(3.0)
    # a skipped second (1 Hz with a slip): the sample holds until the next one
    doc = summarize_lines(["01-02-2025 10:00:00 " + line, "01-02-2025 10:00:02 " + line])
    assert doc["duration_s"] == pytest.approx(4.0)
    # a bare time of day across midnight
    doc = summarize_lines(["[23:59:59] " + line, "[00:00:00] " + line, "[00:00:01] " + line])
    assert doc["timing"] == "timestamps" and doc["duration_s"] == pytest.approx(3.0)
    # one stamp only: nothing to measure time with
    doc = summarize_lines(["01-02-2025 10:00:00 " + line], interval_ms=250)
    assert doc["timing"] == "interval" and doc["duration_s"] == 0.25


def test_date_lines_every_few_samples_spread_the_samples_between_them():
    _, line = ALL[4]
    lines = ["Tue Jan 26 18:22:30 UTC 2021", line, line, line, line]
    lines += ["Tue Jan 26 18:22:34 UTC 2021", line, line]
    doc = summarize_lines(lines, interval_ms=100)
    # 4 samples over the 4 s between the dates, then 2 holding the 1 s they imply
    assert doc["timing"] == "timestamps" and doc["duration_s"] == pytest.approx(6.0)


def test_non_samples_are_counted_and_date_lines_give_timestamps():
    p = TegrastatsParser()
    _, line = ALL[4]
    lines = [
        "",
        "user@nano:~$ tegrastats",
        "Tue Jan 26 18:22:31 UTC 2021",
        line,
        "Tue Jan 26 18:22:33 UTC 2021",
        line,
        line[:25],
    ]
    samples = p.parse(lines)
    assert p.samples == 2 and p.skipped_lines == 2  # the prompt and the truncated last line
    assert [s.timestamp.second for s in samples] == [31, 33]
    doc = summarize_lines(lines, interval_ms=500)
    assert doc["duration_s"] == 4.0  # the 2 s gap from the date lines, twice
    assert doc["rails"]["VDD_IN"]["energy_j"] == pytest.approx(4.067 * 4)


def test_summary_values_from_samples_txt():
    doc = summarize_lines(SAMPLES.read_text().splitlines(), interval_ms=250)
    assert set(doc) >= {"samples", "skipped_lines", "duration_s", "rails", "gpu"}
    assert doc["samples"] == 8 and doc["skipped_lines"] == 11  # the '#' comment lines
    assert doc["duration_s"] == 2.0
    gpu_soc = doc["rails"]["VDD_GPU_SOC"]
    assert gpu_soc["mean_w"] == pytest.approx((3.205 + 4.94) / 2)
    assert gpu_soc["max_w"] == 4.94 and gpu_soc["energy_j"] == pytest.approx((3.205 + 4.94) * 0.25)
    assert doc["gpu"]["mean_load_pct"] == pytest.approx(62 / 8)
    assert doc["gpu"]["clock_mhz"] == {"min": 76.0, "max": 624.0}


# -- never raises ----------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    for line in [text, "RAM " + text, "RAM 1/2MB " + text]:
        s = parse_line(line)
        if s is not None:
            assert all(math.isfinite(r.power_w) for r in s.rails.values())
    p = TegrastatsParser()
    p.parse(text.splitlines())
    assert p.samples + p.skipped_lines <= len(text.splitlines())


_ALPHABET = st.sampled_from(
    list("0123456789%@[],/ .CmWMBxRAGPU_-:offlbn") + ["\x00", "é", "nan", "inf", "1e999"]
)


REAL_LINES = [
    line
    for path in sorted(SAMPLES.parent.iterdir())
    if path.suffix in (".log", ".txt")
    for line in path.read_text().splitlines()
    if "RAM " in line
]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(REAL_LINES),
    st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 3), _ALPHABET), max_size=8),
)
def test_mutated_real_lines_never_raise(line, edits):
    for pos, op, text in edits:
        pos %= len(line) + 1
        if op == 0:
            line = line[:pos] + text + line[pos:]
        elif op == 1:
            line = line[:pos] + line[pos + 1 :]
        elif op == 2:
            line = line[:pos] + text + line[pos + 1 :]
        else:
            line = line[:pos]
    s = parse_line(line)
    if s is not None:
        assert all(math.isfinite(r.power_w) and r.power_w >= 0 for r in s.rails.values())
        assert s.gpu_load_pct is None or math.isfinite(s.gpu_load_pct)


# -- the CLI ---------------------------------------------------------------------------------
def _governor(*args):
    return subprocess.run(
        [sys.executable, "-m", "governor", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_summarize_json_has_the_contract_keys():
    proc = _governor("tegrastats", "summarize", str(SAMPLES), "--interval-ms", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"samples", "skipped_lines", "timing", "duration_s", "rails", "gpu"}
    assert doc["duration_s"] == pytest.approx(0.8) and doc["timing"] == "interval"
    assert set(doc["rails"]["VDD_IN"]) == {"mean_w", "max_w", "energy_j"}
    assert set(doc["gpu"]) == {"mean_load_pct", "clock_mhz"} and set(doc["gpu"]["clock_mhz"]) == {
        "min",
        "max",
    }


def test_cli_parse_json_lines_and_missing_file(tmp_path):
    proc = _governor("tegrastats", "parse", str(SAMPLES), "--json")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 8 and rows[4]["gpu"]["load_pct"] == 62
    assert rows[6]["rails"]["VDD_GPU_SOC"]["power_w"] == 3.205
    proc = _governor("tegrastats", "summarize", str(tmp_path / "nope.log"), "--json")
    assert proc.returncode == 1 and "nope.log" in json.loads(proc.stdout)["error"]


# -- the live device -------------------------------------------------------------------------
def test_tegrastats_device_streams_a_fake_tegrastats(tmp_path, monkeypatch):
    log = tmp_path / "orin.log"
    log.write_text(ALL[6][1] + "\nnot a sample\n" + ALL[7][1] + "\n")
    bin_dir = install_tools(tmp_path / "bin", tegrastats_source=log)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    from governor.devices.tegrastats.device import discover_tegrastats

    assert discover_tegrastats() == ["tegrastats"]
    with governor.open_device("tegrastats:?interval_ms=20") as dev:
        assert dev.identity.kind == "tegrastats" and not dev.control_permitted()
        assert dev.capabilities.rails and dev.capabilities.utilisation
        powers = set()
        for _ in range(40):
            s = dev.sample()
            assert s.power_scope == "gpu+soc"
            powers.add(s.power_w)
            if len(powers) == 2:
                break
            dev.reader.latest(timeout_s=1.0, newer_than=dev.reader.count)
        assert powers == {3.205, 4.94}
        assert dev.sample().rail("VIN_SYS_5V0").scope == "system"
        assert dev.reader.parser.skipped_lines >= 1
    assert dev.reader._proc is None


def test_no_tegrastats_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    from governor.devices.tegrastats.device import discover_tegrastats

    assert discover_tegrastats() == []
    with pytest.raises(governor.DeviceNotFoundError, match="PATH"):
        governor.open_device("tegrastats")
