"""Settings, the shared context, step records and the runner of the GPU check.

Every step is a function ``step(ctx, out)``. It records figures (``out.figure``) and checks
against a stated tolerance (``out.check``), raises :class:`Skip` when it cannot run, and may
raise anything else: the runner turns that into a ``fail`` with a one-line reason and goes on
with the next step. Steps that change the GPU do so inside ``ctx.owned(...)``, which takes
the device (its lock and a journal layer) and restores it when the block ends, whatever
happened inside.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]

__all__ = [
    "Context",
    "Control",
    "Interrupts",
    "Settings",
    "Skip",
    "StepOut",
    "StepRecord",
    "Step",
    "make_settings",
    "run_steps",
    "spread",
]


class Interrupts:
    """Ctrl-C and SIGTERM as KeyboardInterrupt, held back while a device setting is written.

    Raised between the driver's write and the journal's note of it, an interrupt would make
    the device forget a change the driver made (the write looks failed, its journal entry is
    dropped) and leave the GPU changed; :meth:`guard` makes each change of a device one step
    that an interrupt waits for.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.pending = False
        self._previous: Dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.depth:
            self.pending = True
            return
        raise KeyboardInterrupt

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handler)

    def uninstall(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending:
                self.pending = False
                raise KeyboardInterrupt

    def guard(self, device: Any) -> None:
        """Hold interrupts back during each change ``device`` makes (journal, write, note)."""
        change = device._change

        def guarded(*args: Any, **kwargs: Any) -> Any:
            with self.held():
                return change(*args, **kwargs)

        device._change = guarded


class Skip(Exception):
    """Raised by a step that cannot run here; the message is the reason."""


@dataclass(frozen=True)
class Settings:
    """Windows (s of device time), counts and budgets (s of wall time) of one run."""

    quick: bool
    scale: float
    total_budget_s: float
    idle_s: float
    load_s: float
    load_rate_s: float
    lock_hold_s: float
    window_s: float
    settle_min_s: float
    settle_max_s: float
    calib_idle_s: float
    max_probes: int
    brute_clocks: int
    energy_windows_s: Tuple[float, ...]
    tune_clocks: int
    tune_run_s: float
    poll_s: float
    budgets_s: Dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "quick": self.quick,
            "time_scale": self.scale,
            "total_budget_s": self.total_budget_s,
            "max_probes": self.max_probes,
            "brute_force_clocks": self.brute_clocks,
            "window_s": self.window_s,
            "budgets_s": dict(self.budgets_s),
        }


def make_settings(
    quick: bool = False, scale: float = 1.0, budget_s: Optional[float] = None
) -> Settings:
    """The full run (about 5 minutes on one GPU, 7.5 at most) or ``quick`` (3.3 at most);
    ``scale`` multiplies every window and budget (a rehearsal on the stand-in uses 0.2);
    ``budget_s`` sets the run's total instead, each step's budget in proportion."""
    for what, value in (("time scale", scale), ("budget", budget_s)):
        if value is None and what == "budget":
            continue
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"the {what} must be a positive number, not {value!r}")
    q = 0.6 if quick else 1.0
    s = float(scale)
    total_s = (200.0 if quick else 450.0) * s
    stretch = 1.0 if budget_s is None else float(budget_s) / total_s
    budgets = {
        "discovery": 30,
        "telemetry": 45,
        "loads": 30,
        "control": 60,
        "calibration": 240,
        "energy-windows": 30,
        "kernels": 45,
        "tune-blocks": 60,
        "exporter": 20,
    }
    if quick:
        budgets.update(calibration=110, **{"tune-blocks": 30, "kernels": 20})
    return Settings(
        quick=quick,
        scale=s,
        total_budget_s=total_s * stretch,
        idle_s=4.0 * q * s,
        load_s=8.0 * q * s,
        load_rate_s=4.0 * q * s,
        lock_hold_s=2.5 * q * s,
        window_s=(1.0 if quick else 1.5) * s,
        settle_min_s=(0.8 if quick else 1.0) * s,
        settle_max_s=(3.0 if quick else 4.0) * s,
        calib_idle_s=(1.0 if quick else 2.0) * s,
        max_probes=5 if quick else 6,
        brute_clocks=8 if quick else 10,
        energy_windows_s=tuple(w * s for w in ((0.25, 1.0, 2.0) if quick else (0.25, 1.0, 3.0))),
        tune_clocks=6 if quick else 8,
        tune_run_s=(0.25 if quick else 0.4) * s,
        poll_s=0.01,
        budgets_s={k: v * s * stretch for k, v in budgets.items()},
    )


def spread(table: Sequence[float], n: int) -> List[float]:
    """``n`` clocks spread evenly over ``table`` (ascending), both ends included."""
    table = sorted(table)
    if n >= len(table):
        return list(table)
    if n <= 1:
        return [table[-1]]
    picks = {table[round(i * (len(table) - 1) / (n - 1))] for i in range(n)}
    return sorted(picks)


@dataclass
class Control:
    """Whether this process may change the GPU, found by trying once (``reason`` if not)."""

    permitted: bool
    reason: Optional[str] = None


@dataclass
class StepRecord:
    name: str
    status: str  # pass | fail | skip
    reason: str
    figures: Dict[str, Any]
    checks: List[Dict[str, Any]]
    read_only: bool
    duration_s: float
    summary: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "figures": self.figures,
            "checks": self.checks,
            "read_only": self.read_only,
            "duration_s": round(self.duration_s, 3),
            "summary": self.summary,
        }


class StepOut:
    """What a step found: figures, checks (value against a tolerance), notes, a summary."""

    def __init__(self) -> None:
        self.figures: Dict[str, Any] = {}
        self.checks: List[Dict[str, Any]] = []
        self.notes: List[str] = []
        self.summary = ""

    def figure(self, name: str, value: Any) -> Any:
        self.figures[name] = value
        return value

    def check(self, name: str, ok: bool, value: Any, tolerance: str) -> bool:
        """Record ``name``: ``value`` measured, ``tolerance`` stated, ``ok`` the verdict."""
        self.checks.append({"name": name, "value": value, "tolerance": tolerance, "ok": bool(ok)})
        return bool(ok)

    def note(self, text: str) -> None:
        self.notes.append(text)


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Context, StepOut], None]
    read_only: bool  # True: the step only reads the GPU; False: it changes settings


class Context:
    """What the steps share: the device, the settings, the deadlines, the loads, control."""

    def __init__(
        self,
        device: Any,
        settings: Settings,
        *,
        control: Control,
        make_load: Optional[Callable[[Any, str], Any]] = None,
        env: Optional[Dict[str, str]] = None,
        progress: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.device = device
        self.settings = settings
        self.control = control
        self.progress = progress
        self.env = dict(os.environ if env is None else env)
        self._make_load = make_load
        self._loads: Dict[str, Any] = {}
        self._load_errors: Dict[str, str] = {}
        self._broken: set = set()  # loads that were made but failed to run
        self.start_wall = time.monotonic()
        self.deadline = self.start_wall + settings.total_budget_s
        self.step_deadline = self.deadline
        #: results later steps use (the calibrated clock for tune-blocks...)
        self.shared: Dict[str, Any] = {}
        self.journal_before: bool = False

    # -- time -----------------------------------------------------------------------------
    def left_s(self) -> float:
        """Wall time left to the current step (its own budget, within the whole run's)."""
        return min(self.deadline, self.step_deadline) - time.monotonic()

    def out_of_time(self, need_s: float = 0.0) -> bool:
        return self.left_s() < need_s

    def sleep(self, seconds: float) -> None:
        """Sleep on the device's clock (virtual on simulated boards)."""
        self.device.clock.sleep(seconds)

    def now_s(self) -> float:
        return self.device.clock.now_s()

    # -- loads ------------------------------------------------------------------------------
    def load(self, kind: str) -> Any:
        """The built-in load ``builtin`` (compute) or ``memory``, made once and reused.

        Raises:
            Skip: no such load here (CuPy missing, no CUDA device), with the reason.
        """
        if kind in self._loads:
            return self._loads[kind]
        if kind in self._load_errors:
            raise Skip(self._load_errors[kind])
        try:
            if self._make_load is not None:
                made = self._make_load(self.device, kind)
            else:
                from governor.calibrate.loads import make_load

                made = make_load(self.device, kind)
        except Exception as err:  # UnsupportedError (no CuPy), a CUDA error
            reason = one_line(err)
            if "CuPy" in reason and "pip install" in reason:
                reason = "CuPy is not installed (pip install cupy-cuda12x or cupy-cuda13x)"
            self._load_errors[kind] = f"no {_load_label(kind)} load: {reason}"
            raise Skip(self._load_errors[kind]) from None
        try:
            self._warm(made)
        except Exception as err:  # the kernel does not compile or launch
            self._load_errors[kind] = f"the {_load_label(kind)} load fails: {one_line(err)}"
            self._broken.add(kind)
            raise Skip(self._load_errors[kind]) from None
        self._loads[kind] = made
        return made

    def _warm(self, load: Any, timeout_s: float = 60.0) -> None:
        """Run a new load until it has done two units, so that compiling its kernel (CuPy
        compiles on the first launch) and allocating happen before anything is measured."""
        load.start()
        try:
            end = time.monotonic() + timeout_s
            while load.work_done() < 2:
                if time.monotonic() > end:
                    raise RuntimeError(f"{load.name} did no work in {timeout_s:g} s")
                self.sleep(0.05)
        finally:
            load.stop()

    def has_load(self, kind: str) -> bool:
        try:
            self.load(kind)
        except Skip:
            return False
        return True

    def load_broken(self, kind: str) -> bool:
        """Whether the load ``kind`` exists here but failed to run (a fault, not an absence)."""
        return kind in self._broken

    def load_error(self, kind: str) -> str:
        return self._load_errors.get(kind, "")

    def stop_loads(self) -> None:
        for load in self._loads.values():
            with contextlib.suppress(Exception):
                load.stop()

    @contextlib.contextmanager
    def running(self, kind: str) -> Iterator[Any]:
        """The load ``kind`` running for the block's duration."""
        load = self.load(kind)
        load.start()
        try:
            yield load
        finally:
            load.stop()

    # -- changing the device ------------------------------------------------------------------
    def require_control(self) -> None:
        if not self.control.permitted:
            raise Skip("read-only: control is refused here (the report's 'control' says why)")

    @contextlib.contextmanager
    def owned(self, step: str) -> Iterator[Any]:
        """The device taken for ``step`` (lock and journal layer), restored when the block
        ends (normally, by an error, or by Ctrl-C)."""
        dev = self.device
        dev.acquire(f"gpu_check {step}")
        try:
            yield dev
        finally:
            dev.release()

    # -- subprocesses --------------------------------------------------------------------------
    def governor_argv(self, *args: str) -> List[str]:
        """``governor ARGS`` run by this Python from this checkout."""
        return [sys.executable, "-m", "governor", *args]

    def subprocess_env(self) -> Dict[str, str]:
        env = dict(self.env)
        paths = [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        return env


def _load_label(kind: str) -> str:
    return "compute" if kind == "builtin" else kind


def one_line(err: BaseException) -> str:
    """An exception as one line: governor's own errors by their message (they are written to
    be read), anything else as ``Class: message``."""
    from governor.errors import GovernorError

    text = " ".join(str(err).split())
    name = type(err).__name__
    if isinstance(err, (GovernorError, Skip)):
        return text or name
    return f"{name}: {text}" if text else name


def run_steps(
    ctx: Context,
    steps: Sequence[Step],
    *,
    only: Optional[Sequence[str]] = None,
    records: Optional[List[StepRecord]] = None,
) -> Tuple[List[StepRecord], bool]:
    """Run ``steps`` in order; each one ends as pass, fail or skip, never aborting the rest.
    Returns the records and whether the run was interrupted.

    Ctrl-C (or SIGTERM, turned into KeyboardInterrupt by the caller) fails the running step
    (whose own ``finally`` blocks have restored the device) and skips the rest. Records are
    appended to ``records`` as they come, so a caller interrupted between steps keeps them.
    """
    records = [] if records is None else records
    interrupted: Optional[BaseException] = None
    total = len(steps)
    for i, step in enumerate(steps, 1):
        tag = f"[{i}/{total}] {step.name}"
        if interrupted is not None or (only and step.name not in only):
            reason = "interrupted" if interrupted is not None else "not selected (--only)"
            records.append(StepRecord(step.name, "skip", reason, {}, [], step.read_only, 0.0))
            ctx.progress(f"{tag:<22} skip   {reason}")
            continue
        budget = ctx.settings.budgets_s.get(step.name, 60.0)
        out = StepOut()
        t0 = time.monotonic()
        ctx.step_deadline = t0 + budget
        if ctx.deadline - t0 < min(5.0 * ctx.settings.scale, budget):
            records.append(
                StepRecord(
                    step.name, "skip", "the run's time budget is spent", {}, [], step.read_only, 0.0
                )
            )
            ctx.progress(f"{tag:<22} skip   the run's time budget is spent")
            continue
        ctx.progress(f"{tag:<22} ...    (budget {budget:.0f} s)")
        status, reason = "pass", ""
        try:
            step.run(ctx, out)
        except Skip as err:
            status, reason = "skip", str(err)
        except KeyboardInterrupt as err:
            status, reason = "fail", "interrupted (Ctrl-C or SIGTERM)"
            interrupted = err
        except Exception as err:
            status, reason = "fail", one_line(err)
        finally:
            ctx.stop_loads()
        failed = [c["name"] for c in out.checks if not c["ok"]]
        if status == "pass" and failed:
            status = "fail"
            reason = "outside tolerance: " + ", ".join(failed)
        extra = [n for n in out.notes if n not in reason]
        if extra:
            reason = "; ".join(([reason] if reason else []) + extra)
        duration = time.monotonic() - t0
        if duration > budget * 1.05:
            out.figures["over_budget_s"] = round(duration - budget, 1)
        records.append(
            StepRecord(
                step.name,
                status,
                reason,
                _jsonable(out.figures),
                _jsonable(out.checks),
                step.read_only,
                duration,
                out.summary,
            )
        )
        line = f"{tag:<22} {status:<6} ({duration:.1f} s)"
        if out.summary:
            line += f"  {out.summary}"
        if status != "pass" and reason:
            line += f"  [{reason}]"
        ctx.progress(line)
    return records, interrupted is not None


def _jsonable(value: Any) -> Any:
    """Plain JSON: dataclasses by ``to_dict``, tuples and sets as lists, numpy scalars as
    numbers, non-finite floats as None."""
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return _jsonable(value.item())
    return value


def rel(value: Optional[float], reference: Optional[float]) -> Optional[float]:
    """``value / reference``, or None when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def rounded(value: Optional[float], digits: int = 4) -> Optional[float]:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")
