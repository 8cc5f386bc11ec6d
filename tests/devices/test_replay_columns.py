"""Recorded sweeps as spreadsheets save them: a byte-order mark, ``;`` or tab with decimal
commas, headers in words, other units. Each real sweep (``tests/data/replay``) is written
out in such a form and must read back as the same measurements, through the replay reader,
the twin's reader and ``governor calibrate``; what cannot be read unambiguously is one
line naming the file, the line and what to write instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli

from governor.devices.replay_files import read_sweep
from governor.devices.sim.fit import read_twin_sweeps
from governor.errors import InvalidRequestError

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
A100 = DATA / "a100_pcie_fp32_10pt.csv"
SORT_HI = DATA / "titanx_sort_mem3505.csv"
SORT_LO = DATA / "titanx_sort_mem810.csv"


def _rows(sweep):
    return list(zip(sweep.clock_mhz, sweep.power_w, sweep.time_s))


def _write(tmp_path, header, rows, *, sep=",", decimal=".", bom=False, name="sweep.csv"):
    """A sweep file: the A100's comments, ``header`` and ``rows`` (strings per cell)."""
    lines = ["# device: NVIDIA A100-PCIE-40GB", "# workload: fp32 loop", sep.join(header)]
    lines += [sep.join(c.replace(".", decimal) for c in row) for row in rows]
    path = tmp_path / name
    path.write_bytes(("\ufeff" if bom else "").encode() + "\r\n".join(lines).encode())
    return path


def _same(got, want):
    assert len(got) == len(want)
    for a, b in zip(_rows(got), _rows(want)):
        assert a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize(
    "header, scale, form",
    [
        (("clock_mhz", "power_w", "time_s"), (1, 1, 1), {"bom": True}),
        (("Clock (MHz)", "Power (W)", "Time (s)"), (1, 1, 1), {}),
        (("clock [kHz]", "power [mW]", "time [ms]"), (1e3, 1e3, 1e3), {}),
        (("SM clock Hz", "avg power W", "runtime us"), (1e6, 1, 1e6), {"sep": ";"}),
        (("Frequency (GHz)", "Power (Watts)", "Duration (seconds)"), (1e-3, 1, 1), {}),
        (("clock_mhz", "power_w", "time_s"), (1, 1, 1), {"sep": ";", "decimal": ","}),
        (("gpu_clock_mhz", "power_draw_w", "time_per_run_ms"), (1, 1, 1e3), {"sep": "\t"}),
    ],
)
def test_a_real_sweep_in_another_form_reads_as_the_same_measurements(tmp_path, header, scale, form):
    want = read_sweep(A100)
    rows = [[repr(v * k) for v, k in zip(row, scale)] for row in _rows(want)]
    _same(read_sweep(_write(tmp_path, header, rows, **form)), want)


def test_columns_in_another_order_with_a_quoted_note_read_the_same(tmp_path):
    want = read_sweep(A100)
    rows = [[repr(t), '"run 1, warm"', repr(f), repr(p)] for f, p, t in _rows(want)]
    path = _write(tmp_path, ("Time (s)", "note", "Clock (MHz)", "Power (W)"), rows)
    _same(read_sweep(path), want)


def test_the_twin_reads_memory_clocks_in_words_and_units(tmp_path):
    hi, lo = read_sweep(SORT_HI), read_sweep(SORT_LO)
    rows = [[repr(f * 1e3), repr(p * 1e3), repr(t), "3505"] for f, p, t in _rows(hi)]
    rows += [[repr(f * 1e3), repr(p * 1e3), repr(t), "810"] for f, p, t in _rows(lo)[:3]]
    header = ("Clock (kHz)", "Power (mW)", "Time (s)", "Memory clock (MHz)")
    sweeps = read_twin_sweeps(_write(tmp_path, header, rows, sep=";"))
    assert sweeps.mem_clock_mhz == 3505.0
    _same(sweeps.main, hi)
    _same(sweeps.others[810.0], lo.rows(range(3)))


@pytest.mark.parametrize(
    "header, words",
    [
        (("clock", "power_w", "time_s"), "column 'clock' has no unit: name it one of clock_mhz,"),
        (
            ("clock_mhz", "power_w", "Time"),
            "column 'Time' has no unit: name it one of time_s, time_ms",
        ),
        (
            ("clock_mhz", "SM clock (MHz)", "power_w", "time_s"),
            "columns 'clock_mhz' and 'SM clock (MHz)' are both clock_mhz; keep one",
        ),
        (("clock_mhz", "power_w", "time_fortnights"), "header lacks time_s"),
    ],
)
def test_an_ambiguous_header_is_one_line_naming_the_file_and_line(capsys, tmp_path, header, words):
    path = _write(tmp_path, header, [["300"] * len(header)] * 3)
    with pytest.raises(InvalidRequestError, match="line 3: ") as err:
        read_sweep(path)
    assert words in str(err.value) and str(err.value).startswith(str(path))
    code, out, err_text = run_cli(capsys, "calibrate", "--device", f"replay:{path}", "--json")
    assert code == 1 and words in json.loads(out)["error"]
    assert "Traceback" not in err_text and len(err_text.strip().splitlines()) == 1


def test_calibrate_on_a_spreadsheet_sweep_finds_the_clock_of_the_plain_one(capsys, tmp_path):
    want = read_sweep(A100)
    rows = [[repr(f), repr(p * 1e3), repr(t * 1e3)] for f, p, t in _rows(want)]
    path = _write(tmp_path, ("Clock (MHz)", "Power (mW)", "Time (ms)"), rows, sep=";", bom=True)
    found = []
    for source in (A100, path):
        code, out, err = run_cli(
            capsys, "calibrate", "--device", f"replay:{source}", "--no-save", "--json"
        )
        assert code == 0, err
        found.append(json.loads(out)["ppw_optimal_clock_mhz"])
    assert found[0] == found[1]


#: what each unit means, written down apart from the reader's table
UNITS = {
    "clock": {"hz": 1e-6, "khz": 1e-3, "mhz": 1.0, "ghz": 1e3},
    "power": {"uw": 1e-6, "mw": 1e-3, "milliwatts": 1e-3, "w": 1.0, "watt": 1.0, "watts": 1.0},
    "time": {
        "ns": 1e-9,
        "us": 1e-6,
        "microseconds": 1e-6,
        "ms": 1e-3,
        "msec": 1e-3,
        "milliseconds": 1e-3,
        "s": 1.0,
        "sec": 1.0,
        "secs": 1.0,
        "seconds": 1.0,
        "min": 60.0,
    },
}


@pytest.mark.parametrize("quantity, unit", [(q, u) for q, units in UNITS.items() for u in units])
def test_every_unit_converts_by_what_it_means(tmp_path, quantity, unit):
    want = read_sweep(A100)
    header = {"clock": "clock_mhz", "power": "power_w", "time": "time_s"}
    header[quantity] = f"{quantity} ({unit})"
    column = list(UNITS).index(quantity)
    rows = [
        [repr(v / UNITS[quantity][unit]) if k == column else repr(v) for k, v in enumerate(row)]
        for row in _rows(want)
    ]
    _same(read_sweep(_write(tmp_path, list(header.values()), rows)), want)


def test_a_trailing_separator_on_every_row_reads_the_same(tmp_path):
    want = read_sweep(A100)
    rows = [[repr(f), repr(p * 1e3), repr(t), ""] for f, p, t in _rows(want)]
    path = _write(tmp_path, ("Clock (MHz)", "Power (mW)", "Time (s)", ""), rows, sep=";")
    _same(read_sweep(path), want)
    rows = [[repr(f), repr(p * 1e3), repr(t), ""] for f, p, t in _rows(want)]
    path = _write(tmp_path, ("Clock (MHz)", "Power (mW)", "Time (s)"), rows, name="short.csv")
    _same(read_sweep(path), want)  # a cell more than the header has


def test_columns_the_readers_do_not_know_pass_as_written(tmp_path):
    from governor.devices.replay_columns import canonical_csv

    text = "# c\nClock (kHz);temperature_c;Power (W);time_s\n300000;41,5;10;1\n"
    assert canonical_csv(tmp_path / "x.csv", text).splitlines() == [
        "# c",
        "clock_mhz,temperature_c,power_w,time_s",
        "300.0,41.5,10,1",
    ]


def test_a_file_of_comments_only_says_it_has_no_rows(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("# device: x\n# workload: y\n\n")
    with pytest.raises(InvalidRequestError, match="no header or rows"):
        read_sweep(path)
