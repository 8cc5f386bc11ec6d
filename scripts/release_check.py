"""Check that a release of gpu-governor installs and runs, as a user would get it.

    python scripts/release_check.py [--skip-lowest]

Steps, each printed on one line with its time; the first failure stops the check (exit 1):

1. ``python -m build``: the wheel and the sdist, into a temporary folder;
2. ``twine check``: the metadata and the README render as PyPI shows them;
3. the wheel in a fresh virtual environment: ``governor --version`` names this checkout's
   version, and ``governor calibrate --json`` calibrates the simulated default board;
4. the sdist builds a wheel of its own (what ``pip install gpu-governor`` does where no wheel
   fits);
5. the floor: on a Python 3.8 interpreter (JetPack 5's Python; found on PATH or in pyenv's
   versions, or named by ``GOVERNOR_TEST_PYTHON38``), the lowest versions that
   ``pyproject.toml`` declares for the core dependencies, this wheel, and the unit tests of
   the lower layers (models, measure, profiles) run against them. Without such an
   interpreter this step says so and is skipped: the declared floors (numpy 1.20, scipy 1.6)
   have no wheels for newer Pythons.

``.ci/run`` runs it before the test suite. It needs ``build`` and ``twine`` (the ``dev``
extra) and the package indexes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
# The unit tests run against the lowest versions: the layers that use numpy and scipy most.
FLOOR_TESTS = ["tests/models", "tests/measure", "tests/profiles"]


class CheckFailed(Exception):
    """One step of the check failed; the message says which and why."""


def _run(cmd, *, env=None, cwd=None, timeout=1200):
    proc = subprocess.run(
        [str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        tail = (proc.stdout[-2000:] + proc.stderr[-3000:]).strip()
        raise CheckFailed(
            f"{' '.join(str(c) for c in cmd[:4])} ... exited {proc.returncode}\n{tail}"
        )
    return proc


def _clean_env(tmp: Path) -> dict:
    """The environment a new user has: no PYTHON* variables, state and data in a fresh place."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.pop("VIRTUAL_ENV", None)
    env["GOVERNOR_STATE_DIR"] = str(tmp / "state")
    env["GOVERNOR_DATA_DIR"] = str(tmp / "data")
    env.pop("GOVERNOR_DEVICE", None)
    return env


def version_of_checkout() -> str:
    text = (ROOT / "governor" / "_version.py").read_text()
    found = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    if not found:
        raise CheckFailed("governor/_version.py has no __version__")
    return found.group(1)


def lowest_requirements(pyproject: Path, python_version: tuple) -> list:
    """``name==floor.*`` for every core dependency that applies to ``python_version``.

    A dependency without a ``>=`` floor is left out (pip picks it); one whose environment
    marker excludes that Python is left out too. Only the simple markers this project uses
    (``python_version < 'X.Y'`` and ``>=``) are understood; anything else is an error.
    """
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = []
    for dep in deps:
        spec, _, marker = dep.partition(";")
        if marker.strip() and not _marker_holds(marker.strip(), python_version):
            continue
        found = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", spec)
        if found:
            # the floor's release series: "nvidia-ml-py>=12.535" -> 12.535.x (there is no
            # 12.535 itself), "numpy>=1.20" -> 1.20.x
            pins.append(f"{found.group(1)}=={found.group(2)}.*")
    return pins


def _marker_holds(marker: str, python_version: tuple) -> bool:
    found = re.fullmatch(r"python_version\s*(<=|>=|<|>|==)\s*['\"](\d+)\.(\d+)['\"]", marker)
    if not found:
        raise CheckFailed(f"release_check cannot read the marker {marker!r} in pyproject.toml")
    op, bound = found.group(1), (int(found.group(2)), int(found.group(3)))
    have = tuple(python_version[:2])
    return {
        "<": have < bound,
        "<=": have <= bound,
        ">": have > bound,
        ">=": have >= bound,
        "==": have == bound,
    }[op]


def find_python38():
    """A Python 3.8 interpreter: GOVERNOR_TEST_PYTHON38, PATH, or pyenv's versions."""
    candidates = [os.environ.get("GOVERNOR_TEST_PYTHON38", ""), shutil.which("python3.8") or ""]
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += [str(p) for p in sorted(root.glob("versions/3.8*/bin/python3.8"))]
    for exe in filter(None, candidates):
        try:
            out = subprocess.run(
                [exe, "-c", "import sys; print(sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 8)":
            return exe
    return None


def step_build(out: Path) -> tuple:
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=ROOT)
    wheels = sorted(out.glob("*.whl"))
    sdists = sorted(out.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise CheckFailed(f"build made {len(wheels)} wheels and {len(sdists)} sdists, not one each")
    return wheels[0], sdists[0]


def step_twine(wheel: Path, sdist: Path) -> None:
    _run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist])


def step_fresh_install(wheel: Path, tmp: Path) -> str:
    venv = tmp / "fresh"
    _run([sys.executable, "-m", "venv", venv])
    _run([venv / "bin" / "pip", "install", "-q", wheel])
    env = _clean_env(tmp)
    version = _run([venv / "bin" / "governor", "--version"], env=env).stdout.strip()
    want = f"governor {version_of_checkout()}"
    if version != want:
        raise CheckFailed(f"the installed wheel says {version!r}, the checkout is {want!r}")
    cal = _run([venv / "bin" / "governor", "calibrate", "--json"], env=env, timeout=600)
    doc = json.loads(cal.stdout)
    if "no GPU found" not in cal.stderr or not doc.get("ppw_optimal_clock_mhz"):
        raise CheckFailed(
            "calibrate on the simulated default board did not say so or gave no clock"
        )
    return f"{version}; calibrate on {doc['device']}: {doc['ppw_optimal_clock_mhz']} MHz"


def step_sdist_builds(sdist: Path, tmp: Path) -> None:
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / "from-sdist", sdist])
    if not list((tmp / "from-sdist").glob("gpu_governor-*.whl")):
        raise CheckFailed("the sdist built no wheel")


def step_floor(wheel: Path, tmp: Path) -> str:
    exe = find_python38()
    if exe is None:
        return "skipped: no Python 3.8 interpreter here (set GOVERNOR_TEST_PYTHON38)"
    venv = tmp / "floor"
    _run([exe, "-m", "venv", venv])
    pins = lowest_requirements(ROOT / "pyproject.toml", (3, 8))
    pip = venv / "bin" / "pip"
    _run([pip, "install", "-q", *pins, "pytest>=7", "hypothesis>=6"])
    _run([pip, "install", "-q", "--no-deps", wheel])
    # the installed wheel, not the checkout, is what the tests import: run them from a copy
    # of tests/ outside the checkout
    tests = tmp / "floor-tests"
    shutil.copytree(ROOT / "tests", tests / "tests")
    env = _clean_env(tmp)
    done = _run(
        [venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *FLOOR_TESTS],
        cwd=tests,
        env=env,
        timeout=1800,
    )
    where = _run(
        [venv / "bin" / "python", "-c", "import governor, numpy, scipy; print(governor.__file__)"],
        cwd=tests,
        env=env,
    ).stdout.strip()
    if str(ROOT) in where:
        raise CheckFailed(f"the floor tests imported the checkout ({where}), not the wheel")
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "?"
    return f"Python 3.8, {' '.join(pins)}: {summary}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-lowest", action="store_true", help="skip step 5 (the floor)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="governor-release-") as name:
        tmp = Path(name)
        try:
            t0 = time.monotonic()
            wheel, sdist = step_build(tmp / "dist")
            print(f"release: built {wheel.name} and {sdist.name} ({time.monotonic() - t0:.0f} s)")
            for name_, run in [
                ("twine check", lambda: step_twine(wheel, sdist)),
                ("fresh venv", lambda: step_fresh_install(wheel, tmp)),
                ("sdist builds", lambda: step_sdist_builds(sdist, tmp)),
                ("floor", None if args.skip_lowest else (lambda: step_floor(wheel, tmp))),
            ]:
                if run is None:
                    print(f"release: {name_}: skipped (--skip-lowest)")
                    continue
                t0 = time.monotonic()
                said = run()
                tail = f": {said}" if said else ""
                print(f"release: {name_} ok{tail} ({time.monotonic() - t0:.0f} s)")
        except CheckFailed as err:
            print(f"release: FAILED: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
