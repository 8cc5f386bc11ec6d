"""The documentation site (mkdocs.yml, docs/) covers what it promises: an API entry for every
public name, a CLI reference entry for every command and option, every page in the
navigation, the guides linked from the README. `mkdocs build --strict` itself runs in .ci/run
(broken links, anchors and API entries fail there)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")


def _entries():
    """Each `::: path` block of the API page with its heading option (None if absent)."""
    found = {}
    for match in re.finditer(r"^::: (\S+)\n((?:    .*\n)*)", API, flags=re.M):
        heading = re.search(r"^      heading: (\S+)$", match.group(2), flags=re.M)
        found[match.group(1)] = heading.group(1) if heading else None
    return found


def _public_names():
    import governor
    import governor.runtime

    names = [("governor", n) for n in governor.__all__ if n != "__version__"]
    names += [("governor.runtime", n) for n in governor.runtime.__all__]
    return names


@pytest.mark.parametrize("module,name", _public_names())
def test_every_public_name_has_an_api_entry(module, name):
    import governor  # noqa: F401  (the lazy names resolve through the package)

    obj = getattr(importlib.import_module(module), name)
    where = obj.__name__ if isinstance(obj, type(importlib)) else f"{obj.__module__}.{name}"
    entries = _entries()
    assert where in entries, f"docs/reference/api.md has no '::: {where}' entry for {name}"
    assert entries[where] == f"{module}.{name}", "titled with the name an app imports"


def test_the_version_is_documented():
    assert "`governor.__version__`" in API


def test_every_policy_name_is_a_listed_member():
    from governor.runtime import policies

    block = re.search(r"^::: governor\.runtime\.policies\n((?:    .*\n)*)", API, flags=re.M)
    members = re.findall(r"^        - (\S+)$", block.group(1), flags=re.M)
    assert sorted(members) == sorted(policies.__all__)


def test_no_entry_names_a_missing_object():
    for path in _entries():
        module, _, attr = path.rpartition(".")
        try:
            importlib.import_module(path)
            continue
        except ImportError:
            pass
        assert hasattr(importlib.import_module(module), attr), path


def _reference():
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts" / "cli_reference.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _all_commands():
    """Every command path of the typer app, walked here apart from the generator."""
    import typer.main

    from governor.cli.app import build_app

    out = {}

    def walk(cmd, path):
        out[" ".join(path)] = cmd
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(build_app()), ["governor"])
    del out["governor"]
    return out


def test_cli_reference_has_every_command_and_option():
    text = _reference().render()
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## `|\Z)", text, flags=re.M | re.S))
    commands = _all_commands()
    assert len(commands) >= 30
    assert set(sections) == set(commands)
    for title, cmd in commands.items():
        for param in cmd.params:
            for opt in param.opts:
                shown = opt if opt.startswith("-") else opt.upper()
                assert f"`{shown}`" in sections[title], f"{title}: {opt} missing"


def test_cli_reference_page_is_filled_at_build_time():
    mod = _reference()
    page = (DOCS / mod.PAGE).read_text(encoding="utf-8")
    assert mod.MARKER in page

    class _File:
        src_uri = mod.PAGE

    class _Page:
        file = _File()

    built = mod.on_page_markdown(page, page=_Page())
    assert mod.MARKER not in built and "## `governor run`" in built
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "- scripts/cli_reference.py" in config


def _nav_pages():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = []

    def walk(node):
        if isinstance(node, str):
            pages.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(config["nav"])
    return pages


def test_every_page_is_in_the_navigation():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    nav = _nav_pages()
    assert sorted(pages) == sorted(set(nav))
    assert len(nav) == len(set(nav))


def test_readme_links_the_guides_and_the_reference():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guides = sorted(p.relative_to(ROOT).as_posix() for p in (DOCS / "guides").glob("*.md"))
    assert len(guides) == 6
    for target in [*guides, "docs/reference/api.md", "docs/reference/cli.md"]:
        assert f"]({target})" in readme, target


def test_runtime_reference_lists_every_status_key(tmp_path, monkeypatch):
    """Each key `Governor.status()` returns under each policy is named in docs/runtime.md."""
    import governor
    from governor.runtime import Governor

    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GOVERNOR_STATE_DIR", str(tmp_path / "state"))
    text = (DOCS / "runtime.md").read_text(encoding="utf-8")
    section = text[text.index("## What `status()` returns") :]
    section = section[: section.index("\n## ", 5)]
    specs = [
        {"policy": "ppw"},
        {"policy": "power-cap", "cap_w": 25},
        {"policy": "battery", "battery_wh": 10, "hours": 1},
        {"policy": "throughput", "rate_hz": 30, "battery_wh": 5, "hours": 1},
    ]
    for spec in specs:
        dev = governor.open_device("sim:agx-orin")
        dev.run_workload("compute")
        with Governor(dev, spec, background=False) as gov:
            gov.step()
            keys = set(gov.status())
        dev.close()
        missing = sorted(k for k in keys if f"`{k}`" not in section)
        assert not missing, f"{spec['policy']}: {missing}"


def test_sphinx_roles_in_docstrings_show_as_code_names():
    mod = _reference()
    html = "a :class:<code>~governor.devices.base.Device</code>, :func:<code>from_spec</code> b"
    assert mod.on_page_content(html, page=None) == "a <code>Device</code>, <code>from_spec</code> b"


def test_runtime_reference_shows_the_governors_signature():
    import inspect

    from governor.runtime import Governor

    params = []
    for p in inspect.signature(Governor).parameters.values():
        if p.kind is p.KEYWORD_ONLY and "*" not in params:
            params.append("*")
        params.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    shown = f"`Governor({', '.join(params)})`"
    assert shown in (DOCS / "runtime.md").read_text(encoding="utf-8")


def test_developer_pages_are_under_development_not_among_the_users_figures():
    """The refactor proofs and mutation scores are for maintainers: the Measurements section
    holds users' figures only (issue 49)."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    sections = {k: v for item in nav if isinstance(item, dict) for k, v in item.items()}
    development = [p for entry in sections["Development"] for p in entry.values()]
    measurements = [p for entry in sections["Measurements"] for p in entry.values()]
    for page in ("mutation.md", "benchmarks/runtime-refactor.md"):
        assert page in development and page not in measurements
