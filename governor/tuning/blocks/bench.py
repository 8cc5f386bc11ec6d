"""Benchmark functions the procedures run on: (blocks, clock) -> time and energy per run.

Four kinds, one interface (``n_kernels``, ``clocks_mhz()``, ``measure(blocks, clock_mhz)``):

- :class:`CallableBench`  a user's Python function.
- :class:`CommandBench`   a shell command with ``{block}`` placeholders, run on real
  hardware (or a simulated board in real time), timed with the device's clock and metered by
  its energy counter or by integrating its (optionally lag-corrected) power.
- :class:`RecordedBench`  a recorded Kernel Tuner cache (JSON), e.g. the RTX 4000 Ada table.
- :class:`SimBench`       a simulated board (``governor.open_device("sim:...")``) running the
  kernel model of :mod:`governor.tuning.blocks.simkernels`, measured through its sensors.
"""

from __future__ import annotations

import math
import shlex
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from governor._compat import json_loads
from governor.errors import InvalidRequestError, UnsupportedError
from governor.tuning.blocks.candidates import format_block
from governor.tuning.blocks.procedures import Measurement
from governor.tuning.occupancy import parse_block

__all__ = ["CallableBench", "CommandBench", "RecordedBench", "SimBench", "guess_cc"]

Block = Tuple[int, int, int]
Blocks = Tuple[Block, ...]


class CallableBench:
    """Wraps ``fn(block, clock_mhz) -> (time_s, energy_j)`` (one kernel) or
    ``fn(blocks, clock_mhz)`` (``n_kernels`` > 1); blocks are ``(x, y, z)`` tuples."""

    def __init__(
        self, fn: Callable[..., Any], clocks_mhz: Sequence[float], n_kernels: int = 1
    ) -> None:
        if not clocks_mhz:
            raise InvalidRequestError("a benchmark needs at least one clock")
        self.fn = fn
        self._clocks = tuple(sorted(float(c) for c in clocks_mhz))
        self.n_kernels = int(n_kernels)

    def clocks_mhz(self) -> Tuple[float, ...]:
        return self._clocks

    def measure(self, blocks: Blocks, clock_mhz: float) -> Measurement:
        raw = self.fn(blocks[0] if self.n_kernels == 1 else blocks, clock_mhz)
        if isinstance(raw, Measurement):
            return raw
        return Measurement(float(raw[0]), float(raw[1]))


# -- recorded tables --------------------------------------------------------------------
_CC_BY_NAME = (
    ("ada", "8.9"),
    ("l4", "8.9"),
    ("h100", "9.0"),
    ("h200", "9.0"),
    ("a100", "8.0"),
    ("a30", "8.0"),
    ("rtx a", "8.6"),
    ("a40", "8.6"),
    ("a10", "8.6"),
    ("rtx 30", "8.6"),
    ("v100", "7.0"),
    ("t4", "7.5"),
    ("rtx 20", "7.5"),
    ("titan x", "5.2"),
)


def guess_cc(device_name: str) -> Optional[str]:
    """Compute capability from a device name as NVML reports it, or None if unknown."""
    low = device_name.lower()
    for key, cc in _CC_BY_NAME:
        if key in low:
            return cc
    return None


class RecordedBench:
    """A Kernel Tuner cache: ``{"tune_params": ..., "cache": {key: entry}}``.

    Blocks come from ``block_size_x/y/z``, clocks from ``nvml_gr_clock`` (one nominal clock
    when absent); time is ``time`` (ms), energy ``ps_energy``, ``nvml_energy`` or ``energy``
    (J), else ``nvml_power`` × time. Other tunable parameters are held at ``fixed`` (default:
    their first value).

    Raises:
        InvalidRequestError: unreadable file, or no block-size parameter in it.
    """

    n_kernels = 1

    def __init__(self, path: Union[str, Path], fixed: Optional[Dict[str, Any]] = None) -> None:
        self.path = Path(path)
        try:
            text = self.path.read_text(encoding="utf-8")
            doc = json_loads(text)
        except (OSError, ValueError) as err:
            raise InvalidRequestError(f"cannot read Kernel Tuner cache {self.path}: {err}") from err
        if not isinstance(doc, dict) or "cache" not in doc:
            raise InvalidRequestError(f"{self.path} is not a Kernel Tuner cache (no 'cache' key)")
        params = doc.get("tune_params", {})
        if "block_size_x" not in params:
            raise InvalidRequestError(f"{self.path} has no block_size_x parameter")
        self.device_name = str(doc.get("device_name", ""))
        self.kernel_name = str(doc.get("kernel_name", "kernel"))
        held = {
            k: v[0]
            for k, v in params.items()
            if k not in ("block_size_x", "block_size_y", "block_size_z", "nvml_gr_clock")
        }
        held.update(fixed or {})
        self.table: Dict[Tuple[Block, float], Measurement] = {}
        for key, entry in doc["cache"].items():
            _check_entry(self.path, text, key, entry)
            if any(entry.get(k) != v for k, v in held.items()):
                continue
            block = parse_block(
                [
                    entry.get("block_size_x", 1),
                    entry.get("block_size_y", 1),
                    entry.get("block_size_z", 1),
                ]
            )
            clock = float(entry.get("nvml_gr_clock", entry.get("core_freq", 0.0)))
            time_s = _number(entry.get("time")) / 1000.0
            energy = None
            for key in ("ps_energy", "nvml_energy", "energy"):
                if _number(entry.get(key)) > 0:
                    energy = _number(entry[key])
                    break
            if energy is None and _number(entry.get("nvml_power")) > 0:
                energy = _number(entry["nvml_power"]) * time_s
            if not (time_s > 0 and energy):
                self.table[(block, clock)] = Measurement(math.inf, math.inf)
                continue
            self.table[(block, clock)] = Measurement(time_s, float(energy))
        if not self.table:
            raise InvalidRequestError(
                f"{self.path} holds no entries for the fixed parameters {held}"
            )

    def blocks(self) -> List[Block]:
        return sorted({b for b, _ in self.table}, key=lambda b: (b[0] * b[1] * b[2], b))

    def clocks_mhz(self) -> Tuple[float, ...]:
        return tuple(sorted({c for _, c in self.table}))

    def measure(self, blocks: Blocks, clock_mhz: float) -> Measurement:
        try:
            return self.table[(blocks[0], float(clock_mhz))]
        except KeyError:
            raise InvalidRequestError(
                f"block {format_block(blocks[0])} at {clock_mhz:g} MHz is not in the recording {self.path.name}"
            ) from None


_MEASURED = (
    "time",
    "nvml_power",
    "ps_energy",
    "nvml_energy",
    "energy",
    "nvml_gr_clock",
    "core_freq",
)


def _check_entry(path: Path, text: str, key: str, entry: Any) -> None:
    """Refuse an entry with a number no GPU measures (a string is Kernel Tuner's mark of a
    failed configuration, and data).

    Raises:
        InvalidRequestError: one line naming the file, the entry's line and the field.
    """
    from governor.devices.replay_files import check_value, entry_place

    if not isinstance(entry, dict):
        raise InvalidRequestError(f"{path}: {entry_place(text, key)} is not an object")
    for field in _MEASURED:
        value = entry.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = check_value(float(value), field)
            if problem:
                raise InvalidRequestError(f"{path}: {entry_place(text, key)} {field}: {problem}")


def _number(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return 0.0
    return out if math.isfinite(out) else 0.0


# -- metering a device --------------------------------------------------------------------
class _Meter:
    """Energy over a window: the device's energy counter if it has one, else integrated power
    (lag-corrected when ``lag_c_s`` is given)."""

    def __init__(self, device: Any, interval_s: float, lag_c_s: Optional[float]) -> None:
        self.device = device
        self.interval_s = interval_s
        self.lag_c_s = lag_c_s
        self.counter = bool(device.capabilities.energy_counter)
        if not self.counter and not device.capabilities.power:
            raise UnsupportedError(f"{device.uri} reads neither energy nor power")
        self.times: List[float] = []
        self.powers: List[float] = []
        self.clocks: List[float] = []
        self.e0: Optional[float] = None

    def start(self) -> float:
        s = self.device.sample()
        self.times, self.powers = [s.t_s], [s.power_w or 0.0]
        self.e0 = s.energy_j
        return s.t_s

    def tick(self) -> None:
        s = self.device.sample()
        if s.gpu_clock_mhz is not None:
            self.clocks.append(s.gpu_clock_mhz)
        if s.t_s > self.times[-1]:
            self.times.append(s.t_s)
            self.powers.append(s.power_w or 0.0)

    def mean_clock_mhz(self) -> Optional[float]:
        return sum(self.clocks) / len(self.clocks) if self.clocks else None

    def stop(self) -> Tuple[float, float]:
        s = self.device.sample()
        if s.t_s > self.times[-1]:
            self.times.append(s.t_s)
            self.powers.append(s.power_w or 0.0)
        elapsed = self.times[-1] - self.times[0]
        if self.counter and s.energy_j is not None and self.e0 is not None:
            return elapsed, s.energy_j - self.e0
        from governor.measure.lag import corrected_energy_j, integrate_energy_j

        if self.lag_c_s:
            return elapsed, corrected_energy_j(self.times, self.powers, self.lag_c_s)
        return elapsed, integrate_energy_j(self.times, self.powers)


def _lock(device: Any, clock_mhz: float) -> None:
    if device.capabilities.lock_gpu_clocks:
        device.lock_gpu_clocks(clock_mhz)


class SimBench:
    """Concurrent kernels (``KernelModel``) on a simulated board, measured via its sensors.

    Each point: lock the clock, run the set's equivalent workload, let it settle
    ``settle_s``, then meter ``window_s`` of repeated runs (energy counter where the board has
    one, else sampled power every ``interval_s``). A ``warmup_s`` run before the first point
    brings the board near its working temperature, as one would on hardware.
    """

    def __init__(
        self,
        device: Any,
        kernels: Sequence[Any],
        settle_s: float = 1.0,
        window_s: float = 2.0,
        interval_s: float = 0.05,
        warmup_s: float = 30.0,
        lag_c_s: Optional[float] = None,
    ) -> None:
        if not hasattr(device, "board") or not hasattr(device, "run_workload"):
            raise InvalidRequestError(f"{device.uri} is not a simulated board")
        if not kernels:
            raise InvalidRequestError("at least one kernel is needed")
        self.device = device
        self.board = device.board
        self.kernels = list(kernels)
        self.n_kernels = len(self.kernels)
        self.settle_s, self.window_s, self.interval_s = settle_s, window_s, interval_s
        self.warmup_s = warmup_s
        self.lag_c_s = lag_c_s
        self._warm = False

    def clocks_mhz(self) -> Tuple[float, ...]:
        return tuple(self.device.supported_clocks_mhz())

    def truth(self, blocks: Sequence[Any], clock_mhz: float) -> Any:
        from governor.tuning.blocks.simkernels import evaluate

        return evaluate(self.board, self.kernels, blocks, clock_mhz)

    def measure(self, blocks: Blocks, clock_mhz: float) -> Measurement:
        from governor.tuning.blocks.simkernels import equivalent_workload

        try:
            point = self.truth(blocks, clock_mhz)
        except InvalidRequestError:
            return Measurement(math.inf, math.inf)  # cannot launch: a failed point, not a crash
        dev = self.device
        _lock(dev, clock_mhz)
        dev.run_workload(equivalent_workload(self.board, point))
        if not self._warm:
            dev.clock.sleep(self.warmup_s)
            self._warm = True
        dev.clock.sleep(self.settle_s)
        meter = _Meter(dev, self.interval_s, self.lag_c_s)
        w0 = dev.work_done()
        meter.start()
        end = dev.clock.now_s() + self.window_s
        while dev.clock.now_s() < end - 1e-9:
            dev.clock.sleep(min(self.interval_s, end - dev.clock.now_s()))
            meter.tick()
        elapsed, energy = meter.stop()
        runs = dev.work_done() - w0
        dev.stop_workload()
        if runs <= 0:
            return Measurement(math.inf, math.inf)
        return Measurement(
            elapsed / runs,
            energy / runs,
            point.kernel_time_s,
            point.kernel_energy_j,
            meter.mean_clock_mhz(),
        )

    def optimum(
        self, blocks: Sequence[Sequence[Block]], objective: str, clocks: Sequence[float]
    ) -> Tuple[Blocks, float, Measurement]:
        """The exact best point of the model over ``blocks`` × ``clocks``, without measuring.

        Kernels interact only through the makespan (the slowest kernel) and the clock, so for
        each clock and each candidate makespan τ every kernel takes its cheapest block that
        finishes within τ; the best τ over all kernels' times is the optimum.
        """
        from governor.tuning.blocks.simkernels import (
            board_arch,
            board_sms,
            kernel_time_energy,
            split_sms,
        )

        arch, total = board_arch(self.board), board_sms(self.board)
        shares = split_sms(self.kernels, total)
        best: Optional[Tuple[float, Blocks, float]] = None
        for clock in clocks:
            idle_w = self.board.steady_gpu_power_w(clock, None, self.board.default_mem_clock_mhz)
            tables = []
            for model, options, share in zip(self.kernels, blocks, shares):
                rows = []
                for b in options:
                    try:
                        t, e = kernel_time_energy(self.board, arch, model, b, clock, share, total)
                    except InvalidRequestError:
                        continue
                    rows.append((t, e, b))
                if not rows:
                    raise InvalidRequestError(f"kernel {model.name!r} has no block that can launch")
                tables.append(rows)
            taus = sorted({t for rows in tables for t, _, _ in rows})
            found = False
            for tau in taus:
                chosen = []
                for rows in tables:
                    fits = [r for r in rows if r[0] <= tau]
                    if not fits:
                        break
                    if objective == "energy":
                        chosen.append(min(fits, key=lambda r: (r[1], r[0])))
                    else:
                        chosen.append(min(fits, key=lambda r: (r[0], r[1])))
                else:
                    makespan = max(r[0] for r in chosen)
                    value = (
                        idle_w * makespan + sum(r[1] for r in chosen)
                        if objective == "energy"
                        else makespan
                    )
                    found = True
                    if best is None or value < best[0] - 1e-15:
                        best = (value, tuple(r[2] for r in chosen), clock)
                if objective == "time" and found:
                    break
        if best is None:
            raise InvalidRequestError("no point of the space can launch")
        point = self.truth(best[1], best[2])
        return (
            best[1],
            best[2],
            Measurement(point.time_s, point.energy_j, point.kernel_time_s, point.kernel_energy_j),
        )


class CommandBench:
    """A command run once per point, with placeholders filled in from the block shapes.

    Placeholders: ``{block}`` (``256`` or ``16x16``), ``{bx}``, ``{by}``, ``{bz}``, ``{threads}``
    for the first kernel, and ``{block0}``, ``{block1}``, ... for each kernel; ``{clock}`` is the
    clock in MHz. The command's wall time is taken on the device's clock and its energy from
    the device's energy counter, else from power sampled every ``interval_s`` and integrated
    (lag-corrected when ``lag_c_s`` is given). A command that exits non-zero is a failed
    point (infinite time and energy), not an error: a block that cannot launch is data.
    """

    def __init__(
        self,
        device: Any,
        command: Union[str, Sequence[str]],
        n_kernels: int = 1,
        interval_s: float = 0.05,
        lag_c_s: Optional[float] = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.device = device
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise InvalidRequestError("an empty command")
        self.n_kernels = int(n_kernels)
        self.interval_s = interval_s
        self.lag_c_s = lag_c_s
        self.timeout_s = timeout_s
        self.last_returncode: Optional[int] = None

    def clocks_mhz(self) -> Tuple[float, ...]:
        clocks = tuple(self.device.supported_clocks_mhz())
        if not self.device.capabilities.lock_gpu_clocks or not clocks:
            sample = self.device.sample()
            return (float(sample.gpu_clock_mhz or 0.0),)
        return clocks

    def render(self, blocks: Blocks, clock_mhz: float) -> List[str]:
        first = blocks[0]
        values = {
            "block": format_block(first),
            "bx": first[0],
            "by": first[1],
            "bz": first[2],
            "threads": first[0] * first[1] * first[2],
            "clock": f"{clock_mhz:g}",
        }
        for i, b in enumerate(blocks):
            values[f"block{i}"] = format_block(b)
        try:
            return [arg.format(**values) for arg in self.argv]
        except (KeyError, IndexError, ValueError) as err:
            raise InvalidRequestError(f"bad placeholder in the command: {err}") from None

    def measure(self, blocks: Blocks, clock_mhz: float) -> Measurement:
        argv = self.render(blocks, clock_mhz)
        dev = self.device
        if dev.capabilities.lock_gpu_clocks:
            _lock(dev, clock_mhz)
        meter = _Meter(dev, self.interval_s, self.lag_c_s)
        meter.start()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError as err:
            raise InvalidRequestError(f"cannot run {argv[0]!r}: {err.strerror or err}") from err
        start = dev.clock.now_s()
        while proc.poll() is None:
            if dev.clock.now_s() - start > self.timeout_s:
                proc.kill()
                proc.wait()
                break
            try:
                proc.wait(timeout=self.interval_s)
            except subprocess.TimeoutExpired:
                pass
            meter.tick()
        elapsed, energy = meter.stop()
        self.last_returncode = proc.returncode
        if proc.returncode != 0:
            return Measurement(math.inf, math.inf)
        return Measurement(max(elapsed, 0.0), max(energy, 0.0), clock_mhz=meter.mean_clock_mhz())
