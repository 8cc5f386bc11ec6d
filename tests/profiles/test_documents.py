"""The typed reader of profile documents (governor/documents.py) and the parsers that read
through it: a field of the right type comes back as the type the code wants, a default fills
a missing or null field, and anything else is one ProfileError naming the file and the field."""

from __future__ import annotations

import json
import math

import pytest

from governor.calibrate.procedure import Probe
from governor.documents import DocReader
from governor.errors import ProfileError
from governor.models.power import PowerModel
from governor.models.time import TimeModel

DOC = {
    "clock": 900,
    "power": 12.5,
    "count": 3,
    "flag": False,
    "name": "orin",
    "clocks": [300, 612.0],
    "bounds": [None, 1100],
    "reasons": ["sw_power_cap"],
    "inner": {"x": 1, "u": {"a": 0.5, "b": None}},
    "nothing": None,
}


def _error(call) -> str:
    with pytest.raises(ProfileError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text
    return text


def test_fields_come_back_with_the_type_the_code_wants():
    r = DocReader(DOC)
    clock = r.float("clock")
    assert clock == 900.0 and type(clock) is float  # a JSON integer read as a number
    assert r.float("power") == 12.5
    assert r.int("count") == 3 and r.bool("flag") is False and r.str("name") == "orin"
    assert r.list_of_floats("clocks") == [300.0, 612.0]
    assert r.list_of_optional_floats("bounds") == [None, 1100.0]
    assert r.list_of_str("reasons") == ["sw_power_cap"]
    inner = r.mapping("inner")
    assert inner.where == "inner" and inner.float("x") == 1.0
    assert inner.float_map("u", skip_null=True) == {"a": 0.5}


def test_a_default_fills_a_missing_or_null_field_and_none_means_required():
    r = DocReader(DOC)
    assert r.float("absent", 1.5) == 1.5 and r.float("nothing", 2.5) == 2.5
    assert r.optional_float("absent") is None and r.optional_float("nothing") is None
    assert r.optional_float("power") == 12.5
    assert r.int("absent", 7) == 7 and r.str("nothing", "ok") == "ok"
    assert r.list_of_str("absent", ()) == [] and r.float_map("absent") == {}
    assert r.has("power") and not r.has("nothing") and not r.has("absent")
    assert _error(lambda: r.float("absent")) == "profile (given): absent is missing"
    assert (
        _error(lambda: r.float("nothing")) == "profile (given): nothing must be a number, not null"
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda r: r.float("name"), "name must be a number, not 'orin'"),
        (lambda r: r.float("flag"), "flag must be a number, not False"),  # a bool is no number
        (lambda r: r.int("power"), "power must be an integer, not 12.5"),
        (lambda r: r.int("flag"), "flag must be an integer, not False"),
        (lambda r: r.bool("count"), "count must be true or false, not 3"),
        (lambda r: r.str("clock"), "clock must be a string, not 900"),
        (lambda r: r.list_of_floats("name"), "name must be a list, not 'orin'"),
        (lambda r: r.list_of_floats("bounds"), "bounds[0] must be a number, not null"),
        (lambda r: r.list_of_str("clocks"), "clocks[0] must be a string, not 300"),
        (lambda r: r.mapping("clocks"), "clocks must be an object, not a list"),
        (lambda r: r.mapping("inner").float_map("u"), "inner.u.b must be a number, not null"),
        (lambda r: r.mapping("inner").str("x"), "inner.x must be a string, not 1"),
    ],
)
def test_a_field_of_another_type_is_one_line_naming_the_file_and_the_field(call, message):
    r = DocReader(DOC, path="/p/orin.json")
    text = _error(lambda: call(r))
    assert text == f"profile /p/orin.json: {message}"


def test_a_number_python_cannot_hold_as_a_float_is_refused():
    doc = json.loads('{"huge": 1' + "0" * 400 + "}")
    assert "huge must be a number" in _error(lambda: DocReader(doc).float("huge"))
    # non-finite numbers pass: the schema says where they may appear
    assert math.isnan(DocReader({"x": math.nan}).float("x"))


def test_the_reader_of_a_value_that_is_no_object():
    assert _error(lambda: DocReader.of([1], "power_model", "/p.json")) == (
        "profile /p.json: power_model must be an object, not a list"
    )
    err = pytest.raises(ProfileError, DocReader.of, "x", "", "/p.json").value
    assert err.path == "/p.json"


def test_the_models_and_the_probe_refuse_a_wrong_field_by_its_path():
    good = PowerModel(20.0, 0.05, 1000.0, 0.001).to_dict()
    bad = dict(good, alpha_w_per_mhz="0.05")
    assert _error(lambda: PowerModel.from_dict(bad, "workloads.mem.power_model", "/p.json")) == (
        "profile /p.json: workloads.mem.power_model.alpha_w_per_mhz must be a number, not '0.05'"
    )
    assert "power_model.ridge_interval_mhz must be [low, high]" in _error(
        lambda: PowerModel.from_dict(dict(good, ridge_interval_mhz=[1.0]))
    )
    assert "time_model.c_s_mhz is missing" in _error(lambda: TimeModel.from_dict({"t_mem_s": 0.1}))
    assert "time_model.kind must be a string, not 3" in _error(
        lambda: TimeModel.from_dict({"t_mem_s": 0.1, "c_s_mhz": 2.0, "kind": 3})
    )
    probe = {"requested_mhz": 5, "clock_mhz": 5, "power_w": 1, "time_per_unit_s": 2}
    assert "probe.throttle_reasons[0] must be a string, not 1" in _error(
        lambda: Probe.from_dict(dict(probe, throttle_reasons=[1]))
    )
    assert Probe.from_dict(dict(probe, temperature_c=None)).temperature_c is None
    assert _error(lambda: PowerModel.from_dict([])) == (
        "profile (given): power_model must be an object, not a list"
    )
