"""Every library kernel compiles with NVRTC for every catalog board's architecture, at the
tiles the board's selector chooses, within the board's limits (needs the nvrtc extra)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from governor.devices.sim.catalog import board_names
from governor.kernels import KERNELS, LaunchError, board_arch, build_kernel, check_launch
from governor.kernels.nvrtc import CompileReport, compile_source
from governor.tuning.occupancy import WARP_SIZE, occupancy

pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC not installed (extra nvrtc)")


@pytest.mark.parametrize("board", board_names())
def test_every_kernel_compiles_for_the_board_within_its_limits(board):
    arch = board_arch(board)
    limits = arch.limits
    for kernel in KERNELS:
        built = build_kernel(kernel, board)
        report, plan = built.report, built.plan
        assert report.arch == "sm_" + limits.cc.replace(".", "")
        # ptxas's figures, against the board's limits
        assert 0 < report.registers_per_thread <= 255
        threads = plan.threads_per_block
        assert threads <= limits.max_threads_per_block
        warps = -(-threads // WARP_SIZE)
        regs_per_warp = -(-report.registers_per_thread * WARP_SIZE // 256) * 256
        granule = -(-warps // limits.sub_partitions) * limits.sub_partitions
        assert granule * regs_per_warp <= limits.max_regs_per_block
        assert report.shared_memory_bytes <= 48 * 1024
        # the source declares the shared memory the mapping says it stages
        assert report.shared_memory_bytes == plan.shared_memory_bytes
        # the occupancy reported is the model's, fed with the compiler's figures
        occ = occupancy(
            limits, plan.thread_block, report.registers_per_thread, report.shared_memory_bytes
        )
        assert built.occupancy == occ and occ.blocks_per_sm >= 1


def test_registers_times_threads_over_the_file_is_refused():
    from governor.kernels import plan_launch
    from governor.tuning.occupancy import arch_limits

    limits = arch_limits("5.3")  # 32768 registers per block on a Nano
    plan = plan_launch("jacobi-2d", {"i": 32, "j": 32}, limits, 256)
    report = CompileReport("sm_53", 255, 0, 0, 0, 0, 1, "12.9", "")
    with pytest.raises(LaunchError, match="registers"):
        check_launch(plan, report, limits)


def test_compile_json_is_what_nvrtc_reports_for_the_printed_source(capsys):
    code, out, _ = run_cli(capsys, "kernels", "compile", "gemm", "--board", "agx-orin", "--json")
    assert code == 0
    doc = json.loads(out)
    again = compile_source(doc["source"], "gemm", doc["arch"])
    assert doc["arch"] == "sm_87"
    assert doc["registers_per_thread"] == again.registers_per_thread
    assert doc["shared_memory_bytes"] == again.shared_memory_bytes
    x, y, z = doc["thread_block"]
    assert doc["threads_per_block"] == x * y * z <= 1024
    assert f"#define BLOCK_X {x}" in doc["source"]
    assert doc["tile"] == {"i": 16, "j": 336, "k": 48}
    assert "block_size" not in doc


def test_given_tiles_compile(capsys):
    code, out, _ = run_cli(
        capsys,
        "kernels",
        "compile",
        "heat-3d",
        "--board",
        "t4",
        "--tiles",
        "i=4,j=8,k=32",
        "--threads",
        "128",
        "--precision",
        "single",
        "--json",
    )
    doc = json.loads(out)
    assert code == 0 and doc["tile"] == {"i": 4, "j": 8, "k": 32}
    assert doc["threads_per_block"] == 128 and "typedef float real_t;" in doc["source"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["seidel-2d", "--board", "nano", "--tiles", "i=2048,j=4"], "over the limit of 1024"),
        (["gemm", "--board", "h100-sxm", "--tiles", "i=128,j=64,k=64"], "static limit of 49152"),
        (["gemm", "--board", "nano", "--threads", "2048"], "2048 exceeds the limit of 1024"),
        (["gemmx", "--board", "nano"], "known: " + ", ".join(sorted(KERNELS))),
        (["gemm", "--board", "nope"], "known boards: a100-pcie"),
    ],
)
def test_configurations_that_cannot_launch_are_one_line(capsys, args, needle):
    code, out, err = run_cli(capsys, "kernels", "compile", *args)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_list_names_every_kernel(capsys):
    code, out, _ = run_cli(capsys, "kernels", "list", "--json")
    assert code == 0
    assert [d["kernel"] for d in json.loads(out)] == list(KERNELS)


def test_occupancy_from_a_kernel_uses_the_compilers_counts(capsys):
    code, out, _ = run_cli(
        capsys, "occupancy", "--from-kernel", "gemm", "--board", "agx-orin", "--json"
    )
    doc = json.loads(out)
    built = build_kernel("gemm", "agx-orin")
    assert code == 0
    assert doc["registers_per_thread"] == built.report.registers_per_thread
    assert doc["shared_memory_bytes"] == built.report.shared_memory_bytes
    expected = occupancy(
        "8.7",
        built.plan.thread_block,
        built.report.registers_per_thread,
        doc["shared_memory_bytes"],
    ).to_dict()
    assert {k: doc[k] for k in expected} == expected


def test_occupancy_from_a_kernel_refuses_hand_given_counts(capsys):
    code, _, err = run_cli(
        capsys, "occupancy", "--from-kernel", "gemm", "--board", "t4", "--registers", "32"
    )
    assert code == 2 and "leave out --cc" in err
