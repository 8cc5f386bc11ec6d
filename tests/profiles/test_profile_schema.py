"""The profile checks (governor.profiles.schema) through the loader: real profiles pass; each
kind of damage is one ProfileError line naming the file and the field."""

from __future__ import annotations

import json
import math

import pytest
from profile_seeds import all_seeds, calibrated

import governor
from governor.errors import ProfileError
from governor.profiles.profile import (
    find_profile,
    load_profile_for,
    lookup_profile_for,
    validate,
)
from governor.profiles.store import parse_profile, profile_paths, write_profile_file
from governor.runtime.model import model_from_profile

PATH = "/data/profiles/agx-orin.json"


def _load(doc):
    return parse_profile(json.dumps(doc).encode(), PATH)


def _set(doc, dotted, value):
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc[key]
    if value is KeyError:
        del doc[last]
    else:
        doc[last] = value


def test_real_profiles_pass_and_their_models_build():
    for doc in all_seeds():
        loaded = _load(doc)
        if "power_model" not in loaded:
            continue
        validate(loaded, PATH)
        clocks = loaded["fingerprint"]["supported_clocks_mhz"]
        for workload in [None, *loaded.get("workloads", {})]:
            model = model_from_profile(clocks, loaded, workload=workload)
            assert model.fitted and model.clocks_mhz[0] <= model.ppw_clock_mhz


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("ppw_optimal_clock_mhz", "fast", "ppw_optimal_clock_mhz must be a finite number, not 'fast'"),
        ("ppw_optimal_clock_mhz", math.nan, "ppw_optimal_clock_mhz must be a finite number, not nan"),
        ("ppw_optimal_clock_mhz", -918.0, "ppw_optimal_clock_mhz must be positive"),
        ("ppw_optimal_clock_mhz", True, "must be a finite number, not True"),
        ("ppw_optimal_clock_mhz", 5000.0, "5000 MHz is outside the profile's own clock table"),
        ("ridge_clock_mhz", math.inf, "ridge_clock_mhz must be a finite number, not inf"),
        ("workloads.memory.ppw_optimal_clock_mhz", "fast",
         "workloads.memory.ppw_optimal_clock_mhz must be a finite number, not 'fast'"),
        ("workloads.memory.power_model", KeyError, "workloads.memory.power_model is missing"),
        ("workloads.memory", [], "workloads.memory must be an object, not a list"),
        ("workloads", "all", "workloads must be an object"),
        ("power_model.alpha_w_per_mhz", KeyError, "power_model.alpha_w_per_mhz is missing"),
        ("power_model.p_idle_w", -3.0, "power_model.p_idle_w must be >= 0"),
        ("power_model.p_max_w", -1.0, "power_model.p_max_w must be positive"),
        ("power_model.beta_per_mhz", "0.001", "power_model.beta_per_mhz must be a finite number"),
        ("power_model.n_points", 2.5, "power_model.n_points must be a non-negative integer"),
        ("power_model.uncertainty", [1], "power_model.uncertainty must be an object"),
        ("power_model", None, "power_model must be an object, not null"),
        ("time_model.k", 0.5, "time_model.k must be >= 1"),
        ("time_model.c_s_mhz", KeyError, "time_model.c_s_mhz is missing"),
        ("time_model.uncertainty", {"k": None}, "time_model.uncertainty.k must be a number"),
        ("workloads.builtin.time_model.t_mem_s", -1, "workloads.builtin.time_model.t_mem_s"),
        ("fingerprint.supported_clocks_mhz", [], "fingerprint.supported_clocks_mhz is empty"),
        ("fingerprint.supported_clocks_mhz", [306.0, "918"], "supported_clocks_mhz[1] must be"),
        ("fingerprint.model", 7, "fingerprint.model must be a string, not 7"),
        ("probes", {"a": 1}, "probes must be a list"),
        ("load.kind", ["x"], "load.kind must be a string"),
        ("tuning.tiles.gemm/double.tiles.i", 0, "tuning.tiles.gemm/double.tiles.i must be a positive integer"),
        ("tuning.tiles.gemm/double", "32x64", "tuning.tiles.gemm/double must be an object"),
        ("tuning.blocks.vector-add@energy.blocks", [[256, "1"]], "blocks[0] must be 1 to 3 positive"),
        ("tuning.blocks.vector-add@energy.clock_mhz", "max", "clock_mhz must be a finite number"),
        ("tuning.hhc-constants", [], "tuning.hhc-constants must be an object"),
        ("schema_version", "1", "schema_version must be a positive integer"),
        ("schema_version", 2, "schema_version 2 is newer than this governor understands"),
        ("board", "", "board is empty"),
    ],
)  # fmt: skip
def test_each_kind_of_damage_names_the_file_and_the_field(field, value, needle):
    doc = calibrated()
    _set(doc, field, value)
    with pytest.raises(ProfileError) as info:
        _load(doc)
    text = str(info.value)
    assert text.startswith(f"profile {PATH}: ") and needle in text, text
    assert "\n" not in text and info.value.path == PATH


def test_time_model_without_any_time_is_refused():
    doc = calibrated()
    doc["time_model"].update(t_mem_s=0.0, c_s_mhz=0.0)
    with pytest.raises(ProfileError, match="time_model has t_mem_s and c_s_mhz both 0"):
        _load(doc)


def test_a_model_that_overflows_is_refused_by_the_model_builder():
    doc = calibrated()
    doc["power_model"]["beta_per_mhz"] = 1e300  # finite, but P(f) is not
    loaded = _load(doc)
    with pytest.raises(ProfileError, match=r"power_model(/time_model unusable| gives inf at)"):
        model_from_profile(loaded["fingerprint"]["supported_clocks_mhz"], loaded)


def test_partial_documents_load_but_are_not_calibrations():
    """Tuning caches and a known PPW clock alone are fine to read; find_profile needs more."""
    assert _load({"board": "agx-orin", "ppw_optimal_clock_mhz": 816.0})
    with pytest.raises(ProfileError, match="fingerprint is missing"):
        validate(_load({"board": "agx-orin", "ppw_optimal_clock_mhz": 816.0}), PATH)


@pytest.mark.parametrize(
    "data,needle",
    [
        (b'{"board": "agx-orin", "power_model": ', "not JSON"),
        (b'{"board": "agx-\xff\xfe"}', "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "corrupt profile"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"ppw_optimal_clock_mhz": 1' + b"0" * 400 + b"}", "must be a finite number"),
        (b'{"ppw_optimal_clock_mhz": NaN}', "must be a finite number, not nan"),
    ],
)
def test_bytes_that_are_not_a_profile(data, needle):
    with pytest.raises(ProfileError, match=needle) as info:
        parse_profile(data, PATH)
    assert "\n" not in str(info.value) and PATH in str(info.value)


def test_clocks_outside_the_device_range_are_refused_even_when_forced():
    a100 = find_profile("a100-pcie")[1]  # PPW 1005 MHz; a Nano tops out at 921.6 MHz
    path = write_profile_file(profile_paths("nano")[0], a100)
    with governor.open_device("sim:nano") as nano:
        with pytest.raises(ProfileError, match="another board"):
            load_profile_for(nano)
        with pytest.raises(ProfileError) as info:
            load_profile_for(nano, force=True)
        assert (
            f"profile {path}: ppw_optimal_clock_mhz 1005 MHz is outside the device's supported "
            "clocks (76.8-921.6 MHz)" in str(info.value)
        )
        # for callers with a fallback another board's profile is a note, not an error
        assert lookup_profile_for(nano)[:2] == (None, None)


def test_a_clock_between_table_entries_is_fine():
    doc = calibrated()
    doc["ppw_optimal_clock_mhz"] = 900.0  # between 816 and 918: snapped when applied
    write_profile_file(profile_paths("agx-orin")[0], doc)
    with governor.open_device("sim:agx-orin") as dev:
        _, loaded, warnings = load_profile_for(dev)
        assert loaded["ppw_optimal_clock_mhz"] == 900.0 and warnings == []
