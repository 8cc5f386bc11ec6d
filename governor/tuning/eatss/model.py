"""Loop-nest descriptions for EATSS: one statement, its loops and its array references.

A kernel is written outermost loop first; each reference names an array and, for each of its
dimensions, the loop iterator that indexes it (last = fastest varying, stride-1) and the
dimension's extent in elements. The TOML form, one table per kernel::

    [kernel.gemm]
    loops = ["i", "j", "k"]
    parallel = ["i", "j"]
    refs = [
      { array = "In", index = ["i", "k"], extent = [8000, 8000] },
      { array = "Ker", index = ["k", "j"], extent = [8000, 8000] },
      { array = "Out", index = ["i", "j"], extent = [8000, 8000] },
    ]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from governor.errors import InvalidRequestError

__all__ = ["Kernel", "Reference", "load_kernels", "parse_kernels", "read_toml"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Reference:
    """One array reference: ``array[index[0]]...[index[-1]]`` with per-dimension extents."""

    array: str
    index: Tuple[str, ...]
    extent: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", tuple(self.index))
        object.__setattr__(self, "extent", tuple(self.extent))
        if not isinstance(self.array, str) or not self.array:
            raise InvalidRequestError(
                f"array reference needs a non-empty array name, not {self.array!r}"
            )
        if not self.index:
            raise InvalidRequestError(f"reference to {self.array} has no dimensions")
        if len(self.index) != len(self.extent):
            raise InvalidRequestError(
                f"reference to {self.array} has {len(self.index)} indices but "
                f"{len(self.extent)} extents"
            )
        for it in self.index:
            if not isinstance(it, str) or not it:
                raise InvalidRequestError(f"reference to {self.array}: bad iterator {it!r}")
        for ext in self.extent:
            if not _is_int(ext) or ext <= 0:
                raise InvalidRequestError(
                    f"reference to {self.array}: extent {ext!r} is not a positive integer"
                )

    @property
    def ndim(self) -> int:
        return len(self.index)

    def to_dict(self) -> Dict[str, Any]:
        return {"array": self.array, "index": list(self.index), "extent": list(self.extent)}


@dataclass(frozen=True)
class Kernel:
    """A single-statement loop nest: ``loops`` outermost first, the ``parallel`` subset, refs.

    Raises:
        InvalidRequestError: empty nest, duplicate loops, a parallel loop or a reference
            iterator that is not one of ``loops``, no references, non-positive extents.
    """

    name: str
    loops: Tuple[str, ...]
    parallel: Tuple[str, ...]
    refs: Tuple[Reference, ...]
    statement: Optional[str] = field(default=None, compare=False)

    def __post_init__(self) -> None:
        loops = tuple(self.loops)
        parallel = tuple(self.parallel)
        refs = tuple(self.refs)
        object.__setattr__(self, "loops", loops)
        object.__setattr__(self, "parallel", parallel)
        object.__setattr__(self, "refs", refs)
        name = self.name
        if not isinstance(name, str) or not name:
            raise InvalidRequestError(f"kernel needs a non-empty name, not {name!r}")
        if not loops:
            raise InvalidRequestError(f"kernel {name}: empty loop nest")
        for it in loops:
            if not isinstance(it, str) or not it:
                raise InvalidRequestError(f"kernel {name}: bad loop iterator {it!r}")
        dup = sorted({it for it in loops if loops.count(it) > 1})
        if dup:
            raise InvalidRequestError(f"kernel {name}: duplicate loop {', '.join(dup)}")
        known = set(loops)
        for it in parallel:
            if it not in known:
                raise InvalidRequestError(f"kernel {name}: parallel loop {it!r} is not in the nest")
        if len(set(parallel)) != len(parallel):
            raise InvalidRequestError(f"kernel {name}: a parallel loop is listed twice")
        if not refs:
            raise InvalidRequestError(f"kernel {name}: no array references")
        for ref in refs:
            if not isinstance(ref, Reference):
                raise InvalidRequestError(f"kernel {name}: {ref!r} is not a Reference")
            for it in ref.index:
                if it not in known:
                    raise InvalidRequestError(
                        f"kernel {name}: reference to {ref.array} uses unknown iterator {it!r}"
                    )

    @classmethod
    def from_dict(cls, name: str, doc: Mapping[str, Any]) -> Kernel:
        """Build a kernel from its TOML table (``loops``, ``parallel``, ``refs``)."""
        if not isinstance(doc, Mapping):
            raise InvalidRequestError(f"kernel {name}: expected a table")
        loops = _str_list(doc.get("loops"), f"kernel {name}: loops")
        parallel = _str_list(doc.get("parallel", []), f"kernel {name}: parallel")
        raw_refs = doc.get("refs")
        if not isinstance(raw_refs, list):
            raise InvalidRequestError(f"kernel {name}: refs must be a list of tables")
        refs = []
        for raw in raw_refs:
            if not isinstance(raw, Mapping):
                raise InvalidRequestError(f"kernel {name}: each reference must be a table")
            array = raw.get("array")
            if not isinstance(array, str):
                raise InvalidRequestError(f"kernel {name}: reference array must be a string")
            index = _str_list(raw.get("index"), f"kernel {name}: reference index")
            extent = raw.get("extent")
            if not isinstance(extent, list):
                raise InvalidRequestError(f"kernel {name}: reference extent must be a list")
            refs.append(Reference(array=array, index=tuple(index), extent=tuple(extent)))
        statement = doc.get("statement")
        return cls(
            name=name,
            loops=tuple(loops),
            parallel=tuple(parallel),
            refs=tuple(refs),
            statement=statement if isinstance(statement, str) else None,
        )

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "loops": list(self.loops),
            "parallel": list(self.parallel),
            "refs": [r.to_dict() for r in self.refs],
        }
        if self.statement:
            doc["statement"] = self.statement
        return doc


def _str_list(value: Any, what: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequestError(f"{what} must be a list of strings")
    return list(value)


def read_toml(path: Path, what: str) -> Dict[str, Any]:
    """Parse a TOML file given by a user.

    Raises:
        InvalidRequestError: the file cannot be read or is not TOML.
    """
    from governor._compat import toml_loads

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err
        raise InvalidRequestError(f"cannot read {what} file {path}: {reason}") from err
    try:
        return toml_loads(text)
    except ValueError as err:
        raise InvalidRequestError(f"{what} file {path} is not valid TOML: {err}") from err


def parse_kernels(doc: Mapping[str, Any], source: str = "kernels") -> Dict[str, Kernel]:
    """Kernels of a parsed document with ``[kernel.NAME]`` tables, by name."""
    table = doc.get("kernel")
    if not isinstance(table, Mapping) or not table:
        raise InvalidRequestError(f"{source}: no [kernel.NAME] tables")
    return {str(name): Kernel.from_dict(str(name), body) for name, body in table.items()}


def load_kernels(path: Path) -> Dict[str, Kernel]:
    """Kernels of a TOML file, by name.

    Raises:
        InvalidRequestError: unreadable file, bad TOML, or an invalid kernel.
    """
    return parse_kernels(read_toml(Path(path), "kernels"), str(path))


def iter_names(items: Iterable[str]) -> str:
    return ", ".join(sorted(items))
