"""governor.devices.journal: value checks, layers, the on-disk document and its checks.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md); expected
documents are built in the test (checksums with hashlib over the canonical JSON).
"""

import hashlib
import json
import os
import socket
import stat
import sys

import pytest

from governor.devices import journal as jn
from governor.errors import GovernorError


def test_check_value_ranges_and_types():
    assert jn.check_value("gpu_clocks", None) is None
    assert jn.check_value("gpu_clocks", (300, 1300.5)) == [300.0, 1300.5]
    assert jn.check_value("gpu_clocks", [500, 500]) == [500.0, 500.0]  # min == max is fine
    assert jn.check_value("mem_clock", 100_000) == 100_000.0  # the limit itself is allowed
    assert jn.check_value("power_limit", 0.5) == 0.5
    assert jn.check_value("power_mode", "MAXN") == "MAXN"
    assert jn.check_value("power_mode", "m" * 200) == "m" * 200
    bad = [
        ("fan", 1, "unknown journal field"),
        ("gpu_clocks", [1, 2, 3], "min_mhz, max_mhz"),
        ("gpu_clocks", 5, "min_mhz, max_mhz"),
        ("gpu_clocks", [900, 300], "min 900 is above max 300"),
        ("gpu_clocks", [0, 300], "gpu_clocks min must be a finite number"),
        ("gpu_clocks", [300, 100_000.5], "gpu_clocks max must be a finite number"),
        ("mem_clock", 100_001, r"mem_clock must be a finite number in \(0, 100000\]"),
        ("mem_clock", True, "must be a number"),
        ("mem_clock", "5", "must be a number"),
        ("mem_clock", float("nan"), "finite"),
        ("mem_clock", float("inf"), "finite"),
        ("power_limit", -1.0, "power_limit must be"),
        ("power_limit", 100_000.5, "power_limit must be"),
        ("power_mode", "", "mode name"),
        ("power_mode", "  ", "mode name"),
        ("power_mode", "m" * 201, "mode name"),
        ("power_mode", 3, "mode name"),
    ]
    for name, value, match in bad:
        with pytest.raises(ValueError, match=match):
            jn.check_value(name, value)


def test_owner_record_names_this_process(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/usr/bin/governor", "apply", "ppw"])
    rec = jn.owner_record()
    assert rec["pid"] == os.getpid()
    assert rec["command"] == "governor apply ppw"
    assert rec["host"] == socket.gethostname()
    assert rec["since"].endswith("+00:00")
    assert jn.owner_record("c" * 300)["command"] == "c" * 200
    monkeypatch.setattr(sys, "argv", ["/x/governor"] + ["a" * 50] * 10)
    assert len(jn._command()) == 200


def test_layers_keep_the_first_original_in_restore_order():
    j = jn.Journal("k", "u", "nvml")
    assert j.top is None and j.originals() == {} and j.fields() == [] and not j
    with pytest.raises(GovernorError, match="no journal layer"):
        j.record("mem_clock", 5000)
    j.layers.append(jn.Layer(owner={"pid": 1, "command": "apply"}, persistent=True))
    assert not j  # a layer with nothing recorded waits for nothing
    assert j.record("gpu_clocks", [300, 1300]) is True
    assert j.record("gpu_clocks", [500, 500]) is False  # the first original stays
    assert j.record("power_mode", "15W") is True
    assert j
    assert j.fields() == ["power_mode", "gpu_clocks"]  # FIELDS order, not record order
    assert j.originals() == {"power_mode": "15W", "gpu_clocks": [300.0, 1300.0]}
    top = jn.Layer(owner={})
    j.layers.append(top)
    assert j.top is top and j.fields() == [] and j  # a lower layer still waits
    assert top.describe() == "pid ? (unknown command)"
    assert j.layers[0].describe() == "pid 1 (apply)"
    j.record("mem_clock", 6000)
    j.forget("mem_clock")
    j.forget("mem_clock")  # again: fine
    assert j.originals() == {}


def test_document_has_the_canonical_checksum():
    layer = jn.Layer(
        owner={"pid": 2},
        persistent=False,
        original={"gpu_clocks": None, "power_mode": "MAXN"},
        applied={"gpu_clocks": [600.0, 600.0]},
    )
    doc = jn.Journal("key", "nvml:0", "nvml", [layer]).to_dict()
    body = {
        "format": "governor-journal",
        "version": 2,
        "key": "key",
        "uri": "nvml:0",
        "kind": "nvml",
        "layers": [
            {
                "owner": {"pid": 2},
                "persistent": False,
                "original": {"power_mode": "MAXN", "gpu_clocks": None},
                "applied": {"gpu_clocks": [600.0, 600.0]},
            }
        ],
    }
    canon = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert doc == dict(body, checksum="sha256:" + hashlib.sha256(canon).hexdigest())
    assert "applied" not in jn.Layer(owner={}, original={"mem_clock": 1.0}).to_dict()


def _doc(**changes):
    layer = jn.Layer(owner={"pid": 3}, original={"mem_clock": 5000.0})
    doc = jn.Journal("key", "nvml:0", "", [layer]).to_dict()
    doc.update(changes)
    doc["checksum"] = jn._checksum(doc)
    return json.dumps(doc).encode()


def test_parse_round_trip_and_each_refusal():
    j = jn.read_journal_bytes(_doc())
    assert (j.key, j.uri, j.kind) == ("key", "nvml:0", "")
    assert j.layers[0].original == {"mem_clock": 5000.0}
    assert j.layers[0].persistent is False and j.layers[0].applied == {}
    good_layer = {"owner": {}, "persistent": True, "original": {}}
    bad = [
        (b"\xff\xfe", "not UTF-8"),
        (b"[1]", "not a JSON object"),
        (b"{", "not JSON"),
        (b'{"a": NaN}', "NaN is not a value"),
        (_doc(format="x"), "format is 'x'"),
        (_doc(version=1), "version 1 is not 2"),
        (_doc(key=""), "key must be a non-empty string"),
        (_doc(uri=5), "uri must be"),
        (_doc(kind=None), "kind must be"),
        (_doc(layers={}), "layers must be a list"),
        (_doc(layers=[good_layer, 5]), "layer 1 is not an object"),
        (_doc(layers=[dict(good_layer, owner=[])]), "layer 0: owner must be an object"),
        (_doc(layers=[dict(good_layer, persistent=1)]), "persistent a boolean"),
        (_doc(layers=[dict(good_layer, original=[])]), "original must be an object"),
        (_doc(layers=[dict(good_layer, applied=[])]), "applied must be an object"),
        (_doc(layers=[dict(good_layer, original={"mem_clock": 0})]), "layer 0: mem_clock"),
        (_doc(layers=[dict(good_layer, applied={"x": 1})]), "layer 0: unknown journal field"),
    ]
    for raw, match in bad:
        with pytest.raises(jn.JournalCorruptError, match="journal J is corrupt: .*" + match):
            jn.read_journal_bytes(raw, "J")
    edited = json.loads(_doc())
    edited["uri"] = "nvml:1"
    with pytest.raises(jn.JournalCorruptError, match="checksum does not match"):
        jn.read_journal_bytes(json.dumps(edited).encode(), "J")
    parsed = jn.read_journal_bytes(_doc(layers=[dict(good_layer, applied={"gpu_clocks": [1, 2]})]))
    assert parsed.layers[0].applied == {"gpu_clocks": [1.0, 2.0]}
    assert parsed.layers[0].persistent is True


def test_size_limit_is_one_mebibyte():
    pad = {"owner": {"pad": ""}, "persistent": True, "original": {"mem_clock": 1.0}}
    small = _doc(layers=[pad])
    room = (1 << 20) - len(small)
    exact = _doc(layers=[dict(pad, owner={"pad": "p" * room})])
    assert len(exact) == 1 << 20
    assert jn.read_journal_bytes(exact).layers[0].owner["pad"] == "p" * room
    over = _doc(layers=[dict(pad, owner={"pad": "p" * (room + 1)})])
    with pytest.raises(jn.JournalCorruptError, match="1048577 bytes is not a journal"):
        jn.read_journal_bytes(over)


def test_write_and_read_back(tmp_path):
    path = tmp_path / "j.json"
    assert jn.read_journal(path) is None
    j = jn.Journal("key", "nvml:0", "nvml", [jn.Layer(owner={"pid": 1}), jn.Layer(owner={})])
    j.layers[1].original["mem_clock"] = 7000.0
    jn.write_journal(path, j)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert text.endswith("}\n")
    doc = json.loads(text)
    assert len(doc["layers"]) == 1  # the empty layer is left out
    back = jn.read_journal(path)
    assert back.layers[0].original == {"mem_clock": 7000.0}
    assert back.to_dict() == doc
    assert sorted(os.listdir(tmp_path)) == ["j.json"]  # no temporary left behind
    jn.write_journal(path, jn.Journal("key", "nvml:0", "nvml", [jn.Layer(owner={})]))
    assert not path.exists()  # nothing waits: no file
    jn.write_journal(path, jn.Journal("key", "nvml:0"))  # and no error when already gone


def test_read_refuses_links_non_files_and_oversized_files(tmp_path):
    path = tmp_path / "j.json"
    path.write_bytes(_doc())
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(GovernorError, match="cannot read journal"):
        jn.read_journal(link)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(str(fifo), os.O_RDWR)  # a writer, so opening to read does not block
    try:
        with pytest.raises(GovernorError, match="is not a regular file"):
            jn.read_journal(fifo)
    finally:
        os.close(fd)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (3 << 20))
    with pytest.raises(jn.JournalCorruptError, match="bytes is not a journal"):
        jn.read_journal(big)
    nested = tmp_path / "nested.json"
    nested.write_bytes(b"[" * 100_000)
    with pytest.raises(jn.JournalCorruptError):
        jn.read_journal(nested)
    with pytest.raises(
        GovernorError,
        match="cannot write journal .*: No such file or directory; nothing is changed",
    ):
        j = jn.Journal("k", "u", "", [jn.Layer(owner={}, original={"mem_clock": 1.0})])
        jn.write_journal(tmp_path / "no-dir" / "j.json", j)


def test_a_journal_never_serialises_nan():
    layer = jn.Layer(owner={"pid": float("nan")}, original={"mem_clock": 1.0})
    with pytest.raises(ValueError):
        jn.Journal("k", "u", "", [layer]).to_dict()


def test_a_refused_read_names_the_reason_in_words(tmp_path):
    # a journal path that is a symbolic link is refused with the system's reason as words
    # (O_NOFOLLOW: ELOOP), not the "[Errno 40] ..." form of the exception itself
    import errno

    path = tmp_path / "j.json"
    path.write_bytes(_doc())
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(GovernorError) as raised:
        jn.read_journal(link)
    assert str(raised.value) == f"cannot read journal {link}: {os.strerror(errno.ELOOP)}"
