"""Small shims so the package runs on Python 3.8+ (JetPack 5 ships 3.8).

Each conditional import is marked for vermin, which checks the rest of the tree for 3.8.
"""

from __future__ import annotations

import sys
from typing import Any, Dict

__all__ = ["Annotated", "toml_loads"]

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
