"""The battery bench's --baseline-cache: reused only when made by the same simulator and
calibration code, rebuilt when stale or unreadable, a malformed entry recomputed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_helpers import script_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    with script_module("bench_runtime") as mod:
        yield mod


ROW = {
    "budget_j": 1234.5,
    "best_work": 100.0,
    "best_clock_mhz": 900.0,
    "oracle_work": 103.0,
    "oracle_const": 100.5,
}


class Maker:
    """A baseline computation that counts its calls."""

    def __init__(self, row):
        self.row, self.calls = row, 0

    def __call__(self, *args):
        self.calls += 1
        return dict(self.row)


def test_same_code_reuses_the_file(bench, tmp_path):
    path = tmp_path / "cache.json"
    first = bench.BaselineCache(path, code="abc")
    make = Maker(ROW)
    key = bench.BaselineCache.battery_key("l4", "bursty", 1, "board", 600.0)
    assert first.battery_baseline(key, make) == ROW
    assert make.calls == 1
    again = bench.BaselineCache(path, code="abc")
    assert again.rebuilt is None
    other = Maker(dict(ROW, budget_j=1.0))
    assert again.battery_baseline(key, other) == ROW  # from the file, not recomputed
    assert other.calls == 0


def test_cache_of_other_code_is_rebuilt(bench, tmp_path, capsys):
    path = tmp_path / "cache.json"
    old = bench.BaselineCache(path, code="old-sim")
    key = bench.BaselineCache.battery_key("t4", "step", 0, "board", 600.0)
    old.battery_baseline(key, Maker(dict(ROW, budget_j=999.0)))
    old.profile("t4", lambda board: {"board": board, "stale": True})
    new = bench.BaselineCache(path, code="new-sim")
    assert "other simulator or calibration code" in new.rebuilt
    assert "rebuilding" in capsys.readouterr().err
    make = Maker(ROW)
    assert new.battery_baseline(key, make) == ROW
    assert make.calls == 1
    fresh = new.profile("t4", lambda board: {"board": board, "stale": False})
    assert fresh["stale"] is False
    saved = json.loads(path.read_text())
    assert saved["code"] == "new-sim"
    assert saved["battery"] == {key: ROW}
    assert saved["profiles"]["t4"]["stale"] is False


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1, 2]", json.dumps({"version": 0, "code": "abc", "battery": {}})],
)
def test_unreadable_or_foreign_file_is_rebuilt(bench, tmp_path, text):
    path = tmp_path / "cache.json"
    path.write_text(text)
    cache = bench.BaselineCache(path, code="abc")
    assert cache.rebuilt
    make = Maker(ROW)
    key = bench.BaselineCache.battery_key("nano", "steady", 0, "board", 600.0)
    assert cache.battery_baseline(key, make) == ROW
    assert make.calls == 1
    assert json.loads(path.read_text())["version"] == bench.BaselineCache.VERSION


@pytest.mark.parametrize(
    "bad",
    [
        {k: v for k, v in ROW.items() if k != "oracle_work"},
        dict(ROW, budget_j=float("nan")),
        dict(ROW, budget_j=-5.0),
        dict(ROW, best_work="100"),
        "a string",
    ],
)
def test_malformed_entry_is_recomputed(bench, tmp_path, bad):
    path = tmp_path / "cache.json"
    key = bench.BaselineCache.battery_key("v100", "bursty", 2, "board", 600.0)
    doc = {"version": bench.BaselineCache.VERSION, "code": "abc", "profiles": {}}
    path.write_text(json.dumps(dict(doc, battery={key: bad})))
    cache = bench.BaselineCache(path, code="abc")
    assert cache.rebuilt is None
    make = Maker(ROW)
    assert cache.battery_baseline(key, make) == ROW
    assert make.calls == 1


def test_no_lasting_clock_is_a_valid_entry(bench, tmp_path):
    row = dict(ROW, best_work=None, best_clock_mhz=None)
    cache = bench.BaselineCache(tmp_path / "cache.json", code="abc")
    key = bench.BaselineCache.battery_key("nano", "step", 0, "board", 600.0)
    cache.battery_baseline(key, Maker(row))
    make = Maker(ROW)
    assert (
        bench.BaselineCache(tmp_path / "cache.json", code="abc").battery_baseline(key, make) == row
    )
    assert make.calls == 0


def test_code_hash_follows_the_sources(bench, tmp_path):
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "board.py").write_text("POWER = 1\n")
    (tmp_path / "cal.py").write_text("STEPS = 3\n")
    sources = ("sim", "cal.py")
    before = bench.baseline_code_hash(tmp_path, sources)
    assert bench.baseline_code_hash(tmp_path, sources) == before
    (tmp_path / "sim" / "board.py").write_text("POWER = 2\n")
    after_sim = bench.baseline_code_hash(tmp_path, sources)
    assert after_sim != before
    (tmp_path / "cal.py").write_text("STEPS = 4\n")
    assert bench.baseline_code_hash(tmp_path, sources) != after_sim
    (tmp_path / "sim" / "new.py").write_text("")
    assert bench.baseline_code_hash(tmp_path, sources) != after_sim
    with pytest.raises(OSError):  # a source that moved is an error, not a silent skip
        bench.baseline_code_hash(tmp_path, ("gone",))


def test_default_hash_covers_simulator_and_calibration(bench):
    assert "governor/devices/sim" in bench.BASELINE_SOURCES
    assert "governor/calibrate" in bench.BASELINE_SOURCES
    for src in bench.BASELINE_SOURCES:
        assert (ROOT / src).exists(), src
    assert bench.baseline_code_hash() == bench.baseline_code_hash(ROOT)


def test_bench_battery_uses_the_cached_budget(bench, tmp_path, capsys, profile_of):
    """The battery table runs its missions on the cached budget and ratios against the
    cached best constant clock's work (nothing recomputed)."""
    path = tmp_path / "cache.json"
    cache = bench.BaselineCache(path, code="abc")
    doc = cache.profile("orin-nano", profile_of)
    rows = {}
    for trace in bench.BATTERY_TRACES:
        key = cache.battery_key("orin-nano", trace, 0, "board", 20.0)
        rows[trace] = cache.battery_baseline(
            key, lambda t=trace: bench.battery_baselines("orin-nano", doc, t, 20.0)
        )
    reused = bench.BaselineCache(path, code="abc")
    assert reused.profile("orin-nano", lambda board: pytest.fail("recalibrated")) == doc

    def no_baselines(*args, **kwargs):
        raise AssertionError("baselines recomputed")

    kept = bench.battery_baselines
    bench.battery_baselines = no_baselines
    try:
        bench.bench_battery(["orin-nano"], {"orin-nano": doc}, 20.0, cache=reused)
    finally:
        bench.battery_baselines = kept
    out = capsys.readouterr().out
    for trace, row in rows.items():
        line = next(x for x in out.splitlines() if x.startswith(f"| orin-nano | {trace} |"))
        assert line.split("|")[3].strip() == f"{row['budget_j']:.0f}"
        assert line.split("|")[8].strip() == f"{row['best_clock_mhz']:.0f}"


def test_default_hash_covers_the_budget_rule(bench, monkeypatch):
    """The budget (60 % of the way from the lowest clock's energy to the top's) is part of
    a cached baseline: a change to the function that sets it is a change of key."""
    before = bench.baseline_code_hash()
    real = bench.inspect.getsource

    def edited(fn):
        text = real(fn)
        return text.replace("0.6 *", "0.7 *") if fn is bench.battery_baselines else text

    monkeypatch.setattr(bench.inspect, "getsource", edited)
    assert bench.baseline_code_hash() != before
