"""Fuzzing the profile loader: 10,000 random and mutated documents, zero tracebacks.

Each example is the bytes of a profile file: a real profile (calibrations of simulated boards,
the shipped profiles, a tuning-only cache) with a few fields deleted or replaced by junk
(wrong types, NaN, infinities, huge, tiny and negative numbers, nested junk), or damaged
bytes (truncated, flipped, not UTF-8), or deep nesting, or a random JSON tree. Every one is
either refused by :func:`parse_profile` with a one-line ProfileError, or loads, and then the
code that reads profiles (the runtime's clock model, the fitted models' ``from_dict``, the
analytic tiles' power model, the fingerprint and clock-range checks, the tuning caches'
readers) accepts it or refuses it with a ProfileError, never anything else.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any, List, Tuple

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from profile_seeds import all_seeds

import governor
from governor.errors import ProfileError
from governor.models.power import PowerModel
from governor.models.time import TimeModel
from governor.profiles.profile import check_fingerprint, validate
from governor.profiles.schema import check_clocks_for
from governor.profiles.store import parse_profile
from governor.runtime.model import model_from_profile
from governor.tuning.analytic.energy import PowerModel as AnalyticPowerModel

NAME = "fuzz.json"
FULL_SEEDS = [json.dumps(doc).encode() for doc in all_seeds()]


def _trimmed(doc: Any) -> Any:
    """The same document with at most two raw probes per calibration: smaller to mutate."""
    if isinstance(doc, dict):
        return {k: (v[:2] if k == "probes" else _trimmed(v)) for k, v in doc.items()}
    return doc


SEEDS: List[str] = [json.dumps(_trimmed(json.loads(b))) for b in FULL_SEEDS]
SEED_BYTES = [s.encode() for s in SEEDS]
HOT = ("_mhz", "_w", "_s", "model", "workloads", "tuning", "fingerprint", "tiles", "blocks", "k")


def _paths(node: Any, prefix: Tuple[Any, ...], out: List[Tuple[Any, ...]]) -> None:
    """The key path of every value in the document, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        out.append(prefix + (key,))
        if isinstance(value, (dict, list)):
            _paths(value, prefix + (key,), out)


def _seed_paths(text: str) -> Tuple[List[Tuple[Any, ...]], List[Tuple[Any, ...]]]:
    every: List[Tuple[Any, ...]] = []
    _paths(json.loads(text), (), every)
    hot = [p for p in every if any(str(k).endswith(HOT) for k in p if isinstance(k, str))]
    return every, hot


PATHS = [_seed_paths(text) for text in SEEDS]


# -- junk -------------------------------------------------------------------------------------
# Mutations are made by a random.Random seeded by Hypothesis: one draw per example keeps
# 10,000 examples fast; a failure still prints the seed and the bytes that broke the loader.
SPECIAL = [0, -0.0, -1, -918.0, 1e308, -1e308, 5e-324, 1e-300, 1e300, 10**400, 2**63, True,
           False, None, "fast", "918", "", "NaN", "1e999", "\u00e9\n", [], {}, [1, 2],
           {"a": None}, [[256]], {"i": 0}, math.nan, math.inf, -math.inf]  # fmt: skip
NAMES = ["schema_version", "board", "fingerprint", "supported_clocks_mhz", "model",
         "ppw_optimal_clock_mhz", "ridge_clock_mhz", "power_model", "time_model", "p_idle_w",
         "alpha_w_per_mhz", "beta_per_mhz", "p_max_w", "t_mem_s", "c_s_mhz", "k", "workloads",
         "builtin", "memory", "tuning", "tiles", "blocks", "gemm/double", "probes", "load"]  # fmt: skip


def _junk(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth < 3 and r < 0.12:
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 3 and r < 0.24:
        return {rng.choice(NAMES): _junk(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if r < 0.6:
        return rng.choice(SPECIAL)
    if r < 0.75:
        return rng.uniform(-2000.0, 2000.0)
    if r < 0.85:
        return rng.randint(-(10**6), 10**6)
    if r < 0.92:
        return 10.0 ** rng.uniform(-320, 308) * rng.choice([1, -1])
    return "".join(rng.choice("0123456789.eE-+abc\u00e9 \t") for _ in range(rng.randint(0, 8)))


def _mutated(rng: random.Random) -> bytes:
    i = rng.randrange(len(SEEDS))
    doc = json.loads(SEEDS[i])
    every, hot = PATHS[i]
    for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
        path = rng.choice(hot if hot and rng.random() < 0.6 else every)
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            value = parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced it
        if not isinstance(parent, (dict, list)):
            continue  # replaced by a string, which indexes but cannot be assigned to
        key = path[-1]
        op = rng.choice(["delete", "junk", "junk", "negate", "scale", "scale", "wrap"])
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if op == "delete":
            del parent[key]
        elif op == "junk":
            parent[key] = _junk(rng)
        elif op == "negate" and number:
            parent[key] = -value
        elif op == "scale" and number:
            try:
                factor = rng.choice([0, 1e-300, 1e300, 1e6, math.inf, rng.uniform(0.5, 2.0)])
                parent[key] = value * factor
            except OverflowError:  # 10**400 times a float
                parent[key] = math.inf
        else:
            parent[key] = [value] if rng.random() < 0.5 else {"x": value}
    return json.dumps(doc).encode()


def _damaged(rng: random.Random) -> bytes:
    data = bytearray(rng.choice(SEED_BYTES))
    at = rng.randrange(len(data))
    how = rng.choice(["truncate", "flip", "insert"])
    if how == "truncate":
        return bytes(data[:at])
    if how == "flip":
        data[at] = rng.randrange(256)
        return bytes(data)
    return (
        bytes(data[:at])
        + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        + bytes(data[at:])
    )


def _deep(rng: random.Random) -> bytes:
    depth = rng.randint(100, 5_000)
    opener, closer = rng.choice([(b"[", b"]"), (b'{"power_model": ', b"}"), (b'{"a": [', b"]}")])
    return opener * depth + b"1" + closer * depth


def _random_tree(rng: random.Random) -> bytes:
    doc = {rng.choice(NAMES): _junk(rng) for _ in range(rng.randint(0, 8))}
    return json.dumps(doc).encode()


MAKERS = [_mutated] * 6 + [_damaged, _damaged, _deep, _random_tree]
DOCUMENTS = st.one_of(
    st.integers(0, 2**64).map(lambda n: (lambda rng: rng.choice(MAKERS)(rng))(random.Random(n))),
    st.integers(0, 2**64).map(lambda n: _mutated(random.Random(n))),
    st.binary(max_size=64),
)

_DEVICE = governor.open_device("sim:agx-orin")  # read only: its fingerprint and clock table


# -- the consumers ---------------------------------------------------------------------------
def _consume(doc: dict, device: Any = _DEVICE) -> str:
    """What governor does with a loaded profile (for ``device``, when given); only
    ProfileError may come out."""
    ppw = doc.get("ppw_optimal_clock_mhz")  # tiles' clock note, tune-blocks' start clock
    if ppw is not None:
        f"{float(ppw):g}"
    for section, entries in (doc.get("tuning") or {}).items():  # get_tuning's walk
        for entry in entries.values():
            if section == "tiles":
                {str(k): int(v) for k, v in entry["tiles"].items()}
            elif section == "blocks":
                [tuple(int(x) for x in b) for b in entry["blocks"]]
                clock = entry.get("clock_mhz")
                f"{clock:g}" if isinstance(clock, (int, float)) else None
    sorted((doc.get("workloads") or {}).keys())  # profile list
    if "power_model" not in doc and "tuning" in doc:
        return "loaded: tuning only"
    validate(doc, NAME)  # what find_profile asks of a calibration
    clocks = doc["fingerprint"]["supported_clocks_mhz"]
    if device is not None:
        check_fingerprint(doc, device, NAME, force=True)
        check_clocks_for(doc, device.supported_clocks_mhz(), NAME)
    for workload in [None, *(doc.get("workloads") or {})]:
        entry = doc if workload is None else doc["workloads"][workload]
        model_from_profile(clocks, doc, workload=workload, source=NAME)
        if device is not None:
            model_from_profile(device.supported_clocks_mhz(), doc, workload=workload, source=NAME)
        PowerModel.from_dict(entry["power_model"]).power_w(clocks)
        AnalyticPowerModel.from_dict(entry["power_model"], clocks)
        if entry.get("time_model") is not None:
            TimeModel.from_dict(entry["time_model"]).time_s(clocks)
    pm = doc["power_model"]  # profile show's lines
    f"{doc['ppw_optimal_clock_mhz']:g} {doc.get('ridge_clock_mhz', 0):.0f}"
    f"{pm.get('p_max_w') or 'inf'} {pm['p_idle_w']:.2f} {pm['alpha_w_per_mhz']:.4g}"
    f"{pm['beta_per_mhz']:.3g} {pm['ridge_clock_mhz']:.0f}"
    return "loaded: calibration usable"


def _refused(err: ProfileError) -> None:
    text = str(err)
    assert "\n" not in text and "\r" not in text, text
    assert NAME in text, text


@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(DOCUMENTS)
def test_the_loader_either_loads_or_refuses_in_one_line(data):
    try:
        doc = parse_profile(data, NAME)
    except ProfileError as err:
        _refused(err)
        event("refused by the loader")
        return
    try:
        event(_consume(doc))
    except ProfileError as err:
        _refused(err)
        event("refused by a consumer")


@pytest.mark.parametrize("data", FULL_SEEDS, ids=range(len(FULL_SEEDS)))
def test_the_seeds_load_and_are_usable(data):
    assert _consume(parse_profile(data, NAME), device=None).startswith("loaded")
