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

import atexit
import logging
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from governor.devices.base import Device, board_power_w, frozen_record
from governor.errors import GovernorError, InvalidRequestError, UnsupportedError
from governor.runtime import policies as _policies
from governor.runtime.controllers import (
    Observation,
    OnlinePpwController,
    StaticController,
    Tick,
    make_controller,
)
from governor.runtime.metering import DutyMeter
from governor.runtime.model import ClockModel, fallback_model, model_from_profile

__all__ = ["Cached", "Governor"]

log = logging.getLogger("governor.runtime")

PolicyLike = Union[_policies.Policy, Mapping[str, Any]]


def _command_line() -> str:
    return (
        "governor ("
        + " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:])[:180]
        + ")"
    )


class Cached:
    """A cached tuning choice: ``value`` (None when there is none) and ``reason``.

    Unpacks as ``value, reason = gov.tiles("gemm")`` and is truthy when there is a value.
    """

    __slots__ = ("reason", "value")

    def __init__(self, value: Any, reason: str) -> None:
        self.value = value
        self.reason = reason

    def __iter__(self) -> Iterator[Any]:
        return iter((self.value, self.reason))

    def __bool__(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"Cached({self.value!r}, {self.reason!r})"


class _Meter:
    """Energy, time and clock integrated over the governed run."""

    def __init__(self) -> None:
        self.energy_j = 0.0
        self.duration_s = 0.0
        self.clock_s = 0.0  # ∫ clock dt (MHz·s)
        self.estimated_s = 0.0  # time whose power was not measured
        self.max_power_w: Optional[float] = None
        self.board_energy_j: Optional[float] = None  # where the device reports board power
        self.board_last_w: Optional[float] = None

    def add(
        self, dt: float, power_w: Optional[float], last_w: Optional[float], clock_mhz: float
    ) -> None:
        if dt <= 0:
            return
        self.duration_s += dt
        self.clock_s += clock_mhz * dt
        if power_w is None:
            self.estimated_s += dt
            power_w = last_w or 0.0
        else:
            self.max_power_w = (
                power_w if self.max_power_w is None else max(self.max_power_w, power_w)
            )
        self.energy_j += power_w * dt

    def add_board(self, dt: float, board_w: Optional[float]) -> None:
        if dt <= 0:
            return
        if board_w is None:
            board_w = self.board_last_w
            if board_w is None:
                return
        else:
            self.board_last_w = board_w
        self.board_energy_j = (self.board_energy_j or 0.0) + board_w * dt

    def to_dict(self) -> Dict[str, Any]:
        d = self.duration_s
        return {
            "duration_s": d,
            "energy_j": self.energy_j,
            "mean_power_w": self.energy_j / d if d > 0 else None,
            "mean_clock_mhz": self.clock_s / d if d > 0 else None,
            "max_power_w": self.max_power_w,
            "unmeasured_s": self.estimated_s,
            "board_energy_j": self.board_energy_j,
        }


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
        try:
            interval = float(interval_s)
        except (TypeError, ValueError):
            raise InvalidRequestError(
                f"interval_s must be a number of seconds, not {interval_s!r}"
            ) from None
        if not (0.001 <= interval <= 60.0) or math.isnan(interval):
            raise InvalidRequestError(f"interval_s must be within 0.001..60 s, not {interval_s!r}")
        self.device = device
        self.policy = _policies.from_spec(policy)
        self.interval_s = interval
        self.background = bool(background)
        if min_dwell_s is not None and not _finite_at_least(min_dwell_s, 0.0):
            raise InvalidRequestError(
                f"min_dwell_s must be a finite number of seconds >= 0, not {min_dwell_s!r}"
            )
        if isinstance(fail_limit, bool) or not isinstance(fail_limit, int) or fail_limit < 1:
            raise InvalidRequestError(f"fail_limit must be a whole number >= 1, not {fail_limit!r}")
        self.min_dwell_s = interval if min_dwell_s is None else float(min_dwell_s)
        self.fail_limit = fail_limit
        self.handle_signals = handle_signals
        self.notes: List[str] = []
        self.profile_path: Optional[str] = None
        self.model = self._load_model(profile)
        self._profile_arg = profile
        self._battery = battery
        self._online_saved = False
        self.controller = self._make_controller()
        if getattr(self.policy, "scope", None) == "board" and battery is None:
            try:
                has_board = board_power_w(device.sample()) is not None
            except (GovernorError, OSError):
                has_board = True  # said by the telemetry checks once running
            if not has_board:
                self._note(
                    "the device reports no whole-board power: the battery budget is metered "
                    "on its GPU figure (scope gpu)"
                )
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
        self._t_start: Optional[float] = None
        self._t_last: Optional[float] = None
        self._energy_last: Optional[float] = None
        self._power_last: Optional[float] = None
        self._power_prev_reading: Optional[float] = None
        self._same_readings = 0
        self._changes_since_reading = False
        self._clock_measured: Optional[float] = None
        self._failures = 0
        self._good = 0
        self._failures_total = 0
        self._safe_hold = False
        self._safe_reason: Optional[str] = None
        self._steps = 0
        self._changes = 0
        self._errors: List[str] = []
        self._meter = _Meter()
        # no energy counter: a period's energy from the app's busy time (see metering.py)
        self._duty = None if device.capabilities.energy_counter else DutyMeter(self.model)
        self._tick_read = False  # whether a tick took its extra reading this period
        self._duty_active = False  # set by the first tick with busy_s
        # (device time, GPU-figure J, board J) when the policy took over; None: at start()
        self._policy_origin: Tuple[Optional[float], float, Optional[float]] = (None, 0.0, None)
        self._old_sigterm: Any = None
        self._atexit = False
        self._kernel_configs: Any = None  # KernelConfigFollower, made on first use

    # -- profile and model ---------------------------------------------------------------
    def _load_model(self, profile: Union[None, bool, Mapping[str, Any], str, Path]) -> ClockModel:
        """The clock model: from the profile given or found; the generic one when there is
        none for this board (or it is another board's), said in the notes.

        Raises:
            ProfileError: the profile is malformed or its clocks are outside the device's.
        """
        from governor.profiles.profile import check_profile_for, lookup_profile_for
        from governor.profiles.store import read_profile_file

        clocks = self.device.supported_clocks_mhz()
        if not clocks:
            raise InvalidRequestError(
                f"{self.device.uri} reports no supported GPU clocks to govern"
            )
        doc: Optional[Mapping[str, Any]] = None
        reason = "no profile"
        if profile is False:  # asked to use none (to find the PPW clock online, say)
            reason = "profile not used"
        elif profile is None:
            path, doc, found_notes = lookup_profile_for(self.device)
            if doc is None:
                reason = found_notes[0]
            else:
                self.profile_path = str(path)
                self.notes.extend(found_notes)
        elif isinstance(profile, (str, Path)):
            doc = check_profile_for(read_profile_file(Path(profile)), self.device, profile)
            self.profile_path = str(profile)
        else:
            doc = check_profile_for(dict(profile), self.device)
            self.profile_path = None
        workload = getattr(self.policy, "workload", None)
        if doc is not None:
            source = f"profile {self.profile_path}" if self.profile_path else "profile (given)"
            if workload is not None and workload not in (doc.get("workloads") or {}):
                self._note(
                    f"the profile has no calibration of workload {workload!r}; using its built-in load"
                )
                workload = None
            return model_from_profile(clocks, doc, workload=workload, source=source)
        model = fallback_model(clocks, reason)
        self._note(model.source)
        return model

    def _make_controller(self) -> Any:
        """The controller of ``self.policy`` on ``self.model`` (an online PPW clock an
        earlier run found is held at once, not searched again)."""
        known = None
        self._online_saved = False
        if isinstance(self.policy, _policies.MaxEfficiency) and not self.model.fitted:
            known = load_online_ppw(self.device, self.policy.workload)
        if known is not None:
            self._online_saved = True
            self._note(
                f"PPW clock {known['clock_mhz']:g} MHz found online by an earlier run "
                f"({known.get('probes', '?')} probes, {known.get('date', '?')}); "
                "governor calibrate makes it exact"
            )
            return StaticController(self.model, float(known["clock_mhz"]))
        controller = make_controller(
            self.policy,
            self.model,
            interval_s=self.interval_s,
            battery=self._battery,
            settle_s=0.3 if self.device.capabilities.energy_counter else 1.3,
        )
        if isinstance(controller, OnlinePpwController):
            self._note("finding the PPW clock online: a few probes of the running load")
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
                if getattr(new, "workload", None) != getattr(old_policy, "workload", None):
                    self.model = self._load_model(self._profile_arg)
                self.controller = self._make_controller()
            except BaseException:
                self.policy, self.model, self.controller = old_policy, old_model, old_controller
                self._online_saved = old_saved
                raise
            with self._tick_lock:
                self._ticks = []  # progress under the old policy says nothing of the new
            if self._t_start is not None:  # a budget or a mission counts from here
                self._policy_origin = (
                    self._t_last if self._t_last is not None else self.device.clock.now_s(),
                    self._meter.energy_j,
                    self._meter.board_energy_j,
                )
            if self._running:
                try:
                    self._set_clock(self.controller.initial_mhz(), urgent=True)
                except GovernorError as err:
                    self._error(f"setting the new policy's first clock failed: {err}")

    def _keep_online_ppw(self, result: Dict[str, Any]) -> None:
        try:
            path = save_online_ppw(self.device, getattr(self.policy, "workload", None), result)
        except (OSError, GovernorError) as err:
            self._note(f"PPW clock {result['clock_mhz']:g} MHz found online; not kept: {err}")
            return
        self._note(
            f"PPW clock {result['clock_mhz']:g} MHz found online after "
            f"{result['found_after_s']:.0f} s ({result['probes']} probes); kept in {path}"
        )

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
                now = self.device.clock.now_s()
                self._t_start = self._t_last = now
                self._read_energy_baseline()
                self._set_clock(self.controller.initial_mhz(), urgent=True)
        except BaseException:
            self._restore_and_release()
            raise
        self._running = True
        self._install_exit_hooks()
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
                self._observe_and_meter(ticks)  # close the last interval before restoring
        except Exception as err:  # metering must never block the restore
            log.debug("final reading failed: %s", err)
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
            self._remove_exit_hooks()
        return restored

    def __enter__(self) -> Governor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _install_exit_hooks(self) -> None:
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                    self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_exit)
            except (ValueError, OSError):  # pragma: no cover - not the main interpreter
                self._old_sigterm = None

    def _remove_exit_hooks(self) -> None:
        if self._atexit:
            atexit.unregister(self.stop)
            self._atexit = False
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) is _sigterm_to_exit:
                    signal.signal(signal.SIGTERM, self._old_sigterm)
            except (ValueError, OSError):  # pragma: no cover
                pass
            self._old_sigterm = None

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
                    self._error(f"control step failed: {type(err).__name__}: {err}")
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
        if not self._running:
            return
        with self._dev_lock:
            with self._tick_lock:
                ticks, self._ticks = self._ticks, []
            obs = self._observe_and_meter(ticks)
            if obs is None:
                with self._tick_lock:  # not a period yet: keep them for the next one
                    self._ticks[:0] = ticks
                return
            self._tick_read = False
            current = self._applied if self._applied is not None else self.model.top_mhz
            if self._safe_hold:
                self.controller.decide(obs, ticks, current)  # keep its bookkeeping going
                target, urgent = self.controller.safe_mhz(current), True
            else:
                target, urgent = self.controller.decide(obs, ticks, current)
            self._steps += 1
            try:
                self._set_clock(target, urgent=urgent)
            except GovernorError as err:
                self._error(f"setting {target:g} MHz failed: {err}")
            result = getattr(self.controller, "result", None)
            if result is not None and not self._online_saved:
                self._online_saved = True
                self._keep_online_ppw(result)

    def _read_energy_baseline(self) -> None:
        if self.device.capabilities.energy_counter:
            try:
                self._energy_last = self.device.sample().energy_j
            except (GovernorError, OSError):
                self._energy_last = None

    def _observe_and_meter(self, ticks: List[Tick]) -> Optional[Observation]:
        dev = self.device
        now = dev.clock.now_s()
        last = self._t_last if self._t_last is not None else now
        dt = now - last
        if dt <= 0 and self._steps > 0:
            return None
        power: Optional[float] = None
        board_w: Optional[float] = None
        busy: Optional[bool] = None
        measured_clock: Optional[float] = None
        problem: Optional[str] = None
        try:
            sample = dev.sample()
        except (GovernorError, OSError) as err:
            sample = None
            problem = f"telemetry failed: {err}"
        if sample is not None:
            measured_clock = sample.gpu_clock_mhz
            board_w = board_power_w(sample)
            if sample.utilisation_pct is not None:
                busy = sample.utilisation_pct >= 50.0
            elif "idle" in sample.throttle_reasons:
                busy = False
            energy = sample.energy_j
            if (
                energy is not None
                and self._energy_last is not None
                and dt > 0
                and energy >= self._energy_last
            ):
                power = (energy - self._energy_last) / dt
            elif sample.power_w is not None:
                power = sample.power_w
                # a frozen sensor: the very same reading although the clock moved. Not
                # while the GPU idles: its power hardly moves with the clock, so a frame
                # loop whose readings all land between frames repeats the same quantised
                # idle reading (on the simulated Nano that was taken for a stuck sensor:
                # periods unmetered, the board's energy under-counted by 2 %)
                if sample.power_w == self._power_prev_reading:
                    if busy is False:
                        pass  # neither a sign of a frozen sensor nor of a live one
                    elif self._changes_since_reading or self._same_readings > 0:
                        self._same_readings += 1
                else:
                    self._same_readings = 0
                self._power_prev_reading = sample.power_w
                if self._same_readings >= 2:
                    power = None
                    problem = "power sensor stuck (same reading while the clock changed)"
            else:
                problem = "the device reports no power"
            if energy is not None:
                self._energy_last = energy
        self._changes_since_reading = False
        if board_w is not None and power is not None and sample is not None:
            if sample.power_w is not None:  # the rest of the board + the GPU's period mean
                board_w = board_w - sample.power_w + power
        applied = self._applied if self._applied is not None else self.model.top_mhz
        meter_w, meter_board_w = power, board_w
        if self._duty_active and self._duty is not None and power is not None and busy is not None:
            self._duty.reading(power, board_w, busy, measured_clock or applied)
            split = self._duty.period(dt, ticks, applied) if dt > 0 else None
            if split is not None:  # sampled power aliases with frames: split the period
                meter_w = split[0] / dt
                if split[1] is not None:
                    meter_board_w = split[1] / dt
        self._meter.add(dt, meter_w, self._power_last, measured_clock or applied)
        self._meter.add_board(dt, meter_board_w)
        if power is not None:
            self._power_last = power
        self._clock_measured = measured_clock
        self._t_last = now
        self._health(problem)
        # the policy's own time and energy: from start(), or from set_policy()
        start, e0, board_e0 = self._policy_origin
        if start is None:
            start = self._t_start if self._t_start is not None else now
        board_j = self._meter.board_energy_j
        return frozen_record(
            Observation,
            {
                "t_s": now,
                "dt_s": dt,
                "power_w": power,
                "clock_mhz": measured_clock,
                "applied_mhz": applied,
                "energy_used_j": self._meter.energy_j - e0,
                "elapsed_s": now - start,
                "busy": busy,
                "board_power_w": board_w,
                "board_energy_used_j": None if board_j is None else board_j - (board_e0 or 0.0),
                "idle_power_w": self._duty.idle_w if self._duty is not None else None,
            },
        )

    def _health(self, problem: Optional[str]) -> None:
        if problem is None:
            self._failures = 0
            self._good += 1
            if self._safe_hold and self._good >= self.fail_limit:
                log.info("%s: telemetry back; leaving the safe hold", self.device.uri)
                self._safe_hold, self._safe_reason = False, None
            return
        self._good = 0
        self._failures += 1
        self._failures_total += 1
        if not self._safe_hold and self._failures >= self.fail_limit:
            self._safe_hold, self._safe_reason = True, problem
            log.warning("%s: %s; holding a safe clock", self.device.uri, problem)

    def _set_clock(self, clock_mhz: float, *, urgent: bool) -> None:
        if clock_mhz == self._applied:
            return
        now = self.device.clock.now_s()
        raising = self._applied is not None and clock_mhz > self._applied
        if raising and not urgent and now - self._last_change_s < self.min_dwell_s - 1e-9:
            return  # rate limit: upward moves wait; downward ones never do
        lo, _ = self.device.lock_gpu_clocks(clock_mhz)
        self._applied = lo
        self._last_change_s = now
        self._changes += 1
        self._changes_since_reading = True
        if self._kernel_configs is not None:
            self._kernel_configs.clock_changed(self._applied)

    def _error(self, text: str) -> None:
        log.error("%s: %s", self.device.uri, text)
        self._errors.append(text)
        del self._errors[:-10]

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
        if busy_s is not None and self._duty is not None and self._running:
            self._duty_active = True
            self._busy_reading(applied)
        if busy_s is not None and self._running and getattr(self.controller, "eager", False):
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
        admit = getattr(self.controller, "admit", None)
        if admit is None or not self._running:
            return True
        with self._tick_lock:  # apps calling from several threads share one credit
            return bool(admit())

    def _busy_reading(self, applied_mhz: float) -> None:
        """One extra power reading per period, as a frame ends (no energy counter): the
        control step's readings may all land between frames (see metering.py). Skipped when
        the control step holds the device, and when the sensor has not refreshed since the
        last reading (the same value: it may predate the frame)."""
        if self._tick_read or not self._dev_lock.acquire(blocking=False):
            return
        try:  # the meter is the control step's too: filed under the same lock
            self._tick_read = True
            duty = self._duty
            try:
                sample = self.device.sample()
            except (GovernorError, OSError):
                return
            power = sample.power_w
            if duty is None or power is None or power == duty.last_reading_w:
                return
            busy = sample.utilisation_pct is None or sample.utilisation_pct >= 50.0
            duty.reading(power, board_power_w(sample), busy, sample.gpu_clock_mhz or applied_mhz)
        finally:
            self._dev_lock.release()

    def report(self) -> Dict[str, Any]:
        """Energy, duration, mean power and mean clock measured over the run so far."""
        doc = self._meter.to_dict()
        doc["policy"] = self.policy.name
        return doc

    def status(self) -> Dict[str, Any]:
        """What the governor is doing now (plain data, JSON-ready)."""
        doc: Dict[str, Any] = {
            "device": self.device.uri,
            "policy": self.policy.name,
            "policy_spec": self.policy.to_spec(),
            "running": self._running,
            "clock_mhz": self._applied,
            "measured_clock_mhz": self._clock_measured,
            "power_w": self._power_last,
            "safe_hold": self._safe_hold,
            "safe_hold_reason": self._safe_reason,
            "telemetry_failures": self._failures_total,
            "steps": self._steps,
            "clock_changes": self._changes,
            "interval_s": self.interval_s,
            "model": self.model.to_dict(),
            "profile_path": self.profile_path,
            "notes": list(self.notes),
            "errors": list(self._errors),
        }
        doc.update(self.controller.status())
        doc.update(
            {k: v for k, v in self._meter.to_dict().items() if k in ("energy_j", "duration_s")}
        )
        return doc

    def tiles(self, kernel: str, precision: str = "double") -> Cached:
        """The tiles chosen offline (``governor tiles --save``) for ``kernel`` on this board."""
        from governor.profiles.profile import board_key
        from governor.tuning.eatss.cache import cached_tiles

        board = board_key(self.device)
        try:
            value = cached_tiles(kernel, board=board, precision=precision)
        except GovernorError as err:
            return Cached(None, f"tile cache unreadable: {err}")
        if value is None:
            return Cached(
                None,
                f"no tiles cached for {kernel}/{precision} on {board} (run 'governor tiles {kernel} --save')",
            )
        return Cached(value, f"cached for {board}")

    def block_size(self, kernel: str, objective: str = "energy") -> Cached:
        """The thread-block size chosen offline (``governor tune-blocks``) for ``kernel``."""
        from governor.profiles.profile import board_key
        from governor.tuning.blocks.cache import choice_key, load_choice

        board = board_key(self.device)
        key = kernel if "@" in kernel else choice_key([kernel], objective)
        try:
            entry = load_choice(board, key)
        except GovernorError as err:
            return Cached(None, f"block cache unreadable: {err}")
        if not isinstance(entry, dict) or not entry.get("blocks"):
            return Cached(
                None, f"no block size cached for {key} on {board} (run 'governor tune-blocks')"
            )
        blocks = [tuple(int(x) for x in b) for b in entry["blocks"]]
        value: Any = blocks[0] if len(blocks) == 1 else blocks
        clock = entry.get("clock_mhz")
        note = f" at {clock:g} MHz" if isinstance(clock, (int, float)) else ""
        return Cached(value, f"cached for {board}{note}")

    def _follower(self) -> Any:
        if self._kernel_configs is None:
            from governor.profiles.profile import board_key
            from governor.runtime.kernel_config import KernelConfigFollower

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


def load_online_ppw(device: Device, workload: Optional[str]) -> Optional[Dict[str, Any]]:
    """The PPW clock an earlier run found online for this board and workload (kept in the
    board's profile, ``tuning.online_ppw``), if it is one of the device's clocks; None
    otherwise (a damaged entry is ignored: it is only a cache)."""
    from governor.errors import ProfileError
    from governor.profiles.profile import board_key
    from governor.profiles.store import get_tuning

    try:
        entry = get_tuning(board_key(device), "online_ppw", workload or "builtin")
    except (ProfileError, OSError):
        return None
    if entry is None:
        return None
    try:
        clock = float(entry["clock_mhz"])
    except (ValueError, KeyError, TypeError):
        return None
    clocks = device.supported_clocks_mhz()
    if not any(abs(c - clock) <= 0.5 for c in clocks):
        return None
    return dict(entry)


def save_online_ppw(device: Device, workload: Optional[str], result: Mapping[str, Any]) -> Path:
    """Keep an online PPW result for the next run on this board: in the user's profile of
    the board (``tuning.online_ppw.<workload>``, created when there is none; atomically
    replaced). Returns the profile's path.

    Raises:
        OSError: the profile cannot be written; ProfileError: the board's profile is malformed.
    """
    import datetime

    from governor.profiles.profile import board_key
    from governor.profiles.store import put_tuning

    entry = {k: v for k, v in result.items() if v is not None}
    entry["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return put_tuning(board_key(device), "online_ppw", workload or "builtin", entry)


def _finite_at_least(value: Any, low: float) -> bool:
    """Whether ``value`` is a real number (not a bool), finite and >= ``low``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool) and math.isfinite(number) and number >= low


def _sigterm_to_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


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
