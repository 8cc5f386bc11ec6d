"""``governor tiles --model hhc|doacross``: through tiles_analytic.run and through the CLI."""

from __future__ import annotations

import json

import pytest

from governor.errors import DeviceNotFoundError, InvalidRequestError, ProfileError
from governor.profiles.store import get_tuning
from governor.tuning.analytic.energy import PowerModel


@pytest.fixture(autouse=True)
def _dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GOVERNOR_PROFILES_DIR", str(tmp_path / "shipped"))


def _run(capsys, **kw):
    from governor.cli.tiles_analytic import run

    args = dict(model="hhc", stencil=None, nest=None, gpu=None, size=None, steps=None,
                within=0.10, objective="time", board=None, json_out=True)  # fmt: skip
    args.update(kw)
    assert run(**args) == 0
    return json.loads(capsys.readouterr().out)


def test_hhc_json_keys_and_cache(capsys, tmp_path):
    doc = _run(capsys, stencil="gradient2d", gpu="gtx980", size="8192,8192", steps=8192)
    assert {"model", "ideal_time_s", "best", "shortlist"} <= set(doc)
    assert doc["model"] == "hhc" and round(doc["ideal_time_s"], 2) == 16.35
    assert set(doc["best"]) >= {"tiles", "time_s"}
    assert all(s["time_s"] <= doc["best"]["time_s"] * 1.10 for s in doc["shortlist"])
    assert doc["cached"] is False and doc["cached_in"] is None
    # without --board nothing is written: a GPU name is no board whose profile is read
    assert not list((tmp_path / "data").rglob("*.json"))
    again = _run(capsys, stencil="gradient2d", gpu="gtx980", size="8192,8192", steps=8192)
    assert again["cached"] is False and again["best"] == doc["best"]
    # with --board the choice is kept in that board's profile, and the output says where
    kept = _run(capsys, stencil="gradient2d", gpu="gtx980", size="8192,8192", steps=8192,
                board="nano")  # fmt: skip
    assert kept["cached"] is False and kept["cached_in"] == str(
        tmp_path / "data" / "profiles" / "nano.json"
    )
    key = next(iter(json.loads(open_profile("nano"))["tuning"]["tiles-hhc"]))
    assert get_tuning("nano", "tiles-hhc", key)["best"] == doc["best"]
    again = _run(capsys, stencil="gradient2d", gpu="gtx980", size="8192,8192", steps=8192,
                 board="nano")  # fmt: skip
    assert again["cached"] is True and again["cached_in"] == kept["cached_in"]


def open_profile(board):
    from governor.profiles.store import profile_paths

    return profile_paths(board)[0].read_text()


def test_doacross_json_keys(capsys, tmp_path):
    doc = _run(capsys, model="doacross", nest="sor3d", size="16,16,16", steps=16)
    assert {"model", "best", "layouts_searched", "search_s"} <= set(doc)
    assert set(doc["best"]) >= {"tiles", "block", "grid", "time_s"}
    assert doc["model"] == "doacross" and doc["gpu"] == "c1060"
    assert isinstance(doc["best"]["block"], list) and doc["layouts_searched"] > 0
    assert doc["cached_in"] is None and not list((tmp_path / "data").rglob("*.json"))


def test_energy_objective_uses_the_board_profile(capsys, tmp_path):
    with pytest.raises(InvalidRequestError, match="--board"):
        _run(
            capsys, stencil="jacobi2d", gpu="gtx980", size="1024,1024", steps=64, objective="energy"
        )
    with pytest.raises(ProfileError, match="governor calibrate"):
        _run(capsys, stencil="jacobi2d", gpu="gtx980", size="1024,1024", steps=64,
             objective="energy", board="nano")  # fmt: skip
    pm = PowerModel(30.0, 0.06, 1000.0, 0.002, 200.0, (700, 1000, 1216))
    prof = tmp_path / "data" / "profiles"
    prof.mkdir(parents=True, exist_ok=True)
    (prof / "nano.json").write_text(json.dumps({
        "board": "nano", "fingerprint": {"supported_clocks_mhz": list(pm.supported_clocks_mhz)},
        "power_model": {"p_idle_w": 30.0, "alpha_w_per_mhz": 0.06, "ridge_clock_mhz": 1000.0,
                        "beta_per_mhz": 0.002, "p_max_w": 200.0}}))  # fmt: skip
    doc = _run(capsys, stencil="jacobi2d", gpu="gtx980", size="1024,1024", steps=64,
               objective="energy", board="nano")  # fmt: skip
    assert doc["objective"] == "energy" and doc["best"]["clock_mhz"] in (700, 1000, 1216)
    assert doc["best"]["energy_j"] > 0
    doc = _run(capsys, model="doacross", nest="sor2d", size="48,48", steps=48,
               objective="energy", board="nano")  # fmt: skip
    assert doc["best"]["clock_mhz"] in (700, 1000, 1216)


@pytest.mark.parametrize(
    "kw,err,match",
    [
        (dict(gpu="gtx980", size="64,64", steps=8), InvalidRequestError, "--stencil"),
        (dict(stencil="jacobi2d", size="64,64", steps=8), InvalidRequestError, "--gpu"),
        (dict(stencil="jacobi2d", gpu="gtx980", steps=8), InvalidRequestError, "--size"),
        (
            dict(stencil="jacobi2d", gpu="gtx980", size="64,x", steps=8),
            InvalidRequestError,
            "integers",
        ),
        (dict(stencil="jacobi2d", gpu="gtx980", size="64", steps=8), InvalidRequestError, "2-D"),
        (dict(stencil="jacobi2d", gpu="gtx980", size="64,64"), InvalidRequestError, "--steps"),
        (
            dict(stencil="jacobi2d", gpu="gtx980", size="64,64", steps=8, within=-1),
            InvalidRequestError,
            "within",
        ),
        (dict(stencil="nope", gpu="gtx980", size="64,64", steps=8), DeviceNotFoundError, "stencil"),
        (dict(stencil="jacobi2d", gpu="h100", size="64,64", steps=8), DeviceNotFoundError, "GPU"),
        (dict(model="doacross", size="64", steps=8), InvalidRequestError, "--nest"),
        (dict(model="doacross", nest="sor9d", size="64", steps=8), DeviceNotFoundError, "nest"),
        (dict(model="doacross", nest="sor2d", size="64", steps=8), InvalidRequestError, "2 space"),
    ],
)
def test_invalid_options_are_one_line_errors(capsys, kw, err, match):
    with pytest.raises(err, match=match) as info:
        _run(capsys, **kw)
    assert "\n" not in str(info.value)


def _main(args):
    from governor.cli import main

    with pytest.raises(SystemExit) as info:
        main(args)
    return info.value.code


def test_cli_hhc_and_doacross(capsys):
    code = _main(["tiles", "--model", "hhc", "--stencil", "heat2d", "--gpu", "titanx",
                  "--size", "2048,2048", "--steps", "256", "--within", "0.05", "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["model"] == "hhc" and doc["best"]["time_s"] >= doc["ideal_time_s"]
    code = _main(["tiles", "--model", "doacross", "--nest", "sor3d", "--size", "12,12,12",
                  "--steps", "12", "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["model"] == "doacross" and doc["best"]["grid"] >= 1


def test_cli_errors_are_json_with_exit_1(capsys):
    code = _main(["tiles", "--model", "hhc", "--stencil", "jacobi2d", "--gpu", "h100",
                  "--size", "64,64", "--steps", "8", "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1
    assert "unknown GPU" in json.loads(captured.out)["error"]
    assert captured.err.startswith("governor: error:")


def test_cli_table_output(capsys):
    code = _main(["tiles", "--model", "hhc", "--stencil", "laplacian2d", "--gpu", "gtx980",
                  "--size", "1024,1024", "--steps", "128"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "HHC laplacian2d" in out and "t_s1=" in out
