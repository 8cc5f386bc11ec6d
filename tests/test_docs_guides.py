"""The guides' commands on simulated boards run as written and print what the guides show.

Each `$ governor ...` line of a console block in docs/guides/ that names a simulated board is
run, in the guide's order, with one data directory per guide (a calibration early in a guide
is what a later command finds); it must exit as the guide says (0 unless an `echo $?` line
follows) and print every output line the guide shows under it, but for the lines a reader
cannot expect to match (abridged with '...', paths, dates, table rules); `governor run`'s
figures, measured on the wall clock, are compared with their digits masked."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ROOT / "docs" / "guides"
# a command on a simulated board, or the cluster simulator (simulated boards throughout)
SIMULATED = re.compile(r"(-d|--device|--board) '?sim:|^governor cluster simulate ")
_NUMBER = re.compile(r"\d+(\.\d+)?")


def _blocks(text):
    return re.findall(r"```console\n(.*?)```", text, flags=re.S)


def _commands(path):
    """(command line, the output lines shown under it, the exit code shown) per command."""
    found = []
    for block in _blocks(path.read_text(encoding="utf-8")):
        current, exit_code_next = None, False
        for line in block.splitlines():
            if line.startswith("$ echo $?"):
                exit_code_next = True  # the next line is the last command's exit code
            elif line.startswith("$ "):
                current = [line[2:], [], 0]
                found.append(current)
                exit_code_next = False
            elif current is not None and exit_code_next:
                current[2] = int(line.strip())
                exit_code_next = False
            elif current is not None:
                current[1].append(line)
    return [
        (cmd, out, code)
        for cmd, out, code in found
        if cmd.startswith("governor ") and SIMULATED.search(cmd) and "ros2" not in cmd
    ]


def _comparable(line):
    """Whether an output line shown in a guide can be expected verbatim."""
    skip = ("...", "…", "~", "/", "┃", "┏", "┡", "└", "^C", "calibrated  ")
    return line.strip() and not any(s in line for s in skip)


def _norm(text):
    return " ".join(text.split())


@pytest.mark.parametrize("guide", sorted(p.name for p in GUIDES.glob("*.md")))
def test_guide_commands_run_as_shown(guide, tmp_path):
    commands = _commands(GUIDES / guide)
    if not commands:
        pytest.skip(f"{guide} runs nothing on a simulated board")
    env = dict(
        os.environ,
        COLUMNS="100",
        GOVERNOR_DATA_DIR=str(tmp_path / "data"),
        GOVERNOR_STATE_DIR=str(tmp_path / "state"),
    )
    for command, shown, code in commands:
        args = shlex.split(command)[1:]
        proc = subprocess.run(
            [sys.executable, "-m", "governor", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == code, f"{guide}: {command}: {proc.stderr}"
        assert "Traceback" not in proc.stderr
        printed = _norm(proc.stdout + "\n" + proc.stderr)
        wall_clock = args[0] == "run"  # the job runs in real time: its figures vary a little
        for line in shown:
            if not _comparable(line):
                continue
            if wall_clock:
                masked = _NUMBER.sub("#", _norm(line))
                assert masked in _NUMBER.sub("#", printed), f"{guide}: {command}: {line!r}"
            else:
                assert _norm(line) in printed, f"{guide}: {command}: not printed: {line!r}"
