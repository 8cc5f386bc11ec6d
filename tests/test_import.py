"""`import governor` must stay cheap: robotics apps on a Jetson import it at start-up."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["numpy", "scipy", "rich", "typer", "pynvml", "jtop", "cupy", "matplotlib"]


def _modules_after(code: str) -> set:
    out = subprocess.run(
        [sys.executable, "-c", code + "; import sys, json; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_governor_loads_no_heavy_module():
    loaded = _modules_after("import governor")
    assert not [m for m in HEAVY if m in loaded]


def test_opening_a_simulated_board_needs_no_numpy_or_vendor_library():
    loaded = _modules_after("import governor; governor.open_device('sim:agx-orin').sample()")
    assert not [m for m in ("numpy", "scipy", "pynvml", "jtop", "cupy", "rich") if m in loaded]


def test_public_names_resolve_and_are_listed():
    import governor

    for name in governor.__all__:
        assert getattr(governor, name) is not None
    assert "open_device" in dir(governor)


def test_unknown_attribute_is_an_attribute_error():
    import governor

    try:
        governor.no_such_thing  # noqa: B018
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")
