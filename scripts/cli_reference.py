"""The command-line reference, rendered from the typer application itself.

Run as a script it prints the reference as Markdown; loaded by MkDocs as a hook (mkdocs.yml,
``hooks:``) it replaces the marker line in docs/reference/cli.md with the same text at build
time, so the published reference is always the installed commands' own help. As a hook it
also tidies the API reference: the docstrings' Sphinx roles (``:class:`~a.b.C```), which
mkdocstrings' Google style leaves as text, are shown as the code name alone (``C``).
"""

from __future__ import annotations

import enum
import re
import sys
from typing import Any, Iterator, List, Tuple

MARKER = "<!-- cli-reference -->"
PAGE = "reference/cli.md"


def _root_command() -> Any:
    import typer.main

    from governor.cli.app import build_app

    return typer.main.get_command(build_app())


def commands() -> List[Tuple[str, Any]]:
    """Every command and group as ("governor NAME ...", click command), in --help order."""
    root = _root_command()
    found: List[Tuple[str, Any]] = []

    def walk(cmd: Any, path: List[str]) -> Iterator[Tuple[str, Any]]:
        yield " ".join(["governor", *path]), cmd
        subs = getattr(cmd, "commands", None) or {}
        for name, sub in subs.items():
            if getattr(sub, "hidden", False):
                continue
            yield from walk(sub, [*path, name])

    found.extend(walk(root, []))
    return found


def _cell(text: str) -> str:
    """Text made safe for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def _default(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return "on" if param.default is True else ""
    if param.required:
        return "required"
    value = param.default
    if value is None or callable(value) or value == () or value == []:
        return ""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    return f"`{value}`"


def _names(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{(param.metavar or param.name).upper()}`"
    names = list(param.opts) + list(getattr(param, "secondary_opts", []))
    return ", ".join(f"`{n}`" for n in names)


def _help(cmd: Any) -> str:
    text = (cmd.help or "").strip()
    # typer keeps the whole docstring; the page shows its paragraphs as they are
    return text


def render_command(title: str, cmd: Any) -> str:
    """One command's section: its help, its usage line and a table of its parameters."""
    lines = [f"## `{title}`", ""]
    text = _help(cmd)
    if text:
        lines += [text, ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    subs = getattr(cmd, "commands", None) or {}
    if subs:
        shown = [n for n, s in subs.items() if not getattr(s, "hidden", False)]
        links = ", ".join(f"[`{n}`](#{_anchor(f'{title} {n}')})" for n in shown)
        lines += [f"Subcommands: {links}.", ""]
    if params:
        lines += ["| parameter | default | what |", "|---|---|---|"]
        for p in params:
            lines.append(f"| {_names(p)} | {_default(p)} | {_cell(getattr(p, 'help', '') or '')} |")
        lines.append("")
    return "\n".join(lines)


def _anchor(title: str) -> str:
    """The id MkDocs' toc extension gives the heading ``## `title` ``."""
    return "-".join(title.lower().replace("-", " - ").split()).replace("---", "-")


def render() -> str:
    """The whole reference: every command, group and subcommand."""
    parts = []
    for title, cmd in commands():
        if title == "governor":
            continue
        parts.append(render_command(title, cmd))
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """MkDocs hook: fill the CLI reference page's marker with the rendered reference."""
    if page.file.src_uri == PAGE:
        if MARKER not in markdown:
            raise ValueError(f"{PAGE} lost its marker line {MARKER!r}")
        return markdown.replace(MARKER, render())
    return markdown


_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>(~?)([\w.]+)</code>")


def _role(match: re.Match[str]) -> str:
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"<code>{name}</code>"


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """MkDocs hook: Sphinx roles in the rendered docstrings shown as plain code names."""
    return _ROLE.sub(_role, html)


if __name__ == "__main__":
    sys.stdout.write(render())
