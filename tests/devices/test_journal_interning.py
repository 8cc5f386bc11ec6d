"""A journal write leaves nothing behind in the interpreter: pathlib (Python 3.8-3.11) interns
every part of a path it parses, and the journal's temporary file, named uniquely for each
write, was built as a Path. A daemon journals every client's lock and reset, so its table of
interned strings took one new name per request and was rebuilt again and again (seen with gdb
in the issue 47 soak: the table's used entries flat at ~22,000, its slots consumed at ~47/s,
one per request). Counted by recording ``sys.intern``, never by memory or time."""

from __future__ import annotations

import sys

import pytest

from governor.devices.journal import Journal, Layer, read_journal, write_journal


def test_journal_writes_intern_no_name_of_their_own(tmp_path, monkeypatch):
    interned = []
    real = sys.intern

    def recording(text):
        interned.append(text)
        return real(text)

    monkeypatch.setattr(sys, "intern", recording)
    (tmp_path / "probe.tmp").with_name("probe.2.tmp")  # does this Python's pathlib intern?
    if not interned:
        pytest.skip("this Python's pathlib interns nothing (3.12 and later)")
    interned.clear()
    path = tmp_path / "journal-nvml-0.json"
    layer = Layer({"pid": 1, "command": "governor daemon"}, False, {"gpu_clocks": None})
    for clock_mhz in range(900, 1000, 2):  # 50 writes, as 50 client locks would make
        layer.applied["gpu_clocks"] = [clock_mhz, clock_mhz]
        write_journal(path, Journal("nvml:GPU-0", "nvml:0", "nvml", [layer]))
    assert read_journal(path).layers[0].applied == {"gpu_clocks": [998, 998]}
    assert [name for name in interned if name.endswith(".tmp")] == []
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left either
