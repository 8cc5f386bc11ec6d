"""CUDA C sources of the library kernels, each parameterised by its loop tiles.

The templates themselves live in the kernels' descriptions (``governor.kernels.library``).
Every source starts with ``#define`` lines for its tiles and thread-block shape, so the text
printed by ``governor kernels compile`` compiles on its own. ``real_t`` is ``float`` or
``double``.
"""

from __future__ import annotations

from typing import Dict, Mapping, Tuple

from governor.kernels.description import KernelDescription, descriptions

__all__ = ["KERNELS", "KernelTemplate", "render"]

#: the library kernels by name (read from their descriptions)
KERNELS: Dict[str, KernelDescription] = dict(descriptions())
#: the former name of a kernel's record
KernelTemplate = KernelDescription


def render(
    template: KernelDescription,
    tiles: Mapping[str, int],
    block: Tuple[int, int, int],
    precision: str,
) -> str:
    """The complete CUDA C source of ``template`` for these tiles and thread-block shape."""
    real = "double" if precision == "double" else "float"
    lines = [f"// governor kernel {template.name}: {template.mapping}", f"typedef {real} real_t;"]
    lines += [f"#define TILE_{loop.upper()} {int(tiles[loop])}" for loop in template.loops]
    lines += [f"#define BLOCK_{axis} {int(n)}" for axis, n in zip("XYZ", block)]
    return "\n".join(lines) + "\n" + template.body.lstrip("\n")
