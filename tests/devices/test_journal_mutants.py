"""Journal checks written to kill mutants of governor/devices/journal.py (docs/mutation.md).

The file contents are checked against a checksum and layout built here from the documented
format (sha256 of the canonical JSON without the checksum), not read back from the code.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from governor.devices.journal import (
    FIELDS,
    Journal,
    JournalCorruptError,
    Layer,
    check_value,
    read_journal,
    read_journal_bytes,
    write_journal,
)
from governor.errors import GovernorError

OWNER = {"pid": 4242, "command": "governor run", "host": "h", "since": "2026-01-01T00:00:00+00:00"}


def _doc(layers, key="gpu-key", uri="sim:x", kind="sim"):
    body = {
        "format": "governor-journal",
        "version": 2,
        "key": key,
        "uri": uri,
        "kind": kind,
        "layers": layers,
    }
    canon = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    body["checksum"] = "sha256:" + hashlib.sha256(canon).hexdigest()
    return body


def _raw(doc):
    return json.dumps(doc).encode()


def test_restore_order_puts_power_mode_first_and_clocks_last():
    assert FIELDS == ("power_mode", "power_limit", "mem_clock", "gpu_clocks")
    layer = Layer(
        OWNER, original={"gpu_clocks": [100.0, 200.0], "power_mode": "MAXN", "mem_clock": 3000.0}
    )
    assert layer.fields() == ["power_mode", "mem_clock", "gpu_clocks"]
    assert list(layer.to_dict()["original"]) == ["power_mode", "mem_clock", "gpu_clocks"]


def test_check_value_bounds():
    assert check_value("gpu_clocks", (300, 300)) == [300.0, 300.0]
    assert check_value("mem_clock", 100000) == 100000.0
    assert check_value("power_limit", 100000) == 100000.0
    assert check_value("power_limit", None) is None
    assert check_value("power_mode", "15W") == "15W"
    assert check_value("power_mode", "x" * 200) == "x" * 200
    for name, bad in [
        ("gpu_clocks", [300.0]),
        ("gpu_clocks", [300.0, 200.0]),
        ("gpu_clocks", "300"),
        ("mem_clock", 0),
        ("mem_clock", 100000.5),
        ("mem_clock", True),
        ("mem_clock", float("inf")),
        ("power_limit", 100001),
        ("power_limit", -1.0),
        ("power_mode", ""),
        ("power_mode", "  "),
        ("power_mode", "x" * 201),
        ("power_mode", 3),
        ("fan", 1),
    ]:
        with pytest.raises(ValueError):
            check_value(name, bad)


def test_record_keeps_the_first_original_and_forget_drops_it():
    j = Journal("k", "sim:x")
    with pytest.raises(GovernorError):
        j.record("mem_clock", 3000.0)
    assert not j and j.top is None and j.originals() == {} and j.fields() == []
    j.layers.append(Layer(OWNER))
    assert not j
    assert j.record("mem_clock", 3000) is True
    assert j.record("mem_clock", 5000) is False
    assert j.originals() == {"mem_clock": 3000.0}
    assert j.fields() == ["mem_clock"]
    assert bool(j)
    j.forget("mem_clock")
    assert j.originals() == {} and not j
    j.forget("mem_clock")  # twice is harmless


def test_written_file_has_the_documented_checksum_and_drops_empty_layers(tmp_path):
    path = tmp_path / "j.json"
    j = Journal(
        "gpu-key",
        "sim:x",
        "sim",
        [
            Layer(
                dict(OWNER),
                persistent=True,
                original={"power_limit": 15.0},
                applied={"gpu_clocks": [300.0, 300.0]},
            ),
            Layer(dict(OWNER, pid=7)),
        ],
    )
    write_journal(path, j)
    on_disk = json.loads(path.read_text())
    expected = _doc(
        [
            {
                "owner": OWNER,
                "persistent": True,
                "original": {"power_limit": 15.0},
                "applied": {"gpu_clocks": [300.0, 300.0]},
            }
        ]
    )
    assert on_disk == expected
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == ["j.json"]  # no temporary left
    back = read_journal(path)
    assert back.key == "gpu-key" and back.uri == "sim:x" and back.kind == "sim"
    assert len(back.layers) == 1 and back.layers[0].persistent is True
    assert back.layers[0].applied == {"gpu_clocks": [300.0, 300.0]}
    # nothing left to restore: the file goes
    write_journal(path, Journal("gpu-key", "sim:x", "sim", [Layer(OWNER)]))
    assert not path.exists()
    write_journal(path, Journal("gpu-key", "sim:x"))  # and no error when already gone
    assert read_journal(path) is None


def test_reading_accepts_a_hand_built_journal():
    doc = _doc([{"owner": OWNER, "persistent": False, "original": {"mem_clock": 3000}}], kind="")
    j = read_journal_bytes(_raw(doc))
    assert j.kind == "" and j.layers[0].original == {"mem_clock": 3000.0}
    assert j.layers[0].applied == {}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(format="other"),
        lambda d: d.update(version=1),
        lambda d: d.update(key=""),
        lambda d: d.update(uri=""),
        lambda d: d.update(kind=3),
        lambda d: d.update(layers={}),
        lambda d: d.update(layers=[3]),
        lambda d: d.update(layers=[{"owner": [], "persistent": False, "original": {}}]),
        lambda d: d.update(layers=[{"owner": {}, "persistent": 0, "original": {}}]),
        lambda d: d.update(layers=[{"owner": {}, "persistent": False, "original": []}]),
        lambda d: d.update(
            layers=[{"owner": {}, "persistent": False, "original": {}, "applied": []}]
        ),
        lambda d: d.update(
            layers=[{"owner": {}, "persistent": False, "original": {"mem_clock": -1}}]
        ),
        lambda d: d.update(
            layers=[{"owner": {}, "persistent": False, "original": {}, "applied": {"x": 1}}]
        ),
    ],
)
def test_reading_rejects_each_bad_part(mutate):
    doc = _doc([])
    mutate(doc)
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    doc["checksum"] = "sha256:" + hashlib.sha256(canon).hexdigest()
    with pytest.raises(JournalCorruptError, match="is corrupt"):
        read_journal_bytes(_raw(doc), "f")


def test_reading_rejects_bad_bytes_and_a_wrong_checksum():
    doc = _doc([])
    doc["checksum"] = "sha256:" + "0" * 64
    for raw in [_raw(doc), b"\xff\xfe", b"[1]", b"{", b"x" * ((1 << 20) + 1), b'{"a": NaN}']:
        with pytest.raises(JournalCorruptError, match="journal f is corrupt"):
            read_journal_bytes(raw, "f")
    ok = _doc([])
    assert read_journal_bytes(b"  " + _raw(ok)).layers == []


def test_read_journal_refuses_links_and_non_files(tmp_path):
    target = tmp_path / "real.json"
    target.write_bytes(_raw(_doc([])))
    assert read_journal(target).layers == []
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(GovernorError, match="cannot read journal"):
        read_journal(link)
    fifo_dir = tmp_path / "dir.json"
    fifo_dir.mkdir()
    with pytest.raises(GovernorError):
        read_journal(fifo_dir)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((1 << 20) + 70000))
    with pytest.raises(JournalCorruptError, match="bytes is not a journal"):
        read_journal(big)


def test_layer_describes_its_owner():
    assert Layer(OWNER).describe() == "pid 4242 (governor run)"
    assert Layer({}).describe() == "pid ? (unknown command)"


def test_owner_record_names_this_process(monkeypatch):
    from governor.devices.journal import owner_record

    monkeypatch.setattr("sys.argv", ["/usr/bin/governor", "run", "x"])
    rec = owner_record()
    assert rec["command"] == "governor run x" and rec["pid"] == os.getpid()
    monkeypatch.setattr("sys.argv", ["", "-c"])
    assert owner_record()["command"] == "python -c"
    assert owner_record("y" * 300)["command"] == "y" * 200


def test_a_journal_that_is_not_json_cannot_be_written(tmp_path):
    j = Journal("k", "sim:x", "sim", [Layer({"t": float("nan")}, original={"mem_clock": 1.0})])
    with pytest.raises(ValueError):
        j.to_dict()


def test_a_failed_replace_raises_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "j.json"
    target.mkdir()  # os.replace cannot put a file over a directory
    j = Journal("k", "sim:x", "sim", [Layer(OWNER, original={"mem_clock": 1.0})])
    with pytest.raises(GovernorError, match=f"cannot write journal {target}: Is a directory"):
        write_journal(target, j)
    assert [p.name for p in tmp_path.iterdir()] == ["j.json"]
