"""scripts/release_check.py, which .ci/run runs: the floors it installs on Python 3.8 are the
ones pyproject.toml declares, and a marker it cannot read stops it instead of being ignored.
(The check itself builds, installs and runs the release; it is too slow for the suite.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release():
    spec = importlib.util.spec_from_file_location(
        "release_check", ROOT / "scripts" / "release_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pyproject(tmp_path, deps):
    body = "\n".join(f"    {d!r}," for d in deps)
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[project]\nname = "x"\ndependencies = [\n{body}\n]\n')
    return path


def test_each_floor_becomes_its_release_series_and_markers_pick_the_python(release, tmp_path):
    path = _pyproject(
        tmp_path,
        [
            "numpy>=1.20",
            "nvidia-ml-py>=12.535",
            "rich",  # no floor: pip's choice
            "tomli>=1.1; python_version < '3.11'",
            "typing_extensions>=4.0; python_version < '3.9'",
            "newer>=2; python_version >= '3.10'",
        ],
    )
    assert release.lowest_requirements(path, (3, 8)) == [
        "numpy==1.20.*",
        "nvidia-ml-py==12.535.*",
        "tomli==1.1.*",
        "typing_extensions==4.0.*",
    ]
    assert release.lowest_requirements(path, (3, 11)) == [
        "numpy==1.20.*",
        "nvidia-ml-py==12.535.*",
        "newer==2.*",
    ]


def test_a_marker_it_cannot_read_stops_the_check(release, tmp_path):
    path = _pyproject(tmp_path, ["numpy>=1.20; platform_machine == 'aarch64'"])
    with pytest.raises(release.CheckFailed, match="cannot read the marker"):
        release.lowest_requirements(path, (3, 8))


def test_the_projects_own_floors_on_python_3_8(release):
    pins = release.lowest_requirements(ROOT / "pyproject.toml", (3, 8))
    names = [p.split("==")[0] for p in pins]
    assert names[:2] == ["numpy", "scipy"] and "typing_extensions" in names and "tomli" in names


def test_the_cli_unwraps_the_implicit_optional_around_annotated():
    """typing_extensions < 4.13 on Python 3.8 returns Optional[Annotated[Optional[T], ...]] for
    an option whose default is None; typer 0.9 then refused every command line (found by the
    release check's floor step, typing_extensions 4.0.1)."""
    from governor._compat import Annotated
    from governor.cli.app import _without_implicit_optional

    inner = Annotated[Optional[Path], "option"]
    assert _without_implicit_optional(Optional[inner]) == inner
    assert _without_implicit_optional(Optional[int]) == Optional[int]
    assert _without_implicit_optional(inner) == inner
