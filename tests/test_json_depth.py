"""Deeply nested JSON is refused in one line before it reaches the decoder.

Python 3.8's C decoder aborts the whole interpreter on such input, and 3.11's raises
RecursionError, which the daemon's request decoder did not catch: a client could take down
the process that holds a GPU's settings. (tests/test_python38.py runs the same on 3.8.)
"""

from __future__ import annotations

import json

import pytest

from governor._compat import MAX_JSON_DEPTH, json_loads
from governor.devices.daemon.protocol import ProtocolError, decode_request
from governor.errors import ProfileError
from governor.profiles.store import parse_profile


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_the_limit_is_exact():
    assert json_loads(nested(MAX_JSON_DEPTH)) == json.loads(nested(MAX_JSON_DEPTH))
    with pytest.raises(json.JSONDecodeError, match=f"nested more than {MAX_JSON_DEPTH}"):
        json_loads(nested(MAX_JSON_DEPTH + 1))


def test_objects_and_arrays_both_count():
    doc = '{"a": ' * 150 + "[" * 60 + "]" * 60 + "}" * 150
    with pytest.raises(ValueError, match="nested more than"):
        json_loads(doc)
    assert json_loads('{"a": ' * 150 + "1" + "}" * 150) is not None


def test_brackets_inside_strings_do_not_nest():
    text = json.dumps({"note": "[" * 5000 + '\\"{' * 300, "x": [[1]]})
    assert json_loads(text) == json.loads(text)


def test_not_json_is_still_json_s_own_error():
    with pytest.raises(json.JSONDecodeError) as err:
        json_loads("[1,]")
    assert err.value.msg == "Expecting value" and err.value.pos == 3


def test_a_deep_daemon_request_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="not valid JSON: nested more than"):
        decode_request(b"[" * 4000)


def test_a_deep_profile_is_one_line():
    with pytest.raises(ProfileError) as err:
        parse_profile(b"[" * 100000, "deep.json")
    assert "nested more than" in str(err.value) and "\n" not in str(err.value)
