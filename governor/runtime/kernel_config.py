"""The kernel configuration for the governor's operating point, and who to tell when it moves.

Tables (``governor kernels table --save``, :mod:`governor.kernels.operating_points`) hold the
configuration chosen for each clock, and for each (clock, memory clock) pair on a board with
several memory clocks. :class:`KernelConfigFollower` answers for the operating point the
governor holds now (one dict lookup), counts a generation that grows whenever a change of
the clock or of the memory clock moves a followed kernel into another configuration, and
calls the registered callbacks then, so an app can rebuild its launch only when it must. A
memory clock of None (a governor that does not govern memory) answers for the board's
default memory clock; a table without a memory axis answers the same at every memory clock.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from governor.errors import GovernorError, InvalidRequestError

if TYPE_CHECKING:
    from governor.kernels.operating_points import ConfigTable, KernelConfig

__all__ = ["KernelConfigFollower", "TableLookup", "kernel_ppw_policy"]

log = logging.getLogger(__name__)

Callback = Callable[[str, "KernelConfig"], None]


@dataclass(frozen=True)
class TableLookup:
    """A board's table for one kernel and precision, or why there is none."""

    table: Optional[ConfigTable]
    reason: str  # "" when the table was found


class KernelConfigFollower:
    """Per-board lookups of kernel configuration tables, with a change generation."""

    def __init__(self, board: str) -> None:
        self.board = board
        self._tables: Dict[Tuple[str, str], ConfigTable] = {}
        self._current: Dict[Tuple[str, str], KernelConfig] = {}
        self._callbacks: List[Callback] = []
        self._reasons: Dict[Tuple[float, Optional[float], bool], str] = {}
        self._lock = threading.Lock()
        self.generation = 0

    def table(self, kernel: str, precision: str = "double") -> TableLookup:
        """The stored table (cached after the first read), or the reason there is none.

        Raises:
            InvalidRequestError: ``kernel`` is no library kernel or ``precision`` is neither
                double nor single (one line with the known names).
        """
        key = (kernel, precision)
        if key not in self._tables:
            _check_request(kernel, precision)
            from governor.kernels.operating_points import load_table

            try:
                found = load_table(self.board, kernel, precision)
            except GovernorError as err:
                return TableLookup(None, f"kernel table unreadable: {err}")
            if found is None:
                given = "" if precision == "double" else f" --precision {precision}"
                return TableLookup(
                    None,
                    f"no configuration table for {kernel}/{precision} on {self.board} "
                    f"(run 'governor kernels table {kernel} --board {self.board}{given} --save')",
                )
            self._tables[key] = found
        return TableLookup(self._tables[key], "")

    def config(
        self,
        kernel: str,
        clock_mhz: Optional[float],
        precision: str = "double",
        mem_clock_mhz: Optional[float] = None,
    ) -> Tuple[Optional[KernelConfig], str]:
        """(configuration or None, reason) for ``kernel`` at ``clock_mhz`` and
        ``mem_clock_mhz`` (None: the board's default memory clock); follows it. The
        configuration names its kernel, precision and carveout:
        :func:`governor.kernels.build_launch` turns it into a launch."""
        key = (kernel, precision)
        table = self._tables.get(key)
        if table is None:
            lookup = self.table(kernel, precision)
            if lookup.table is None:
                return None, lookup.reason
            table = lookup.table
        if clock_mhz is None:
            return None, "the governor has not set a clock yet"
        config = table.at(clock_mhz, mem_clock_mhz)
        if key not in self._current:
            with self._lock:
                self._current.setdefault(key, config)
        point = (clock_mhz, mem_clock_mhz, table.has_mem_axis)
        reason = self._reasons.get(point)
        if reason is None:
            reason = self._reasons[point] = _reason(self.board, *point)
        return config, reason

    def on_change(self, callback: Callback) -> None:
        """Call ``callback(kernel, config)`` whenever a followed kernel changes configuration."""
        self._callbacks.append(callback)

    def clock_changed(
        self, clock_mhz: Optional[float], mem_clock_mhz: Optional[float] = None
    ) -> None:
        """Re-answer every followed kernel at ``clock_mhz`` and ``mem_clock_mhz`` (None: the
        default memory clock); bump the generation and call the callbacks for each one whose
        configuration changed."""
        if clock_mhz is None:
            return
        changed: List[Tuple[str, KernelConfig]] = []
        with self._lock:
            for key, old in list(self._current.items()):
                new = self._tables[key].at(clock_mhz, mem_clock_mhz)
                if new != old:
                    self._current[key] = new
                    changed.append((key[0], new))
            if changed:
                self.generation += 1
        for kernel, config in changed:
            for callback in list(self._callbacks):
                try:
                    callback(kernel, config)
                except Exception as err:  # an app's callback must not stop the control loop
                    log.error("kernel configuration callback failed: %s", err)


def kernel_ppw_policy(
    board: str, kernel: str, precision: str = "double"
) -> Tuple[Dict[str, Any], str]:
    """(policy spec, note) for the most work per joule running ``kernel``: a fixed clock at
    the PPW clock of the kernel's tuned configurations where the board's profile has a table
    (``governor kernels table --save``), else the board's ``ppw`` policy."""
    from governor.kernels.operating_points import load_table

    try:
        table = load_table(board, kernel, precision)
    except GovernorError as err:
        return {"policy": "ppw"}, f"kernel table unreadable ({err}): the board's PPW clock"
    clock = None if table is None else table.ppw_clock_mhz()
    if table is None or clock is None:
        return (
            {"policy": "ppw"},
            f"no configuration table for {kernel}/{precision} on {board}: the board's PPW clock",
        )
    config = table.at(clock)
    tile = "x".join(str(v) for v in config.tile.values())
    return (
        {"policy": "clock", "clock_mhz": clock},
        f"PPW clock of {kernel} at its tuned configuration (tile {tile}, "
        f"{config.threads_per_block} threads per block): {clock:g} MHz",
    )


PRECISIONS = ("double", "single")


def _reason(board: str, clock_mhz: float, mem_clock_mhz: Optional[float], axis: bool) -> str:
    """Where an answer came from: the table's board and the operating point."""
    text = f"table for {board} at {clock_mhz:g} MHz"
    if mem_clock_mhz is None:
        return text + (", the default memory clock" if axis else "")
    if axis:
        return f"{text}, memory {mem_clock_mhz:g} MHz"
    return f"{text} (the table has no memory axis: the same at memory {mem_clock_mhz:g} MHz)"


def _check_request(kernel: str, precision: str) -> None:
    """Refuse a kernel the library does not have, or a precision it does not compile."""
    from governor.kernels.templates import KERNELS
    from governor.names import did_you_mean

    if kernel not in KERNELS:
        raise InvalidRequestError(
            f"unknown kernel {kernel!r}{did_you_mean(kernel, KERNELS) or ';'} "
            f"the library's kernels: {', '.join(sorted(KERNELS))}"
        )
    if precision not in PRECISIONS:
        raise InvalidRequestError(
            f"precision must be double or single, not {precision!r} (the library's kernels "
            "compile in those two)"
        )
