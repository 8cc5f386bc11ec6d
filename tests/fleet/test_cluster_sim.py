"""``governor cluster simulate``: the controller on simulated GPUs against static splits, its
JSON, its one-line errors; and ``governor cluster`` without the service module."""

from __future__ import annotations

import json
import sys

import pytest

from governor.fleet.cluster_sim import parse_counts, simulate_cluster, static_caps
from tests.cli_helpers import run_cli

MIX = ["--gpus", "a100-sxm:2,t4:2", "--jobs", "compute:2,memory:2,bursty:1"]


def test_the_json_has_the_issue_keys_and_the_budget_holds(capsys):
    code, out, err = run_cli(
        capsys, "cluster", "simulate", *MIX, "--budget-w", "600", "--duration-s", "600",
        "--seed", "3", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    for key in ("work", "work_uniform", "work_best_static", "peak_power_w", "budget_w"):
        assert isinstance(doc[key], float), key
    assert doc["budget_w"] == 600.0
    assert doc["least_budget_w"] == 2 * 100 + 2 * 60
    # the sum of the caps in force, and of the power, never above the budget at any sample
    assert doc["peak_caps_w"] <= 600.0 + 1e-6
    assert 0 < doc["peak_power_w"] <= doc["peak_caps_w"] + 1e-6
    assert doc["samples_over_budget"] == 0
    assert doc["work"] > 0 and doc["jobs_run"] == 5
    # the hindsight best static split is the best static split: no worse than the others
    assert doc["work_best_static"] >= doc["work_uniform_filled"] - 1e-6
    assert doc["work_best_static"] >= doc["work_proportional"] - 1e-6
    assert doc["work_best_static"] <= doc["work_best_static_bound"] + 1e-6


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    a = simulate_cluster([("a100-sxm", 2)], [("compute", 1), ("memory", 2)], 500, 400, seed=5)
    b = simulate_cluster([("a100-sxm", 2)], [("compute", 1), ("memory", 2)], 500, 400, seed=5)
    c = simulate_cluster([("a100-sxm", 2)], [("compute", 1), ("memory", 2)], 500, 400, seed=6)
    assert a == b
    assert a.work != c.work


def test_the_controller_beats_uniform_caps_where_jobs_differ():
    # two A100s at a budget under their tops: one compute-bound job, one memory-bound; the
    # memory-bound one gains little past ~160 W, the compute-bound one much
    r = simulate_cluster([("a100-sxm", 2)], [("compute", 1), ("memory", 1)], 400, 900, seed=2)
    assert r.work > 1.03 * r.work_uniform
    assert r.work >= 0.97 * r.work_best_static


def test_static_splits_stay_in_range_and_in_budget():
    from governor.fleet.cluster_sim import _build

    world = _build([("a100-sxm", 2), ("t4", 2)], [("compute", 1)], 10, 0)
    uniform = static_caps(world.gpus, 600, "uniform")
    # budget / GPUs = 150 W; the T4s cannot take more than 70 W and the rest is left unused
    assert uniform == {"node0/0": 150.0, "node0/1": 150.0, "node0/2": 70.0, "node0/3": 70.0}
    filled = static_caps(world.gpus, 600, "uniform_filled")
    assert filled["node0/0"] == pytest.approx(230.0) and filled["node0/2"] == 70.0
    prop = static_caps(world.gpus, 600, "proportional")
    assert sum(prop.values()) == pytest.approx(600.0)
    assert prop["node0/0"] / prop["node0/1"] == pytest.approx(1.0)
    # budget / GPUs = 82.5 W is below the A100s' lowest cap (100 W): they sit there and
    # the T4s' share is lowered until the sum fits
    tight = static_caps(world.gpus, 330, "uniform")
    assert tight["node0/0"] == 100.0
    assert tight["node0/2"] == pytest.approx(65.0)
    assert sum(tight.values()) == pytest.approx(330.0)


def test_parse_counts():
    assert parse_counts("a:2, b:3", ["a", "b"], "x") == [("a", 2), ("b", 3)]
    assert parse_counts("a", ["a"], "x") == [("a", 1)]


@pytest.mark.parametrize(
    "args,words",
    [
        (["--gpus", "a100-sxm:2,nope:3"], "unknown board 'nope'"),
        (["--gpus", "a100-sxm:0"], "must be a whole number >= 1"),
        (["--gpus", "a100-sxm:x"], "must be a whole number >= 1"),
        (["--gpus", "a100-sxm:1,a100-sxm:1"], "listed twice"),
        (["--gpus", ","], "no board given"),
        (["--jobs", "compute:1,video:2"], "unknown job kind 'video'"),
        (["--budget-w", "300"], "the least budget that works is 320 W"),
        (["--budget-w", "-5"], "--budget-w"),
        (["--duration-s", "0"], "--duration-s"),
    ],
)
def test_bad_inputs_get_one_line_and_exit_2(capsys, args, words):
    base = {"--gpus": "a100-sxm:2,t4:2", "--jobs": "compute:2", "--budget-w": "600"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    argv = ["cluster", "simulate", "--duration-s", "60"]
    for k, v in base.items():
        if k not in args:
            argv += [k, v]
    argv += args
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert words in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_plain_output_names_every_baseline(capsys):
    code, out, err = run_cli(
        capsys, "cluster", "simulate", *MIX, "--budget-w", "600", "--duration-s", "300"
    )
    assert code == 0, err
    for words in ("uniform caps:", "proportional caps:", "best static", "peak summed power"):
        assert words in out


def test_the_service_without_its_module_says_so_in_one_line(capsys, monkeypatch):
    # None in sys.modules makes the import fail: a build without the service
    monkeypatch.setitem(sys.modules, "governor.fleet.cluster_service", None)
    code, out, err = run_cli(capsys, "cluster", "--budget-w", "1000")
    assert code == 1
    assert err.strip().splitlines() == [
        "governor: error: the cluster budget service is not in this build "
        "(governor.fleet.cluster_service is missing); try 'governor cluster simulate'"
    ]


def test_the_service_needs_a_budget(capsys):
    code, out, err = run_cli(capsys, "cluster")
    assert code == 2
    assert "--budget-w" in out
