"""Calibrating the analytic models on a device, and keeping the constants in its profile.

:func:`calibrate_device` locks the GPU clock, runs the micro-benchmarks of
:mod:`~governor.tuning.analytic.calibrate` through the device's kernel runner and returns
the fitted constants with the clock they hold at. Only simulated boards (``sim:NAME``) can
run these kernels today (:mod:`governor.tuning.analytic.simkernels`); a real GPU needs a
CUDA harness that implements the same kinds.

Stored in the board's profile (``governor.profiles.store``) as
``tuning/hhc-constants/<key>`` (an :class:`HhcGpu` dict: structure, constants and
``reference_clock_mhz``) and ``tuning/doacross-constants/<key>`` (a
:class:`DoacrossConstants` dict plus ``gpu`` and ``reference_clock_mhz``), ``<key>`` being the
board's name; ``governor tiles --model hhc|doacross --board NAME`` reads them back.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from governor.errors import InvalidRequestError, UnsupportedError
from governor.tuning.analytic.catalog import DoacrossGpu, HhcGpu
from governor.tuning.analytic.catalog import nest as nest_named

__all__ = [
    "SECTIONS",
    "calibrate_device",
    "kernel_runner",
    "load_doacross",
    "load_hhc",
    "store_constants",
]

#: model -> the profile's tuning section holding its constants
SECTIONS = {"hhc": "hhc-constants", "doacross": "doacross-constants"}


def kernel_runner(dev: Any, seed: Optional[int] = None) -> Callable[[str, Dict[str, Any]], Any]:
    """The ``run_kernel(kind, params)`` of ``dev`` for :func:`calibrate_on_device`.

    Raises:
        UnsupportedError: the device cannot run the analytic models' kernels.
    """
    if getattr(dev, "identity", None) is None or dev.identity.kind != "sim":
        raise UnsupportedError(
            f"{getattr(dev, 'uri', dev)} cannot run the analytic micro-benchmarks; "
            "only simulated boards (sim:NAME) can so far"
        )
    from governor.tuning.analytic.simkernels import SimKernelRunner

    return SimKernelRunner(dev, seed=seed)


def _bases(dev: Any) -> Tuple[HhcGpu, DoacrossGpu]:
    from governor.tuning.analytic.simkernels import board_doacross_gpu, board_hhc_gpu

    return board_hhc_gpu(dev.board), board_doacross_gpu(dev.board)


def calibrate_device(
    dev: Any,
    model: str,
    *,
    clock_mhz: Optional[float] = None,
    nest: str = "sor2d",
    thread_counts: Optional[Sequence[int]] = None,
    repeats: int = 3,
    seed: Optional[int] = None,
) -> Dict[str, Any]:
    """Calibrate the ``hhc`` or ``doacross`` constants on ``dev`` at one locked clock.

    ``clock_mhz`` defaults to the device's top clock. Returns ``{"model", "board",
    "clock_mhz", "kernel_runs", "constants"}``; ``constants`` is an :class:`HhcGpu` or a
    :class:`DoacrossConstants` and ``stored`` (see :func:`store_constants`) the dict a profile
    keeps. The device's settings are restored afterwards.

    Raises:
        InvalidRequestError: unknown model, clock or nest.
        UnsupportedError: the device cannot run the kernels.
        CalibrationError: a fit failed.
    """
    from dataclasses import replace

    from governor.tuning.analytic.calibrate import calibrate_on_device

    model = str(model).lower()
    if model not in SECTIONS:
        raise InvalidRequestError(f"--model must be hhc or doacross, not {model!r}")
    run = kernel_runner(dev, seed)
    hhc_base, dgpu = _bases(dev)
    clocks = dev.supported_clocks_mhz()
    want = float(clocks[-1] if clock_mhz is None else clock_mhz)
    if not clocks or not (clocks[0] - 0.5 <= want <= clocks[-1] + 0.5):
        raise InvalidRequestError(
            f"clock {want:g} MHz is outside {dev.uri}'s range {clocks[0]:g}..{clocks[-1]:g} MHz"
        )
    applied, _ = dev.lock_gpu_clocks(want)
    try:
        if model == "hhc":
            fitted = calibrate_on_device(run, hhc_base=hhc_base)["hhc"]
        else:
            fitted = _calibrate_doacross(run, dgpu, nest_named(nest), thread_counts, repeats)
    finally:
        dev.restore()
    clock = float(applied)
    if model == "hhc":
        fitted = replace(fitted, reference_clock_mhz=clock)
    return {
        "model": model,
        "board": _board_name(dev),
        "device": dev.uri,
        "clock_mhz": clock,
        "kernel_runs": int(getattr(run, "runs", 0)),
        "gpu": hhc_base if model == "hhc" else dgpu,
        "constants": fitted,
    }


def _calibrate_doacross(run, dgpu, nest, thread_counts, repeats):
    from governor.tuning.analytic.calibrate import calibrate_doacross

    def measure(kind: str, **params: Any) -> Any:
        return run(kind, params)

    if repeats < 1:
        raise InvalidRequestError(f"repeats must be at least 1, got {repeats}")
    if thread_counts is not None:
        bad = [t for t in thread_counts if t < 32 or t % 32 or t > dgpu.max_threads_per_block]
        if bad:
            raise InvalidRequestError(
                f"thread counts must be multiples of 32 up to {dgpu.max_threads_per_block}: {bad}"
            )
    return calibrate_doacross(measure, dgpu, nest, thread_counts, repeats)


def _board_name(dev: Any) -> str:
    from governor.profiles.profile import board_key

    return board_key(dev)


def stored_value(result: Dict[str, Any]) -> Dict[str, Any]:
    """The dict a profile keeps for a :func:`calibrate_device` result."""
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    meta = {"device": result["device"], "created": created, "kernel_runs": result["kernel_runs"]}
    if result["model"] == "hhc":
        return dict(result["constants"].to_dict(), source="calibrated", **meta)
    doc = result["constants"].to_dict()
    doc.update(gpu=result["gpu"].to_dict(), reference_clock_mhz=result["clock_mhz"], **meta)
    return doc


def store_constants(result: Dict[str, Any], key: Optional[str] = None) -> Any:
    """Keep a :func:`calibrate_device` result in the board's profile; returns the file path."""
    from governor.profiles.store import put_tuning

    board = result["board"]
    return put_tuning(board, SECTIONS[result["model"]], key or board, stored_value(result))


def _stored(board: str, model: str, keys: Sequence[str]) -> Optional[Tuple[str, Dict[str, Any]]]:
    from governor.errors import ProfileError
    from governor.profiles.store import get_tuning

    for key in keys:
        try:
            hit = get_tuning(board, SECTIONS[model], key)
        except ProfileError as err:
            if err.path is not None:
                raise  # the board's profile file is malformed: say so, do not ignore it
            return None  # not a name a profile can have
        if isinstance(hit, dict):
            return key, hit
    return None


def _keys(board: str, gpu: Optional[str]) -> Sequence[str]:
    def norm(name: str) -> str:
        return str(name).strip().lower().replace("-", "").replace("_", "")

    if not gpu:
        return [board]
    keys = [gpu, norm(gpu)]
    if norm(gpu) == norm(board):
        keys.append(board)
    return keys


def load_hhc(board: str, gpu: Optional[str]) -> Optional[HhcGpu]:
    """The calibrated HHC GPU kept in ``board``'s profile for ``gpu`` (default: the board), or
    None. Raises ProfileError when the stored entry is malformed."""
    hit = _stored(board, "hhc", _keys(board, gpu))
    if hit is None:
        return None
    try:
        return HhcGpu.from_dict(hit[1])
    except InvalidRequestError as err:
        from governor.errors import ProfileError

        raise ProfileError(f"bad tuning/hhc-constants/{hit[0]} of {board!r}: {err}") from None


def load_doacross(
    board: str, gpu: Optional[str]
) -> Optional[Tuple[Any, Optional[DoacrossGpu], Optional[float]]]:
    """(constants, GPU or None, reference clock or None) kept in ``board``'s profile, or None.
    Raises ProfileError when the stored entry is malformed."""
    from governor.tuning.analytic.doacross import DoacrossConstants

    hit = _stored(board, "doacross", _keys(board, gpu))
    if hit is None:
        return None
    doc = hit[1]
    try:
        constants = DoacrossConstants.from_dict(doc)
        dgpu = DoacrossGpu.from_dict(doc["gpu"]) if isinstance(doc.get("gpu"), dict) else None
        ref = doc.get("reference_clock_mhz")
        ref = float(ref) if ref is not None else None
    except (InvalidRequestError, TypeError, ValueError) as err:
        from governor.errors import ProfileError

        raise ProfileError(f"bad tuning/doacross-constants/{hit[0]} of {board!r}: {err}") from None
    return constants, dgpu, ref
