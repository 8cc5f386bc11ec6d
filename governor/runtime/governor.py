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

from governor.devices.base import Device, board_power_w, frozen_record
from governor.errors import (
    DeviceLostError,
    GovernorError,
    InvalidRequestError,
    UnsupportedError,
)
from governor.runtime import policies as _policies
from governor.runtime.controller_base import Controller, Now, Observation, Tick
from governor.runtime.exit_hooks import ExitHooks
from governor.runtime.kernel_config import KernelConfigFollower
from governor.runtime.model import ClockModel, model_for_device
from governor.runtime.status import GovernorState, RunTotals, status_doc
from governor.runtime.telemetry import Telemetry
from governor.runtime.tuning_cache import (
    Cached,
    cached_block_size_for,
    cached_tiles_for,
    keep_online_ppw,
    load_online_ppw,
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


class Governor:
    """Applies ``policy`` to ``device`` (see the module docstring).

    Args:
        device: an open :class:`~governor.devices.base.Device` that can lock GPU clocks.
        policy: a :mod:`~governor.runtime.policies` object or a spec dictionary.
        profile: the board profile (a dict or a path); None looks it up for the device; when
            there is none (or it was made on another board; or ``profile=False``) the governor says so
            (``status()["notes"]``) and falls back to a generic model. A malformed profile, or
            one whose clocks lie outside the device's range, is an error, never a fallback.
        interval_s: the control period.
        background: run the loop in a thread (``start()``); False for ``step()``.
        battery: for the battery policy, a callable returning the remaining energy (J), e.g.
            :class:`governor.runtime.battery.SysfsBattery`; None meters the device's power.
        min_dwell_s: least time between two upward clock changes (default: one period).
        fail_limit: consecutive failed readings before the safe hold.

    Raises:
        InvalidRequestError: bad policy or interval; ProfileError: a malformed profile
            (one line naming the file and field); UnsupportedError: the device cannot
            lock its GPU clock (from ``start()``); DeviceBusyError: another governor holds it.
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
        self._unmet.new_policy(self.policy, self.model)
        if self.policy.budget_scope == "board" and battery is None:
            self._note_unmetered_board()
        # run state
        self._owns = False  # whether start() took a layer of the device
        self._ticks: List[Tick] = []
        self._tick_lock = threading.Lock()
        self._dev_lock = threading.RLock()
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._running = False
        self._applied: Optional[float] = None
        self._last_change_s = -math.inf
        self._steps = 0
        self._telemetry = Telemetry(device, self.model, fail_limit)
        self._changes = 0
        self._watch = DeviceWatch(device, self._note)
        self._exit_hooks = ExitHooks(self.stop, handle_signals)
        self._kernel_configs: Optional[KernelConfigFollower] = None  # made on first use

    def _note_unmetered_board(self) -> None:
        """Say so when a board-scope budget can only be metered on the GPU figure."""
        try:
            has_board = board_power_w(self.device.sample()) is not None
        except (GovernorError, OSError):
            has_board = True  # said by the telemetry checks once running
        if not has_board:
            self._note(
                "the device reports no whole-board power: the battery budget is metered "
                "on its GPU figure (scope gpu)"
            )

    # -- profile and model ---------------------------------------------------------------
    def _load_model(self, profile: Union[None, bool, Mapping[str, Any], str, Path]) -> ClockModel:
        """The clock model (see :func:`~governor.runtime.model.model_for_device`); what it
        says goes into the notes."""
        loaded = model_for_device(self.device, profile, self.policy.model_workload)
        self.profile_path = loaded.profile_path
        self.notes.extend(loaded.found_notes)
        for text in loaded.warnings:
            if text == loaded.model.source and not loaded.model.fitted:
                text += f"; calibrate it once with 'governor calibrate --device {self.device.uri}'"
            self._note(text)
        return loaded.model

    def _make_controller(self) -> Controller:
        """The controller of ``self.policy`` on ``self.model``, made by its row of the
        policy table (:func:`~governor.runtime.policies.make_controller`); a PPW clock an
        earlier run found online for this board is held at once instead of being searched
        again."""
        device = self.device
        controller = _policies.make_controller(
            self.policy,
            self.model,
            interval_s=self.interval_s,
            battery=self._battery,
            energy_counter=device.capabilities.energy_counter,
            kept_ppw=lambda workload: load_online_ppw(device, workload),
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
            old_policy, old_model, old_controller = self.policy, self.model, self.controller
            old_saved = self._online_saved
            try:
                self.policy = new
                if new.model_workload != old_policy.model_workload:
                    self.model = self._load_model(self._profile_arg)
                self.controller = self._make_controller()
            except BaseException:
                self.policy, self.model, self.controller = old_policy, old_model, old_controller
                self._online_saved = old_saved
                raise
            with self._tick_lock:
                self._ticks = []  # progress under the old policy says nothing of the new
            self._telemetry.new_policy()  # a budget or a mission counts from here
            self._unmet.new_policy(new, self.model)
            if self._running:
                try:
                    self._set_clock(self.controller.initial_mhz(), urgent=True)
                except GovernorError as err:
                    self._watch.write_failed(f"setting the new policy's first clock failed: {err}")

    def _keep_online_ppw(self, result: Dict[str, Any]) -> None:
        workload = self.policy.model_workload
        self._note(keep_online_ppw(self.device, workload, result))

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
        if self.background and self.device.clock.virtual:
            raise InvalidRequestError(
                f"{self.device.uri} runs on virtual time, where a background loop would never "
                "wake: use background=False and gov.step(), or open the board with ?realtime=1"
            )
        if not self.device.capabilities.lock_gpu_clocks:
            raise UnsupportedError(
                f"{self.device.identity.name} ({self.device.uri}) cannot lock its GPU clock, which the governor needs"
            )
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
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._loop, name=f"governor {self.device.uri}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> Dict[str, Any]:
        """End the loop and restore the device (safe to repeat). Returns what was restored."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        if not self._running:
            return {}
        self._running = False
        try:
            with self._dev_lock:
                with self._tick_lock:
                    ticks, self._ticks = self._ticks, []
                obs = self._observe(ticks)  # close the last interval before restoring
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
            self._watch.applied_range = None
            self._exit_hooks.remove()
        return restored

    def __enter__(self) -> Governor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the loop ------------------------------------------------------------------------
    def _loop(self) -> None:
        clock = self.device.clock
        due = clock.now_s() + self.interval_s
        wait = 0.005 if clock.virtual else self.interval_s
        while not self._stop.is_set():
            now = clock.now_s()
            if now >= due - 1e-9:
                try:
                    self.update()
                except Exception as err:  # the loop must outlive one bad period
                    self._watch.error(f"control step failed: {type(err).__name__}: {err}")
                due = max(due + self.interval_s, now + self.interval_s * 0.5)
                wait_s = 0.005 if clock.virtual else max(0.0, due - clock.now_s())
            else:
                wait_s = wait if clock.virtual else max(0.0, due - now)
            self._stop.wait(wait_s)

    def step(self, advance_s: Optional[float] = None) -> Dict[str, Any]:
        """Deterministic stepping: sleep ``advance_s`` (default one period) on the device
        clock, then control once. Returns :meth:`status`. Not with a background thread."""
        if self._thread is not None:
            raise GovernorError(
                "step() drives the loop itself; create the Governor with background=False"
            )
        if not self._running:
            raise GovernorError("the governor is not started")
        if advance_s is not None and not _finite_at_least(advance_s, 0.0):
            raise InvalidRequestError(
                f"advance_s must be a finite number of seconds >= 0, not {advance_s!r}"
            )
        advance = self.interval_s if advance_s is None else float(advance_s)
        if advance > 0:
            self.device.clock.sleep(advance)
        self.update()
        return self.status()

    def update(self) -> None:
        """One control step at the device clock's present time."""
        if not self._running or self._watch.hands_off:
            return  # a lost device is left alone, and so is one another program took over
        with self._dev_lock:
            with self._tick_lock:
                ticks, self._ticks = self._ticks, []
            obs = self._observe(ticks)
            if self._telemetry.lost is not None:
                self._watch.lose(self._telemetry.lost)
                return
            if self._watch.taken_over():
                return
            if obs is None:
                with self._tick_lock:  # not a period yet: keep them for the next one
                    self._ticks[:0] = ticks
                return
            self._telemetry.tick_read = False
            current = self._applied if self._applied is not None else self.model.top_mhz
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
                self._watch.lose(str(err))
                return
            except GovernorError as err:
                self._watch.write_failed(f"setting {target:g} MHz failed: {err}")
            self._unmet.observe(obs, self.controller)
            result = self.controller.result
            if result is not None and not self._online_saved:
                self._online_saved = True
                self._keep_online_ppw(result)

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
        if self._kernel_configs is not None:
            self._kernel_configs.clock_changed(self._applied)

    @property
    def lost(self) -> Optional[str]:
        """Why the device stopped answering for good (a GPU off the bus); None while it
        answers. The governor then leaves it alone; the app's work goes on."""
        return self._watch.lost

    @property
    def overridden(self) -> Optional[str]:
        """What another program set the clock to while this governor held it (it then steps
        back); None while nobody else writes it."""
        return self._watch.overridden

    # -- the app's side ------------------------------------------------------------------
    def tick(self, units: float = 1.0, busy_s: Optional[float] = None) -> None:
        """Report progress for the throughput policy: ``units`` done (a frame, a step), and
        optionally ``busy_s``, the seconds they took (gives per-frame deadlines)."""
        now = self.device.clock.now_s()
        applied = self._applied if self._applied is not None else self.model.top_mhz
        tick = frozen_record(
            Tick,
            {
                "t_s": now,
                "units": float(units),
                "busy_s": None if busy_s is None else float(busy_s),
                "applied_mhz": applied,
            },
        )
        with self._tick_lock:
            self._ticks.append(tick)
            if len(self._ticks) > 100000:  # nobody is consuming them (not started)
                del self._ticks[:50000]
        if busy_s is not None and self._telemetry.duty is not None and self._running:
            self._telemetry.duty_active = True
            self._telemetry.busy_reading(applied, self._dev_lock)
        if busy_s is not None and self._running and self.controller.eager:
            self.update()  # the first frame measured: leave the start clock now (a guess)

    def admit(self) -> bool:
        """Whether the app should take the next frame (step, request) or skip it, for the
        throughput policy with a battery floor: True while the budget affords the rate;
        when it does not, the share of frames it affords, spread evenly (at 0.6, three in
        five), at the rate's clock. Call it once per frame offered (a camera frame arriving)
        and ``tick()`` only for the frames taken. True for every other policy and when the
        governor is not running. An app that never calls it keeps every frame and the
        governor degrades by clock instead (frames late). ``status()["admitted_rate_hz"]``
        is the rate admitted now."""
        if not self._running:
            return True
        with self._tick_lock:  # apps calling from several threads share one credit
            return bool(self.controller.admit())

    def report(self) -> Dict[str, Any]:
        """Energy, duration, mean power and mean clock measured over the run so far."""
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
        """What the governor is doing now (plain data, JSON-ready): :meth:`state`, the
        controller's records (:meth:`Controller.records`) and :meth:`totals`, in one
        dictionary (:func:`~governor.runtime.status.status_doc`). ``notes``: all it said (a
        missing profile, the device's quirks, what it cannot meet); ``unmet``: those of
        them that say what of the policy the board cannot do (a clock clamped or snapped, a
        cap below its least power, a budget run out; see :mod:`governor.runtime.unmet`)."""
        return status_doc(self.state(), *self.controller.records(), self.totals())

    def tiles(self, kernel: str, precision: str = "double") -> Cached:
        """The tiles chosen offline (``governor tiles --save``) for ``kernel`` on this board."""
        return cached_tiles_for(self.device, kernel, precision)

    def block_size(self, kernel: str, objective: str = "energy") -> Cached:
        """The thread-block size chosen offline (``governor tune-blocks``) for ``kernel``."""
        return cached_block_size_for(self.device, kernel, objective)

    def _follower(self) -> KernelConfigFollower:
        if self._kernel_configs is None:
            from governor.profiles.profile import board_key

            self._kernel_configs = KernelConfigFollower(board_key(self.device))
        return self._kernel_configs

    def kernel_config(self, kernel: str, precision: str = "double") -> Cached:
        """The tile and thread block for ``kernel`` at the clock the governor holds now, from
        the board's table (``governor kernels table --save``); one dict lookup per call."""
        value, reason = self._follower().config(kernel, self._applied, precision)
        return Cached(value, reason)

    @property
    def kernel_config_generation(self) -> int:
        """Grows each time a clock change moves a kernel asked about into another config."""
        return self._follower().generation

    def on_kernel_config_change(self, callback: Callable[[str, Any], None]) -> None:
        """Call ``callback(kernel, config)`` when a policy change crosses a config boundary."""
        self._follower().on_change(callback)


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
