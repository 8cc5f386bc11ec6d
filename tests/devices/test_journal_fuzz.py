"""The journal loader against 10,000 random and mutated files: every one is either loaded
(and then holds only values a device could take back) or refused with one line naming the
file. Mutations are re-signed half of the time, so they get past the checksum and reach
the value checks instead of stopping at the first gate."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from governor.devices.journal import (
    FIELDS,
    Journal,
    JournalCorruptError,
    Layer,
    _checksum,
    check_value,
    read_journal,
    read_journal_bytes,
)

VALID = Journal(
    "nvml:GPU-11111111-2222-3333-4444-555555555555",
    "nvml:0",
    "nvml",
    [
        Layer({"pid": 1, "command": "governor apply ppw"}, True, {"gpu_clocks": None}),
        Layer(
            {"pid": 2, "command": "governor run"},
            False,
            {"gpu_clocks": [1005.0, 1005.0], "power_limit": 250.0, "mem_clock": 1593.0},
        ),
    ],
).to_dict()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, prefix + (i,))


ALL_PATHS = [p for p in _paths(VALID) if p]


@st.composite
def mutated(draw):
    doc = json.loads(json.dumps(VALID))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(ALL_PATHS))
        parent = doc
        try:
            for part in path[:-1]:
                parent = parent[part]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[path[-1]] = draw(json_values)
            elif action == "delete":
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.sampled_from(list(FIELDS) + ["junk"]))] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced the path
    if draw(st.booleans()) and isinstance(doc, dict):
        try:
            doc["checksum"] = _checksum(doc)
        except (ValueError, TypeError):
            pass  # NaN or a non-string key: cannot be signed, stays unsigned
    text = json.dumps(doc, allow_nan=True)
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] if draw(st.booleans()) else text[:cut] + draw(st.text(max_size=8))
    return text.encode("utf-8", "surrogatepass")


files = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    mutated(),
    mutated(),
)


def _check(raw: bytes) -> str:
    try:
        journal = read_journal_bytes(raw, "/state/journal-x.json")
    except JournalCorruptError as err:
        message = str(err)
        assert "\n" not in message and message.startswith("journal /state/journal-x.json")
        return "refused"
    for layer in journal.layers:
        assert isinstance(layer.persistent, bool)
        for name, value in layer.original.items():
            assert check_value(name, value) == value
            if isinstance(value, list):
                assert all(math.isfinite(v) and v > 0 for v in value)
    return "loaded"


@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(files)
def test_ten_thousand_journals_load_or_are_refused_in_one_line(raw):
    event(_check(raw))


def test_the_valid_journal_loads_and_a_one_byte_change_is_refused():
    raw = json.dumps(VALID).encode()
    assert _check(raw) == "loaded"
    tampered = raw.replace(b"1005.0", b"1006.0", 1)
    assert _check(tampered) == "refused"


def test_nan_never_gets_into_a_journal():
    journal = Journal("k", "u", "", [Layer({"pid": 1})])
    for bad in (float("nan"), float("inf"), -5.0, [900.0, float("nan")], "fast", [2.0, 1.0]):
        try:
            journal.record("gpu_clocks", bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was recorded")
    assert journal.originals() == {}


def test_files_are_read_without_following_links(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(VALID))
    link = tmp_path / "journal-x.json"
    link.symlink_to(target)
    try:
        read_journal(link)
    except Exception as err:  # a GovernorError with the reason, not the target's content
        assert "cannot read journal" in str(err)
    else:
        raise AssertionError("a symlinked journal was read")
