"""The typed records a governor's state is read from, and the one place they become the
public ``status()`` dictionary.

Every part that reports state gives frozen dataclass records (the governor's
:class:`GovernorState` and :class:`RunTotals`, a controller's from its ``records()``: the
mission budget's :class:`~governor.runtime.budget.BudgetState`, the rate's, the cap's...).
Other parts read those records, typed; :func:`status_doc` turns them into the dictionary
``Governor.status()`` returns (JSON-ready, the field names its keys), and refuses a key
that two records give.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Type, TypeVar

__all__ = [
    "Correction",
    "GovernorState",
    "RunTotals",
    "find_record",
    "status_doc",
]

R = TypeVar("R")


@dataclass(frozen=True)
class GovernorState:
    """What the governor is doing now (the first keys of ``status()``); see
    :meth:`governor.runtime.governor.Governor.status`."""

    device: str
    policy: str
    policy_spec: Dict[str, Any]
    running: bool
    clock_mhz: Optional[float]
    measured_clock_mhz: Optional[float]
    power_w: Optional[float]
    safe_hold: bool
    safe_hold_reason: Optional[str]
    device_lost: Optional[str]
    overridden_by_other: Optional[str]
    telemetry_failures: int
    steps: int
    clock_changes: int
    interval_s: float
    model: Dict[str, Any]
    profile_path: Optional[str]
    notes: List[str]
    unmet: List[str]
    errors: List[str]


@dataclass(frozen=True)
class RunTotals:
    """The run's time and energy on the device's power figure so far."""

    duration_s: float
    energy_j: float


@dataclass(frozen=True)
class Correction:
    """The measured-over-model power factor a power-type controller applies (None before a
    measurement)."""

    model_correction: Optional[float]


def status_doc(*records: Any) -> Dict[str, Any]:
    """One dictionary of the fields of ``records`` (frozen dataclass instances), in order.

    Raises:
        ValueError: two records give the same key (a part would silently hide another's).
    """
    doc: Dict[str, Any] = {}
    for record in records:
        for field in dataclasses.fields(record):
            if field.name in doc:
                raise ValueError(
                    f"status key {field.name!r} of {type(record).__name__} is given twice"
                )
            doc[field.name] = getattr(record, field.name)
    return doc


def find_record(records: Sequence[Any], kind: Type[R]) -> Optional[R]:
    """The first of ``records`` that is a ``kind`` (None: none is)."""
    for record in records:
        if isinstance(record, kind):
            return record
    return None
