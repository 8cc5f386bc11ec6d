"""Small shims so the package runs on Python 3.8+ (JetPack 5 ships 3.8).

Each conditional import is marked for vermin, which checks the rest of the tree for 3.8.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict

__all__ = ["Annotated", "MAX_JSON_DEPTH", "json_loads", "toml_loads"]

if sys.version_info >= (3, 9):
    from typing import Annotated  # novermin
else:  # pragma: no cover - Python 3.8
    from typing_extensions import Annotated


def toml_loads(text: str) -> Dict[str, Any]:
    """Parse TOML text (tomllib on 3.11+, the tomli backport before).

    Raises:
        ValueError: invalid TOML (both libraries' decode errors are ValueErrors).
    """
    if sys.version_info >= (3, 11):
        import tomllib  # novermin
    else:  # pragma: no cover - Python 3.8-3.10
        import tomli as tomllib
    return tomllib.loads(text)


#: deeper JSON is refused before parsing: nothing the project reads nests past a dozen levels
MAX_JSON_DEPTH = 200
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def json_loads(text: str, **kwargs: Any) -> Any:
    """``json.loads`` that refuses nesting deeper than :data:`MAX_JSON_DEPTH` first.

    Python 3.8's C decoder does not raise RecursionError on deeply nested input: it aborts
    the interpreter ("Fatal Python error: Cannot recover from stack overflow"). A corrupt
    profile, journal or lock file, or a daemon client's request, must not crash the process
    that holds a GPU's settings.

    Raises:
        json.JSONDecodeError: not JSON, or nested too deeply (a ValueError, as json raises).
    """
    depth = deepest = 0
    bare = _JSON_STRING.sub('""', text)  # brackets inside strings do not nest
    for match in _JSON_BRACKET.finditer(bare):
        depth += 1 if match.group() in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                raise json.JSONDecodeError(
                    f"nested more than {MAX_JSON_DEPTH} levels deep", bare, match.start()
                )
    return json.loads(text, **kwargs)
