"""Every command's ``--help`` shows its help strings whole: no word lost to markup."""

from __future__ import annotations

import re
from typing import Any, Iterator, List, Tuple

import pytest

from tests.cli_helpers import run_cli

BRACKETED = re.compile(r"\[[^\]\n]*\]")


def _commands() -> List[Tuple[Tuple[str, ...], Any]]:
    import typer

    from governor.cli.app import build_app

    def walk(path: Tuple[str, ...], command: Any) -> Iterator[Tuple[Tuple[str, ...], Any]]:
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(path + (name,), sub)

    return list(walk((), typer.main.get_command(build_app())))


def _flat(text: str) -> str:
    """Without any whitespace: the help is wrapped to the terminal (and at hyphens)."""
    return "".join(text.split())


def _help_strings(command: Any) -> List[str]:
    texts = [command.help or ""]
    texts += [getattr(param, "help", None) or "" for param in command.params]
    return [_flat(t.split("\f")[0]) for t in texts if t.strip()]


COMMANDS = _commands()


def test_the_walk_finds_nested_commands_and_bracketed_help() -> None:
    paths = {path for path, _ in COMMANDS}
    assert ("tiles",) in paths and ("daemon", "status") in paths
    bracketed = [w for _, c in COMMANDS for t in _help_strings(c) for w in BRACKETED.findall(t)]
    assert "[kernel.NAME]" in bracketed and "[gpu.NAME]" in bracketed


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "root")
def test_help_keeps_every_word_of_its_help_strings(capsys, path: Tuple[str, ...]) -> None:
    command = dict(COMMANDS)[path]
    code, out, err = run_cli(capsys, *path, "--help")
    assert code == 0, err
    shown = _flat(out)
    for text in _help_strings(command):
        for word in BRACKETED.findall(text):
            assert word in shown, f"{' '.join(path)} --help lost {word!r}"
        assert text in shown, f"{' '.join(path)} --help lost part of {text!r}"
