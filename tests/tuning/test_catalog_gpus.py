"""One set of board names for the tile models (issue 49, item 4): every board of the simulated
catalog has an EATSS resource description and a DOACROSS occupancy card, ``--gpu`` takes a
catalog name or its ``sim:`` URI, and the HHC model either has constants for the board or
says which GPUs it has them for and how to calibrate the others."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from governor.cli import main
from governor.devices.sim.catalog import board_names, get_board
from governor.errors import DeviceNotFoundError
from governor.tuning import eatss
from governor.tuning.analytic import catalog as analytic
from governor.tuning.eatss.formulation import build_problem

KIB = 1024
# Maxwell and Pascal: shared memory per SM apart from the 24 KB L1/texture cache (CUDA C++
# Programming Guide, Compute Capability 5.x and 6.x; data/boards.md's per-CC table for 5.3)
SEPARATE_SHARED = {"5.2": 96 * KIB, "5.3": 64 * KIB, "6.2": 64 * KIB}


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture, *args: str):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_every_catalog_board_has_an_eatss_description_that_matches_its_facts() -> None:
    described = eatss.builtin_gpus()
    missing = [b for b in board_names() if b not in described]
    assert missing == []
    for name in board_names():
        facts = get_board(name).facts
        gpu = eatss.find_gpu(f"sim:{name}?seed=2")
        assert gpu == described[name]
        assert gpu.l2_bytes == int(facts["l2_kb"]) * KIB, name
        cc = str(facts["cc"])
        if cc in SEPARATE_SHARED:
            assert (gpu.shared_per_sm_bytes, gpu.l1_bytes) == (SEPARATE_SHARED[cc], 24 * KIB)
        else:
            assert gpu.shared_per_sm_bytes is None and gpu.l1_bytes >= 96 * KIB, name
        assert gpu.registers_per_sm == 65536 and gpu.shared_per_block_bytes == 48 * KIB


@pytest.mark.parametrize("name", board_names())
def test_tiles_takes_every_catalog_board_and_its_uri(capsys, data_dir, name) -> None:
    code, out, err = run(capsys, "tiles", "gemm", "--gpu", f"sim:{name}", "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["gpu"] == name and doc["tiles"] and doc["objective"] > 0
    assert not data_dir.exists()  # no --save: nothing written


def test_nano_gets_tiles_from_its_own_memories_and_saves_them(capsys, data_dir) -> None:
    code, out, err = run(capsys, "tiles", "gemm", "--gpu", "nano", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["tiles"] == {"i": 16, "j": 96, "k": 16}
    code, out, err = run(capsys, "tiles", "gemm", "--board", "nano", "--save", "--json")
    assert code == 0, err
    saved = data_dir / "profiles" / "nano.json"
    assert json.loads(out)["saved"] == str(saved)
    stored = json.loads(saved.read_text())["tuning"]
    assert any(v.get("tiles") == {"i": 16, "j": 96, "k": 16} for v in _values(stored))


def _values(doc):
    if isinstance(doc, dict):
        yield doc
        for v in doc.values():
            yield from _values(v)


def test_separate_shared_memory_leaves_the_l1_cache_its_size() -> None:
    # nano, double precision: the L1 holds 24 KB / 8 B = 3072 elements whatever the shared
    # fraction; shared memory is half of its own 64 KB at s = 0.5, 4096 elements
    gemm, nano = eatss.find_kernel("gemm"), eatss.find_gpu("nano")
    capacity = {c.name: c.capacity for c in build_problem(gemm, nano, 0.5).constraints}
    assert (capacity["L1 cache"], capacity["shared memory"]) == (3072, 4096)
    assert {c.name: c.capacity for c in build_problem(gemm, nano, 0.0).constraints}[
        "L1 cache"
    ] == 3072
    # a Volta board carves the same shared fraction out of its one L1 + shared pool
    nx = {
        c.name: c.capacity
        for c in build_problem(gemm, eatss.find_gpu("xavier-nx"), 0.25).constraints
    }
    assert (nx["L1 cache"], nx["shared memory"]) == (16384 - 4096, 4096)


def test_doacross_knows_every_catalog_board() -> None:
    for name in board_names():
        card = analytic.doacross_gpu(f"sim:{name}")
        # titan-x is the built-in titanx card (the DOACROSS and HHC papers' GPU)
        assert card.name == {"titan-x": "titanx"}.get(name, name)
        assert card.n_sm == int(get_board(name).facts["sms"])


def test_doacross_on_nano_through_the_cli(capsys, data_dir) -> None:
    args = ["--model", "doacross", "--nest", "sor1d", "--size", "100000", "--steps", "2000"]
    code, out, err = run(capsys, "tiles", *args, "--gpu", "nano", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["gpu"] == "nano"
    assert not data_dir.exists()


def test_hhc_has_constants_for_titan_x_and_says_how_to_get_the_others(capsys, data_dir) -> None:
    assert analytic.hhc_gpu("sim:titan-x") == analytic.hhc_gpu("titanx")
    for name in board_names():
        if name == "titan-x":
            continue
        with pytest.raises(DeviceNotFoundError, match=f"no HHC constants for {name}: .*gtx980"):
            analytic.hhc_gpu(name)
    hhc = ["tiles", "--model", "hhc", "--stencil", "jacobi2d", "--size", "256,256"]
    code, out, err = run(capsys, *hhc, "--steps", "8", "--gpu", "nano")
    assert (code, out, err.count("\n")) == (1, "", 1)
    assert "no HHC constants for nano" in err and "titanx (catalog board titan-x)" in err
    assert not data_dir.exists()
    # the command the message gives works as printed, and then --board nano does
    command = re.search(r"`(governor tiles-calibrate [^`]*)`", err).group(1)
    code, out, err = run(capsys, *shlex.split(command)[1:])
    assert code == 0, err
    code, out, err = run(capsys, *hhc, "--steps", "8", "--board", "nano", "--json")
    assert code == 0, err
    assert json.loads(out)["constants_source"] == "calibrated"
    profile = json.loads((data_dir / "profiles" / "nano.json").read_text())
    assert set(profile["tuning"]) >= {"hhc-constants", "tiles-hhc"}


def test_a_live_maxwell_device_reads_as_the_catalog_describes_it() -> None:
    """CUDA's properties of a GTX Titan X (compute capability 5.2, as deviceQuery reports
    them) give the catalog's titan-x set: separate 96 KB shared memory, 24 KB L1/texture."""
    props = {
        "name": b"NVIDIA GeForce GTX TITAN X",
        "major": 5,
        "minor": 2,
        "warpSize": 32,
        "maxThreadsPerBlock": 1024,
        "regsPerMultiprocessor": 65536,
        "l2CacheSize": 3145728,
        "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 98304,
    }
    live = eatss.gpu_from_cuda_properties(props, name="titan-x")
    shipped = eatss.find_gpu("titan-x")
    assert live.to_dict() == dict(shipped.to_dict(), shared_fractions=[0.0, 0.25, 0.5])
    # a Volta part keeps its one pool
    volta = eatss.gpu_from_cuda_properties(dict(props, major=7, minor=0))
    assert volta.shared_per_sm_bytes is None and volta.l1_bytes == 128 * KIB
