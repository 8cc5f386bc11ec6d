"""Typed reads of a profile document's JSON objects: one reader instead of a cast per field.

A profile (``governor/profiles``) and the records in it (a power or time model, a probe) are
JSON objects: ``Mapping[str, object]`` to a type checker. :class:`DocReader` hands out their
fields with the type the code wants, and refuses a field of another type with a one-line
:class:`~governor.errors.ProfileError` that names the file and the field's path::

    profile /home/me/.local/share/governor/profiles/agx-orin.json:
        power_model.p_idle_w must be a number, not 'fast'

(one line in reality: the wording of :mod:`governor.profiles.schema`). A default applies where
the field is missing or null; without one, a missing field is an error. Numbers are JSON
numbers (not strings, not booleans) and come back as ``float``; non-finite ones pass (the
schema's rules say where they may appear). Below every layer (it imports only
:mod:`governor.errors`), so the models and the calibration that parse profile records read
through it too.
"""

from __future__ import annotations

import builtins
from typing import Dict, List, Mapping, Optional, Sequence, Union

from governor.errors import ProfileError

__all__ = ["DocReader", "show"]

# the reader's getters are named after the types they return; inside the class these names
# are its methods, so annotations there say builtins.float etc.


class _Missing:
    """No default: the field is required."""


_MISSING = _Missing()


def show(value: object) -> str:
    """A short one-line picture of a bad value (for an error message)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value: object) -> Optional[float]:
    """``value`` as a float when it is a JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer literal with hundreds of digits
        return None


class DocReader:
    """Typed access to one JSON object of a profile document.

    ``where``: the object's path in the document (``"power_model"``,
    ``"workloads.memory.time_model"``; "" at the top level); ``path``: the file, for the
    message (None: a document given in memory).
    """

    def __init__(self, doc: Mapping[str, object], where: str = "", path: object = None) -> None:
        self.doc = doc
        self.where = where
        self.path = path

    @classmethod
    def of(cls, value: object, where: str = "", path: object = None) -> DocReader:
        """A reader of ``value``, which must be a JSON object.

        Raises:
            ProfileError: ``value`` is not an object (names the file and ``where``).
        """
        if not isinstance(value, Mapping):
            problem = f"must be an object, not {show(value)}"
            raise cls({}, "", path)._fail(where or "the document", problem)
        return cls(value, where, path)

    # -- plumbing -----------------------------------------------------------------------------
    def field(self, key: builtins.str) -> builtins.str:
        """The path of ``key`` in the document (for messages)."""
        return f"{self.where}.{key}" if self.where else key

    def _fail(self, field: builtins.str, problem: builtins.str) -> ProfileError:
        where = "profile (given)" if self.path is None else f"profile {self.path}"
        err = ProfileError(f"{where}: {field} {problem}")
        err.path = self.path
        return err

    def error(self, key: builtins.str, problem: builtins.str) -> ProfileError:
        """A ProfileError about the field ``key`` (for a rule the getters do not know)."""
        return self._fail(self.field(key), problem)

    def _wrong(self, key: builtins.str, wanted: builtins.str, value: object) -> ProfileError:
        return self._fail(self.field(key), f"must be {wanted}, not {show(value)}")

    def _get(self, key: builtins.str, default: object) -> object:
        """The field's value; ``default`` where it is missing or null (_MISSING: an error)."""
        value = self.doc.get(key)
        if value is None:
            if not isinstance(default, _Missing):
                return default
            if key not in self.doc:
                raise self._fail(self.field(key), "is missing")
        return value

    def has(self, key: builtins.str) -> builtins.bool:
        """Whether the field is present and not null."""
        return self.doc.get(key) is not None

    # -- scalars ------------------------------------------------------------------------------
    def float(
        self, key: builtins.str, default: Union[builtins.float, _Missing] = _MISSING
    ) -> builtins.float:
        """A number (``default`` where missing or null; without one, required)."""
        value = self._get(key, default)
        number = _number(value)
        if number is None:
            raise self._wrong(key, "a number", value)
        return number

    def optional_float(self, key: builtins.str) -> Optional[builtins.float]:
        """A number, or None where the field is missing or null."""
        return self.float(key) if self.has(key) else None

    def int(
        self, key: builtins.str, default: Union[builtins.int, _Missing] = _MISSING
    ) -> builtins.int:
        """An integer (a JSON integer: not a float, not a bool)."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, builtins.int):
            raise self._wrong(key, "an integer", value)
        return value

    def bool(
        self, key: builtins.str, default: Union[builtins.bool, _Missing] = _MISSING
    ) -> builtins.bool:
        """true or false."""
        value = self._get(key, default)
        if not isinstance(value, builtins.bool):
            raise self._wrong(key, "true or false", value)
        return value

    def str(
        self, key: builtins.str, default: Union[builtins.str, _Missing] = _MISSING
    ) -> builtins.str:
        """A string."""
        value = self._get(key, default)
        if not isinstance(value, builtins.str):
            raise self._wrong(key, "a string", value)
        return value

    # -- containers ---------------------------------------------------------------------------
    def _list(self, key: builtins.str, default: Union[Sequence[object], _Missing]) -> List[object]:
        value = self._get(key, default)
        if not isinstance(value, (list, tuple)):
            raise self._wrong(key, "a list", value)
        return list(value)

    def list_of_floats(
        self, key: builtins.str, default: Union[Sequence[object], _Missing] = _MISSING
    ) -> List[builtins.float]:
        """A list of numbers."""
        out = []
        for i, value in enumerate(self._list(key, default)):
            number = _number(value)
            if number is None:
                raise self._wrong(f"{key}[{i}]", "a number", value)
            out.append(number)
        return out

    def list_of_optional_floats(
        self, key: builtins.str, default: Union[Sequence[object], _Missing] = _MISSING
    ) -> List[Optional[builtins.float]]:
        """A list of numbers and nulls."""
        out: List[Optional[builtins.float]] = []
        for i, value in enumerate(self._list(key, default)):
            number = _number(value)
            if number is None and value is not None:
                raise self._wrong(f"{key}[{i}]", "a number or null", value)
            out.append(number)
        return out

    def list_of_str(
        self, key: builtins.str, default: Union[Sequence[object], _Missing] = _MISSING
    ) -> List[builtins.str]:
        """A list of strings."""
        out = []
        for i, value in enumerate(self._list(key, default)):
            if not isinstance(value, builtins.str):
                raise self._wrong(f"{key}[{i}]", "a string", value)
            out.append(value)
        return out

    def mapping(
        self, key: builtins.str, default: Union[Mapping[builtins.str, object], _Missing] = _MISSING
    ) -> DocReader:
        """The object at ``key``, as a reader (``default``, an object, where missing or null)."""
        value = self._get(key, default)
        if not isinstance(value, Mapping):
            raise self._wrong(key, "an object", value)
        return DocReader(value, self.field(key), self.path)

    def float_map(
        self, key: builtins.str, *, skip_null: builtins.bool = False
    ) -> Dict[builtins.str, builtins.float]:
        """An object of numbers by name ({} where missing or null); ``skip_null`` leaves out
        the names whose value is null (a fit's uncertainty it could not estimate)."""
        inner = self.mapping(key, {})
        out = {}
        for name, value in inner.doc.items():
            if value is None and skip_null:
                continue
            number = _number(value)
            if number is None:
                raise inner._wrong(builtins.str(name), "a number", value)
            out[builtins.str(name)] = number
        return out
