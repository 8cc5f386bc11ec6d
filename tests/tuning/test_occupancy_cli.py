"""``governor occupancy``: keys of specs/cli-json.md and one-line errors."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

_cli = run_cli


def test_json_keys(capsys):
    code, out, _ = _cli(
        capsys, "occupancy", "--cc", "8.6", "--threads", "256", "--registers", "64", "--json"
    )
    doc = json.loads(out)
    assert code == 0
    # 8.6: 8 warps, rpw 2048 -> 32 warps by registers -> 4 blocks, 32 of 48 warps
    assert {
        k: doc[k]
        for k in (
            "compute_capability",
            "threads_per_block",
            "blocks_per_sm",
            "active_warps_per_sm",
            "limited_by",
        )
    } == {
        "compute_capability": "8.6",
        "threads_per_block": 256,
        "blocks_per_sm": 4,
        "active_warps_per_sm": 32,
        "limited_by": "registers",
    }
    assert doc["occupancy"] == pytest.approx(2 / 3)


def test_plain_output_and_2d_shape(capsys):
    code, out, _ = _cli(
        capsys, "occupancy", "--cc", "8.0", "--threads", "16x16", "--shared-bytes", "20000"
    )
    assert code == 0 and "limited by shared" in out and "87.5%" in out


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--cc", "4.0", "--threads", "256"), 1),
        (("--cc", "abc", "--threads", "256"), 1),
        (("--cc", "8.6", "--threads", "32x32x2"), 1),
        # out of any GPU's range: usage errors, found by the option's own check
        (("--cc", "8.6", "--threads", "0"), 2),
        (("--cc", "8.6", "--threads", "2048"), 2),
        (("--cc", "8.6", "--threads", "256", "--registers", "300"), 2),
        (("--cc", "8.6", "--threads", "256", "--shared-bytes", "-5"), 2),
    ],
)
def test_bad_input_is_one_line(capsys, args, expected):
    code, out, err = _cli(capsys, "occupancy", *args, "--json")
    assert code == expected and err.startswith("governor: error:") and err.count("\n") == 1
    assert "error" in json.loads(out)
