"""``governor tiles`` (EATSS path), the profile cache of tiles and the clock note."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from governor.cli import main
from governor.tuning import eatss


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture, *args: str):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_one_case_as_json_has_the_spec_keys(capsys) -> None:
    code, out, err = run(
        capsys,
        "tiles",
        "gemm",
        "--gpu",
        "a100",
        "--shared-fraction",
        "0.25",
        "--bound",
        "artifact",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    for key in (
        "kernel",
        "gpu",
        "shared_fraction",
        "warp_fraction",
        "precision",
        "bound",
        "tiles",
        "objective",
        "solve_ms",
    ):
        assert key in doc
    assert doc["tiles"] == {"i": 16, "j": 336, "k": 32} and doc["objective"] == 16160
    assert (doc["precision"], doc["bound"], doc["shared_fraction"]) == ("double", "artifact", 0.25)


def test_table_output(capsys) -> None:
    code, out, _ = run(
        capsys, "tiles", "gemm", "--gpu", "a100", "--shared-fraction", "0.25", "--bound", "artifact"
    )
    assert code == 0
    assert "16160" in out and "336" in out and "solved exactly" in out


def test_top_k(capsys) -> None:
    code, out, _ = run(capsys, "tiles", "gemm", "--gpu", "xavier", "--top", "3", "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["top"]) == 3
    values = [c["objective"] for c in doc["top"]]
    assert values == sorted(values, reverse=True) and values[0] == doc["objective"]


def test_all_cases_as_json(capsys) -> None:
    code, out, _ = run(capsys, "tiles", "--all", "--gpu", "2080ti", "--json")
    docs = json.loads(out)
    assert code == 0 and len(docs) == 30 * 3 * 4
    assert {d["warp_fraction"] for d in docs} == {1.0, 0.5, 0.25, 0.125}
    assert {d["shared_fraction"] for d in docs} == {0.0, 0.333, 0.5}
    for d in docs:
        assert ("tiles" in d and "objective" in d) != ("error" in d)


def test_infeasible_case_prints_the_reason_and_fails(capsys) -> None:
    code, out, err = run(capsys, "tiles", "durbin", "--gpu", "a100", "--json")
    assert code == 1
    doc = json.loads(out)
    assert "no coalescing loop" in doc["error"] and "tiles" not in doc
    assert err.count("\n") == 1 and "no coalescing loop" in err


@pytest.mark.parametrize(
    "args, code, text",
    [
        (["tiles", "gemm", "--gpu", "a101"], 1, "unknown GPU 'a101'"),
        (["tiles", "gemmm", "--gpu", "a100"], 1, "unknown kernel 'gemmm'"),
        (["tiles", "gemm", "--gpu", "a100", "--shared-fraction", "2"], 2, "--shared-fraction"),
        (["tiles", "gemm"], 2, "--gpu is required"),
        (["tiles", "--gpu", "a100"], 2, "KERNEL"),
        (["tiles", "gemm", "--gpu", "a100", "--precision", "half"], 2, "half"),
        (["tiles", "--all", "--gpu", "a100", "--save"], 1, "--save stores one case"),
    ],
)
def test_bad_input_is_one_line_without_traceback(capsys, args, code, text) -> None:
    got, out, err = run(capsys, *args, "--json")
    assert got == code
    assert text in err and "Traceback" not in err and err.count("\n") == 1
    assert "error" in json.loads(out.splitlines()[-1])


def test_user_kernel_and_gpu_files(capsys, tmp_path: Path) -> None:
    kernels = tmp_path / "k.toml"
    kernels.write_text(
        '[kernel.stencil]\nloops = ["y", "x"]\nparallel = ["y", "x"]\n'
        'refs = [{ array = "A", index = ["y", "x"], extent = [1000, 1000] },\n'
        '        { array = "B", index = ["y", "x"], extent = [1000, 1000] }]\n'
    )
    gpus = tmp_path / "g.toml"
    gpus.write_text(
        "[gpu.mine]\nthreads_per_warp = 32\nthreads_per_block = 512\nregisters_per_sm = 32768\n"
        "l1_bytes = 65536\nl2_bytes = 1048576\nshared_per_block_bytes = 16384\n"
    )
    code, out, err = run(
        capsys,
        "tiles",
        "stencil",
        "--gpu",
        "mine",
        "--kernels",
        str(kernels),
        "--gpu-spec",
        str(gpus),
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["gpu"] == "mine" and set(doc["tiles"]) == {"y", "x"}


def test_save_then_read_back_from_the_profile(capsys, data_dir: Path) -> None:
    code, out, _ = run(
        capsys, "tiles", "gemm", "--gpu", "xavier", "--board", "agx-xavier", "--save", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert Path(doc["saved"]).parent == data_dir / "profiles"
    assert eatss.cached_tiles("gemm", board="agx-xavier") == doc["tiles"]
    assert eatss.cached_tiles("gemm", board="agx-xavier", precision="single") is None
    assert eatss.cached_tiles("2mm", board="agx-xavier") is None


def test_python_api_save_keeps_other_profile_content(data_dir: Path) -> None:
    from governor.profiles.store import profile_paths, read_profile_file, write_profile_file

    write_profile_file(
        profile_paths("orin-nx")[0], {"board": "orin-nx", "ppw_optimal_clock_mhz": 714.0}
    )
    result = eatss.select_tiles("syrk", "xavier", precision="single")
    eatss.save_tiles(result, "orin-nx")
    doc = read_profile_file(profile_paths("orin-nx")[0])
    assert doc["ppw_optimal_clock_mhz"] == 714.0
    assert doc["tuning"]["tiles"]["syrk/single"]["tiles"] == result.tiles
    assert eatss.cached_tiles("syrk", "orin-nx", "single") == result.tiles
    with pytest.raises(Exception, match="no tiles to save"):
        eatss.save_tiles(eatss.select_tiles("durbin", "xavier"), "orin-nx")


def test_clock_note_with_and_without_a_calibrated_model(capsys, data_dir: Path) -> None:
    from governor.profiles.store import profile_paths, write_profile_file

    assert eatss.clock_note("agx-orin")["ppw_optimal_clock_mhz"] is None
    write_profile_file(
        profile_paths("agx-orin")[0], {"board": "agx-orin", "ppw_optimal_clock_mhz": 816.0}
    )
    note = eatss.clock_note("agx-orin")
    assert note["ppw_optimal_clock_mhz"] == 816.0 and "816 MHz" in note["note"]
    code, out, _ = run(capsys, "tiles", "gemm", "--gpu", "xavier", "--board", "agx-orin")
    assert code == 0 and "816 MHz" in out


def test_subprocess_entry_point(data_dir: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "governor",
            "tiles",
            "2mm",
            "--gpu",
            "a100",
            "--bound",
            "artifact",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["objective"] == 16176


def test_the_tile_product_is_not_called_a_block_size(capsys) -> None:
    # 16 x 336 points per tile on an A100: no launch takes that as threads per block
    code, out, _ = run(capsys, "tiles", "gemm", "--gpu", "a100", "--json")
    doc = json.loads(out)
    assert code == 0 and "block_size" not in doc and "threads_per_block" not in doc
    assert doc["parallel_tile_points"] == doc["tiles"]["i"] * doc["tiles"]["j"]
    code, out, _ = run(capsys, "tiles", "gemm", "--gpu", "a100")
    assert "not threads per block" in out and "block size" not in out


def _runtime_tiles(uri: str, kernel: str = "gemm"):
    import governor
    from governor.runtime import Governor

    with governor.open_device(uri) as dev:
        return Governor(dev, {"policy": "max"}, background=False).tiles(kernel)


def test_the_runtime_suggests_a_save_command_that_works_as_printed(capsys, data_dir) -> None:
    import shlex

    missing = _runtime_tiles("sim:a100-pcie")
    assert missing.value is None
    command = missing.reason.split("(run '")[1].rstrip("')")
    assert command == "governor tiles gemm --board a100-pcie --save"
    code, out, err = run(capsys, *shlex.split(command)[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["saved"] == str(data_dir / "profiles" / "a100-pcie.json")
    found = _runtime_tiles("sim:a100-pcie")
    assert found.value == json.loads(out)["tiles"] and found.reason == "cached for a100-pcie"


def test_save_lands_on_the_board_of_the_device_not_the_gpu_spec_name(
    capsys, data_dir, monkeypatch
) -> None:
    code, out, err = run(capsys, "tiles", "gemm", "--gpu", "a100", "-d", "sim:a100-pcie", "--save")
    assert code == 0, err
    assert sorted(p.name for p in (data_dir / "profiles").iterdir()) == ["a100-pcie.json"]
    assert _runtime_tiles("sim:a100-pcie").value is not None
    monkeypatch.setenv("GOVERNOR_DEVICE", "sim:agx-orin")
    code, out, err = run(capsys, "tiles", "gemm", "--gpu", "a100", "--save")
    assert code == 0, err
    assert (data_dir / "profiles" / "agx-orin.json").is_file()
    assert not (data_dir / "profiles" / "a100.json").exists()


@pytest.mark.parametrize(
    "args, code, text",
    [
        (
            ["--gpu", "a100", "--board", "agx-orn"],
            2,
            "'agx-orn' is no board; did you mean agx-orin? boards: a100-pcie",
        ),
        (["--gpu", "a100"], 1, "no GPU found on this machine: name the board"),
        (["--gpu", "a100", "-d", "sim:a100pcie"], 1, "unknown simulated board 'a100pcie'"),
        (["--board", "agx-orin", "-d", "sim:agx-orin"], 2, "--board or --device, not both"),
    ],
)
def test_a_save_for_no_board_is_refused_and_writes_nothing(
    capsys, data_dir, monkeypatch, args, code, text
) -> None:
    monkeypatch.delenv("GOVERNOR_DEVICE", raising=False)
    monkeypatch.setattr("governor.devices.registry.discover_hardware", lambda: [])
    got, out, err = run(capsys, "tiles", "gemm", *args, "--save")
    assert (got, err.count("\n")) == (code, 1), err
    assert text in err and "Traceback" not in err
    assert not (data_dir / "profiles").exists()


@pytest.mark.parametrize(
    "model_args",
    [
        ["--model", "doacross", "--nest", "sor2d", "--size", "48,48", "--steps", "48"],
        ["--model", "hhc", "--stencil", "jacobi2d", "--size", "64,64", "--steps", "8"],
    ],
    ids=["doacross", "hhc"],
)
def test_the_analytic_models_refuse_a_board_that_is_no_board(capsys, data_dir, model_args):
    code, out, err = run(capsys, "tiles", *model_args, "--board", "agx-orn")
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "'agx-orn' is no board; did you mean agx-orin? boards: a100-pcie" in err
    assert not (data_dir / "profiles").exists()
