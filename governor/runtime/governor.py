"""The :class:`Governor`: a policy applied to one device by a control loop.

Lifecycle: ``start()`` takes the device (its lock, and a journal layer on disk for real
hardware, so ``governor reset`` or the next owner can undo a ``kill -9``), applies the first
clock and starts the loop; ``stop()`` ends the loop, restores what this governor changed (an
earlier ``governor apply``'s settings come back) and lets the device go. As a context manager
it restores on normal exit and on exceptions; Ctrl-C raises KeyboardInterrupt and SIGTERM is
turned into SystemExit while it runs (when it was left at the default), so both unwind
through ``stop()``; an ``atexit`` hook catches a forgotten ``stop()``.

Two ways to run the loop: a background thread waking every ``interval_s`` on the device
clock (``background=True``, the default), or deterministic stepping (``background=False``,
then ``gov.step()`` advances the device clock one period and controls once) for simulated
boards, tests and ``governor simulate``: ten simulated minutes in well under a second.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from governor.devices.base import Device, frozen_record
from governor.errors import (
    DeviceLostError,
    DeviceNotRespondingError,
    GovernorError,
    InvalidRequestError,
    UnsupportedError,
)
from governor.runtime import policies as _policies
from governor.runtime.board_answers import BoardAnswers
from governor.runtime.controller_base import Controller, Now, Observation, Tick
from governor.runtime.exit_hooks import ExitHooks
from governor.runtime.loop import BackgroundLoop
from governor.runtime.mem_knobs import knob_for
from governor.runtime.model import ClockModel
from governor.runtime.setup import (
    ProfileArg,
    governed_controller,
    loaded_model,
    request_context,
    unmetered_board_note,
)
from governor.runtime.status import GovernorState, RunTotals, status_doc
from governor.runtime.telemetry import Telemetry
from governor.runtime.ticks import TickQueue
from governor.runtime.tuning_cache import (
    Cached,
    keep_online_ppw,
)
from governor.runtime.unmet import UnmetWatch
from governor.runtime.watch import DeviceWatch

__all__ = ["Cached", "Governor"]

log = logging.getLogger("governor.runtime")

PolicyLike = Union[_policies.Policy, Mapping[str, Any]]


def _command_line() -> str:
    return (
        "governor ("
        + " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:])[:180]
        + ")"
    )


class Governor(BoardAnswers):
    """Applies ``policy`` to ``device`` (see the module docstring).

    Args:
        device: an open :class:`~governor.devices.base.Device` that can lock GPU clocks.
        policy: a :mod:`~governor.runtime.policies` object or a spec dictionary.
        profile: the board profile (a dict or a path); None looks it up. Without one (or with
            another board's, or ``profile=False``) it says so in ``status()["notes"]`` and uses
            a generic model; a malformed profile, or clocks outside the range, is an error.
        interval_s: the control period.
        background: run the loop in a thread (``start()``); False for ``step()``.
        battery: for the battery policy, a callable returning the remaining energy (J), e.g.
            :class:`governor.runtime.battery.SysfsBattery`; None meters the device's power.
        min_dwell_s: least time between two upward clock changes (default: one period).
        fail_limit: consecutive failed readings before the safe hold.

    Raises:
        InvalidRequestError: bad policy or interval; ProfileError: a malformed profile (its
            file and field); UnsupportedError: no GPU clock lock (``start()``); DeviceBusyError.
    """

    def __init__(
        self,
        device: Device,
        policy: PolicyLike,
        profile: Union[None, bool, Mapping[str, Any], str, Path] = None,
        interval_s: float = 0.1,
        *,
        background: bool = True,
        battery: Optional[Callable[[], float]] = None,
        min_dwell_s: Optional[float] = None,
        fail_limit: int = 3,
        handle_signals: bool = True,
    ) -> None:
        interval, self.min_dwell_s = _loop_timing(interval_s, min_dwell_s, fail_limit)
        self.device = device
        self.policy = _policies.from_spec(policy)
        self.interval_s = interval
        self.background = bool(background)
        self.fail_limit = fail_limit
        self.handle_signals = handle_signals
        self.notes: List[str] = []
        self.profile_path: Optional[str] = None
        self.model = self._load_model(profile)
        self._profile_arg = profile
        self._battery = battery
        self._online_saved = False
        self._unmet = UnmetWatch(device.uri, self._note)
        self.controller = self._make_controller()
        self._mem = knob_for(device, self.policy.name, self.model)  # None: core alone
        self._unmet.new_policy(self.policy, self.model, *request_context(device, self.policy))
        if self.policy.budget_scope == "board" and battery is None:
            for text in filter(None, [unmetered_board_note(device)]):
                self._note(text)
        # run state
        self._owns = False  # whether start() took a layer of the device
        self._ticks = TickQueue()
        self._dev_lock = threading.RLock()
        self._running = False
        self._applied: Optional[float] = None
        self._last_change_s = -math.inf
        self._steps = 0
        self._telemetry = Telemetry(device, self.model, fail_limit)
        self._changes = 0
        self._watch = DeviceWatch(device, self._note)
        self._loop = BackgroundLoop(device, interval, self.update, self._watch.error)
        self._exit_hooks = ExitHooks(self.stop, handle_signals)

    def _load_model(self, profile: ProfileArg) -> ClockModel:
        """The clock model (:func:`.setup.loaded_model`); what it says goes into the notes."""
        model, self.profile_path, found, warnings = loaded_model(self.device, profile, self.policy)
        self.notes.extend(found)
        for text in warnings:
            self._note(text)
        return model

    def _make_controller(self) -> Controller:
        """The policy's controller (:func:`.setup.governed_controller`); its notes too."""
        controller = governed_controller(
            self.policy, self.model, self.device, self.interval_s, self._battery
        )
        self._online_saved = controller.result_kept
        for text in controller.notes:
            self._note(text)
        return controller

    def set_policy(self, policy: PolicyLike) -> None:
        """Govern with ``policy`` from the next control step on, without restarting: the
        device stays taken (no restore in between), the run's energy meter goes on, and the
        new policy's first clock is applied at once when running. Thread-safe (the swap
        happens between two control steps).

        Raises:
            InvalidRequestError: a bad policy (the running one is kept).
        """
        new = _policies.from_spec(policy)
        with self._dev_lock:
            old = self.policy, self.model, self.controller, self._online_saved
            try:
                self.policy = new
                if new.model_workload != old[0].model_workload:
                    self.model = self._load_model(self._profile_arg)
                self.controller = self._make_controller()
                self._switch_mem_knob(new.name, self.model)
            except BaseException:
                self.policy, self.model, self.controller, self._online_saved = old
                raise
            self._ticks.clear()  # progress under the old policy says nothing of the new
            self._telemetry.new_policy()  # a budget or a mission counts from here
            self._unmet.new_policy(new, self.model, *request_context(self.device, new))
            if self._running:
                try:
                    self._set_clock(self.controller.initial_mhz(), urgent=True)
                except GovernorError as err:
                    self._watch.write_failed(f"setting the new policy's first clock failed: {err}")

    def _note(self, text: str) -> None:
        self.notes.append(text)
        log.warning("%s: %s", self.device.uri, text)

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._running

    @property
    def applied_clock_mhz(self) -> Optional[float]:
        """The GPU clock the governor holds now (MHz), None before start."""
        return self._applied

    def start(self) -> Governor:
        """Lock the device, journal it to disk, apply the first clock, start the loop."""
        if self._running:
            return self
        _check_can_start(self.device, self.background)
        self.device.acquire(command=_command_line())
        self._owns = True
        for note in self.device.ownership_notes + self.device.control_notes():
            self._note(note)
        try:
            with self._dev_lock:
                self._telemetry.start(self.device.clock.now_s())
                self._set_clock(self.controller.initial_mhz(), urgent=True)
        except BaseException:
            self._restore_and_release()
            raise
        self._running = True
        self._exit_hooks.install()
        if self.background:
            self._loop.start()
        return self

    def stop(self) -> Dict[str, Any]:
        """End the loop and restore the device (safe to repeat). Returns what was restored."""
        self._loop.stop()
        if not self._running:
            return {}
        self._running = False
        try:
            with self._dev_lock:
                obs = self._observe(self._ticks.take())  # close the last interval before restoring
                if obs is not None:
                    self.controller.close(obs)
                self._unmet.observe(obs, self.controller)
        except Exception as err:  # metering must never block the restore
            log.debug("final reading failed: %s", err)
        if self._telemetry.lost is not None and self._watch.lost is None:
            self._watch.lose(self._telemetry.lost)  # lost after the last control step
        return self._restore_and_release()

    def _restore_and_release(self) -> Dict[str, Any]:
        restored: Dict[str, Any] = {}
        try:
            if self._owns:
                self._owns = False
                with self._dev_lock:
                    restored = self.device.release()  # this governor's layer only
        finally:
            self._applied = None
            self._forget_mem_clock()
            self._watch.applied_range = None
            self._exit_hooks.remove()
        return restored

    def __enter__(self) -> Governor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the loop ------------------------------------------------------------------------
    def step(self, advance_s: Optional[float] = None) -> Dict[str, Any]:
        """Deterministic stepping: sleep ``advance_s`` (default one period) on the device
        clock, then control once. Returns :meth:`status`. Not with a background thread."""
        if self._loop.running:
            raise GovernorError(
                "step() drives the loop itself; create the Governor with background=False"
            )
        if not self._running:
            raise GovernorError("the governor is not started")
        advance = _advance_s(advance_s, self.interval_s)
        if advance > 0:
            self.device.clock.sleep(advance)
        self.update()
        return self.status()

    def update(self) -> None:
        """One control step at the device clock's present time."""
        if self._running and self._watch.answers_again():  # a wedged driver came back
            self._telemetry.lost, self._applied = None, None  # its clock is set again below
        if not self._running or self._watch.hands_off:
            return  # a lost device is left alone, and so is one another program took over
        with self._dev_lock:
            ticks = self._ticks.take()
            obs = self._observe(ticks)
            if self._telemetry.lost is not None:
                self._watch.lose(self._telemetry.lost, self._telemetry.lost_wedged)
                return
            if self._watch.taken_over():
                return
            if obs is None:
                self._ticks.put_back(ticks)  # not a period yet: keep them for the next one
                return
            self._telemetry.tick_read = False
            current = self._applied if self._applied is not None else self.model.top_mhz
            obs = self._mem.adjust(obs, self.controller) if self._mem else obs  # mem_knob.py
            self.controller.observe(obs, ticks)
            if self._telemetry.safe_hold:  # learn (the budget's accounting), choose nothing
                target, urgent = self.controller.safe_mhz(current), True
            else:
                decision = self.controller.choose(Now(obs, tuple(ticks), current))
                target, urgent = decision.clock_mhz, decision.urgent
            self._steps += 1
            try:
                self._set_clock(target, urgent=urgent)
            except DeviceLostError as err:
                self._watch.lose(str(err), isinstance(err, DeviceNotRespondingError))
                return
            except GovernorError as err:
                self._watch.write_failed(f"setting {target:g} MHz failed: {err}")
            if self._mem:  # the memory clock beside the core clock (refused: core alone)
                self._mem_clock_set(self._mem.step(self.controller, obs, self._note))
            self._unmet.observe(obs, self.controller)
            result = self.controller.result
            if result is not None and not self._online_saved:
                self._online_saved = True
                self._note(keep_online_ppw(self.device, self.policy.model_workload, result))

    def _observe(self, ticks: List[Tick]) -> Optional[Observation]:
        applied = self._applied if self._applied is not None else self.model.top_mhz
        return self._telemetry.observe(ticks, applied, self._steps)

    def _set_clock(self, clock_mhz: float, *, urgent: bool) -> None:
        if clock_mhz == self._applied:
            return
        now = self.device.clock.now_s()
        raising = self._applied is not None and clock_mhz > self._applied
        if raising and not urgent and now - self._last_change_s < self.min_dwell_s - 1e-9:
            return  # rate limit: upward moves wait; downward ones never do
        lo, hi = self.device.lock_gpu_clocks(clock_mhz)
        self._watch.wrote(lo, hi)
        self._applied = lo
        self._last_change_s = now
        self._changes += 1
        self._telemetry.changes_since_reading = True
        self._clock_moved(lo)

    @property
    def lost(self) -> Optional[str]:
        """Why the device stopped answering (off the bus, or wedged until it answers again)."""
        return self._watch.lost

    @property
    def overridden(self) -> Optional[str]:
        """What another program set the clock to while held (the governor steps back)."""
        return self._watch.overridden

    # -- the app's side ------------------------------------------------------------------
    def tick(self, units: float = 1.0, busy_s: Optional[float] = None) -> None:
        """Report progress for the throughput policy: ``units`` done (a frame, a step), and
        optionally ``busy_s``, the seconds they took (gives per-frame deadlines)."""
        now = self.device.clock.now_s()
        applied = self._applied if self._applied is not None else self.model.top_mhz
        self._ticks.add(self._mem_frame(tick_record(now, units, busy_s, applied)))
        if busy_s is not None and self._telemetry.duty is not None and self._running:
            self._telemetry.duty_active = True
            self._telemetry.busy_reading(applied, self._dev_lock)
        if busy_s is not None and self._running and self.controller.eager:
            self.update()  # the first frame measured: leave the start clock now (a guess)

    def admit(self) -> bool:
        """Whether the app should take the next frame (step, request) or skip it, for the
        throughput policy with a battery floor: True while the budget affords the rate, else
        the share of frames it affords, spread evenly (at 0.6, three in five), at the rate's
        clock. Call it once per frame offered and ``tick()`` only for the frames taken. True
        for every other policy and when not running. An app that never calls it keeps every
        frame and the governor degrades by clock instead (frames late)
        (``status()["admitted_rate_hz"]``: the rate admitted now)."""
        if not self._running:
            return True
        with self._ticks.lock:  # apps calling from several threads share one credit
            return bool(self.controller.admit())

    def report(self) -> Dict[str, Any]:
        """The run so far: the meter's figures (:meth:`.RunMeter.to_dict`: energy, time,
        clocks), ``policy``, ``device_lost``, ``transient_retries``/``_failures``."""
        doc = self._telemetry.meter.to_dict()
        doc["policy"] = self.policy.name
        doc["device_lost"] = self._watch.lost
        doc.update(self.device.fault_counts())
        return doc

    def state(self) -> GovernorState:
        """What the governor is doing now, typed (the first part of :meth:`status`)."""
        telemetry = self._telemetry
        return GovernorState(
            device=self.device.uri,
            policy=self.policy.name,
            policy_spec=self.policy.to_spec(),
            running=self._running,
            clock_mhz=self._applied,
            measured_clock_mhz=telemetry.clock_measured,
            power_w=telemetry.power_last,
            safe_hold=telemetry.safe_hold,
            safe_hold_reason=telemetry.safe_reason,
            device_lost=self._watch.lost,
            overridden_by_other=self._watch.overridden,
            telemetry_failures=telemetry.failures_total,
            steps=self._steps,
            clock_changes=self._changes,
            interval_s=self.interval_s,
            model=self.model.to_dict(),
            profile_path=self.profile_path,
            notes=list(self.notes),
            unmet=list(self._unmet.unmet),
            errors=list(self._watch.errors),
        )

    def totals(self) -> RunTotals:
        """The run's time and energy (on the device's power figure) so far."""
        meter = self._telemetry.meter
        return RunTotals(duration_s=meter.duration_s, energy_j=meter.energy_j)

    def status(self) -> Dict[str, Any]:
        """What the governor is doing now (JSON-ready): :meth:`state`, the controller's
        records and :meth:`totals` in one dictionary (:func:`.status.status_doc`).
        ``notes``: all it said; ``unmet``: those that say what of the policy the board
        cannot do (a clock clamped, a cap below its least power: :mod:`.unmet`)."""
        return status_doc(self.state(), *self.controller.records(), self.totals())


def _check_can_start(device: Device, background: bool) -> None:
    """Raises InvalidRequestError: a background loop on virtual time (it would never wake);
    UnsupportedError: a device that cannot lock its GPU clock."""
    if background and device.clock.virtual:
        raise InvalidRequestError(
            f"{device.uri} runs on virtual time, where a background loop would never "
            "wake: use background=False and gov.step(), or open the board with ?realtime=1"
        )
    if not device.capabilities.lock_gpu_clocks:
        raise UnsupportedError(
            f"{device.identity.name} ({device.uri}) cannot lock its GPU clock, which the governor needs"
        )


def tick_record(now_s: float, units: float, busy_s: Optional[float], applied_mhz: float) -> Tick:
    """The :class:`Tick` of ``gov.tick(units, busy_s)`` at ``now_s``, the clock held then
    being ``applied_mhz``."""
    return frozen_record(
        Tick,
        {
            "t_s": now_s,
            "units": float(units),
            "busy_s": None if busy_s is None else float(busy_s),
            "applied_mhz": applied_mhz,
            "mem_slowed": False,
        },
    )


def _advance_s(advance_s: Any, interval_s: float) -> float:
    """The time a ``step(advance_s)`` sleeps: ``advance_s``, one period when None.

    Raises:
        InvalidRequestError: not a finite number of seconds >= 0.
    """
    if advance_s is None:
        return interval_s
    if not _finite_at_least(advance_s, 0.0):
        raise InvalidRequestError(
            f"advance_s must be a finite number of seconds >= 0, not {advance_s!r}"
        )
    return float(advance_s)


def _loop_timing(interval_s: Any, min_dwell_s: Any, fail_limit: Any) -> Tuple[float, float]:
    """(control period, least time between upward changes) in s, checked with
    ``fail_limit``.

    Raises:
        InvalidRequestError: any of them out of range (one line).
    """
    try:
        interval = float(interval_s)
    except (TypeError, ValueError):
        raise InvalidRequestError(
            f"interval_s must be a number of seconds, not {interval_s!r}"
        ) from None
    if not (0.001 <= interval <= 60.0) or math.isnan(interval):
        raise InvalidRequestError(f"interval_s must be within 0.001..60 s, not {interval_s!r}")
    if min_dwell_s is not None and not _finite_at_least(min_dwell_s, 0.0):
        raise InvalidRequestError(
            f"min_dwell_s must be a finite number of seconds >= 0, not {min_dwell_s!r}"
        )
    if isinstance(fail_limit, bool) or not isinstance(fail_limit, int) or fail_limit < 1:
        raise InvalidRequestError(f"fail_limit must be a whole number >= 1, not {fail_limit!r}")
    return interval, (interval if min_dwell_s is None else float(min_dwell_s))


def _finite_at_least(value: Any, low: float) -> bool:
    """Whether ``value`` is a real number (not a bool), finite and >= ``low``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool) and math.isfinite(number) and number >= low


def run_steps(gov: Governor, duration_s: float) -> Tuple[int, Dict[str, Any]]:
    """Step ``gov`` for ``duration_s`` of device time. Returns (steps, status)."""
    if not _finite_at_least(duration_s, 0.0):
        raise InvalidRequestError(
            f"duration_s must be a finite number of seconds >= 0, not {duration_s!r}"
        )
    steps = int(round(duration_s / gov.interval_s))
    for _ in range(steps):
        gov.step()
    return steps, gov.status()
