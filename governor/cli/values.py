"""Limits on the numbers the command line takes, declared next to each option.

Every ``int`` or ``float`` option of every command, and every string option that carries
numbers (``--size 8192,8192``, ``--threads 16x16``), takes its ``callback`` from here, so
each command states its limits beside the option::

    from governor.cli import values

    window_s: Annotated[
        float,
        typer.Option(
            "--window-s",
            callback=values.number(gt=0, le=values.HOUR_S, unit="seconds"),
            help="Seconds measured at each clock after power settles.",
        ),
    ] = 1.5

:func:`number` (finite floats within bounds, inclusive or exclusive), :func:`integer` and
:func:`count` (whole numbers; a count starts at 1), :func:`integers` (numbers in a string)
and :func:`policy_number` build the callbacks.

A value outside its limits stops the command before it does anything, as a usage error: exit
code 2 and one line that names the option and says what it takes, such as ``--window-s must be
a finite number of seconds > 0 and <= 3600, not inf``; never a traceback. Floats must always be
finite: ``inf`` and ``nan`` parse as floats, and used to hang ``calibrate`` and ``monitor`` or
turn budgets into nonsense. Defaults pass through the same check. ``tests/test_cli_values.py``
walks the whole command tree and fails on a numeric option without one of these callbacks.

The numbers a policy takes (``--cap-w``, ``--battery-wh``, ``--hours``, ``--rate-hz``, GPU
clocks in MHz, and power limits in W, which are the same quantity as a cap) are checked by
:func:`governor.runtime.policies.check_number`, the check the policy constructors run, so the
command line and the library cannot disagree; :func:`policy_number` only puts the option's
name in its message.

Upper bounds, where a huge value is a typo or would run for ever:

- :data:`HOUR_S` for a calibration window, a ``monitor`` interval and a ``tegrastats`` log
  interval: steady-state windows and sampling periods are seconds; an hour per probe already
  makes a calibration of 6+ probes last a working day, and ``inf`` used to hang.
- 60 s for the control period of ``run`` and ``simulate`` and 0.001 s below it: the range
  :class:`~governor.runtime.governor.Governor` accepts.
- :data:`WEEK_S` for ``simulate --duration-s`` (the range of
  :func:`~governor.runtime.simulate.simulate`), and at most :data:`MAX_SIM_STEPS` steps
  (control periods and camera frames) in one simulation, checked by the command as it spans
  two options.
- :data:`INT32_MAX` for problem sizes, time steps and seeds: kernels index with 32-bit
  integers, and the simulated boards take seeds in that range.
- 1024 threads per block dimension and 255 registers per thread (CUDA's limits on every
  architecture the occupancy tables know); :data:`MAX_SHARED_BYTES` for shared memory, which
  is more than any GPU has per SM (228 KiB on Hopper) but still catches a typo.
- :data:`MAX_PROBES` calibration probes: more than any clock table holds (an A100 lists 81
  graphics clocks), and the procedure stops when it runs out of clocks anyway.
- ``monitor --count`` and ``tiles --top`` get bounds that only catch a runaway number; for an
  endless ``monitor``, leave ``--count`` out.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Sequence

import typer

__all__ = [
    "HOUR_S",
    "INT32_MAX",
    "MAX_PROBES",
    "MAX_SHARED_BYTES",
    "MAX_SIM_STEPS",
    "WEEK_S",
    "OptionValueError",
    "count",
    "integer",
    "integers",
    "is_checked",
    "number",
    "policy_number",
]

HOUR_S = 3600.0
WEEK_S = 7 * 86400.0
#: ``simulate`` runs about 10 000 control periods (or 20 000 camera frames) a second on a
#: desktop core, fewer on a Jetson's: a million steps is a couple of minutes, 27 simulated
#: hours at the default 0.1 s period and the whole week at 0.6 s; past it a run looks hung.
MAX_SIM_STEPS = 1_000_000
INT32_MAX = 2**31 - 1
MAX_PROBES = 1000
MAX_SHARED_BYTES = 1 << 20

Callback = Callable[[typer.Context, typer.CallbackParam, Any], Any]


class OptionValueError(typer.BadParameter):
    """A usage error (exit code 2) whose one line is the whole message, option name first."""

    def format_message(self) -> str:
        return self.message


def option_name(param: Any) -> str:
    """How the user spells ``param``: its long option (``--window-s``), else its name."""
    opts = list(getattr(param, "opts", None) or [])
    for opt in opts:
        if opt.startswith("--"):
            return opt
    if opts:
        return opts[0]
    return str(getattr(param, "name", "value")).upper()


def _show(value: Any) -> str:
    """The value as the user typed it, near enough: inf, nan, -5, 1e+308, '0,-4'."""
    if isinstance(value, float):
        return format(value, ".15g")  # 1000001, not 1e+06 beside a limit of 1000000
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _bound(bound: float) -> str:
    """A limit as people write it: 3600000, not 3.6e+06; 0.001."""
    if float(bound).is_integer() and abs(bound) < 1e15:
        return str(int(bound))
    return format(bound, "g")


def _bounds(
    gt: Optional[float], ge: Optional[float], lt: Optional[float], le: Optional[float]
) -> str:
    parts = [
        f"{sign} {_bound(bound)}"
        for sign, bound in ((">", gt), (">=", ge), ("<", lt), ("<=", le))
        if bound is not None
    ]
    return " and ".join(parts)


def _within(
    x: float, gt: Optional[float], ge: Optional[float], lt: Optional[float], le: Optional[float]
) -> bool:
    return (
        math.isfinite(x)
        and (gt is None or x > gt)
        and (ge is None or x >= ge)
        and (lt is None or x < lt)
        and (le is None or x <= le)
    )


def _mark(check: Callback, limits: str) -> Callback:
    # typer copies the callback's __dict__ onto its wrapper: the command-tree test finds this
    check.governor_limits = limits  # type: ignore[attr-defined]
    return check


def is_checked(callback: Any) -> bool:
    """Whether ``callback`` (as typer or click holds it) is one of this module's checks."""
    while callback is not None:
        if getattr(callback, "governor_limits", None):
            return True
        callback = getattr(callback, "__wrapped__", None)
    return False


def number(
    *,
    gt: Optional[float] = None,
    ge: Optional[float] = None,
    lt: Optional[float] = None,
    le: Optional[float] = None,
    unit: str = "",
) -> Callback:
    """A float option's check: finite, and within the given bounds (in ``unit``)."""
    limits = _bounds(gt, ge, lt, le)
    what = "a finite number" + (f" of {unit}" if unit else "") + (f" {limits}" if limits else "")

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, bool) or not _within(float(value), gt, ge, lt, le):
            raise OptionValueError(f"{option_name(param)} must be {what}, not {_show(value)}")
        return value

    return _mark(check, what)


def integer(*, ge: Optional[int] = None, le: Optional[int] = None, unit: str = "") -> Callback:
    """An int option's check: a whole number within ``ge``..``le`` (in ``unit``)."""
    limits = _bounds(None, ge, None, le)
    what = "a whole number" + (f" of {unit}" if unit else "") + (f" {limits}" if limits else "")

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        if (
            isinstance(value, bool)
            or int(value) != value
            or (ge is not None and value < ge)
            or (le is not None and value > le)
        ):
            raise OptionValueError(f"{option_name(param)} must be {what}, not {_show(value)}")
        return value

    return _mark(check, what)


def count(*, le: int, ge: int = 1, unit: str = "") -> Callback:
    """A count's check: a whole number of at least ``ge`` (1 unless said) and at most ``le``."""
    return integer(ge=ge, le=le, unit=unit)


def integers(*, sep: str = ",", ge: int = 1, le: int = INT32_MAX, most: int = 3) -> Callback:
    """A string option of 1 to ``most`` whole numbers separated by ``sep`` (``8192,8192``).

    Spaces are ignored; the string is passed on unchanged for the command to parse.
    """
    limits = _bounds(None, ge, None, le)
    many = "1" if most == 1 else f"1 to {most}"
    what = f"{many} whole number{'s' if most > 1 else ''} {limits} separated by {sep!r}"

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        items = str(value).replace(" ", "").split(sep)
        try:
            numbers = [int(item) for item in items]
        except ValueError:
            numbers = []
        if not 1 <= len(numbers) <= most or any(not ge <= n <= le for n in numbers):
            raise OptionValueError(f"{option_name(param)} must be {what}, not {value!r}")
        return value

    return _mark(check, what)


def tile_sizes(*, le: int = INT32_MAX) -> Callback:
    """A string option of loop tiles, ``i=16,j=64,k=8``: names and whole numbers 1 to ``le``.

    The string is passed on unchanged; :func:`parse_tile_sizes` turns it into a dict.
    """
    what = f"LOOP=N pairs separated by ',' with N a whole number >= 1 and <= {le}"

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        if parse_tile_sizes(str(value), le) is None:
            raise OptionValueError(f"{option_name(param)} must be {what}, not {value!r}")
        return value

    return _mark(check, what)


def parse_tile_sizes(text: str, le: int = INT32_MAX) -> Optional[Dict[str, int]]:
    """``{"i": 16, "j": 64}`` from ``"i=16,j=64"``; None when malformed or out of range."""
    tiles: Dict[str, int] = {}
    for item in text.replace(" ", "").split(","):
        name, eq, number_text = item.partition("=")
        if not eq or not name.isidentifier() or name in tiles:
            return None
        try:
            value = int(number_text)
        except ValueError:
            return None
        if not 1 <= value <= le:
            return None
        tiles[name] = value
    return tiles


def policy_number(key: str) -> Callback:
    """Check an option against the policy number ``key`` (``cap_w``, ``clock_mhz``, ...).

    The check is :func:`governor.runtime.policies.check_number`, the one the policy
    constructors run; the message names the option instead of the key.
    """

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        from governor.errors import InvalidRequestError
        from governor.runtime.policies import check_number

        try:
            check_number(key, value, what=option_name(param))
        except InvalidRequestError as err:
            raise OptionValueError(str(err)) from None
        return value

    return _mark(check, f"a policy's {key}")


def check_clock_scale(clock_mhz: float, clocks_mhz: Sequence[float], board: str) -> None:
    """Refuse a GPU clock off ``board``'s range by an order of magnitude or more (a unit
    slip: ``--clock 1.3`` for 1.3 GHz): ``run``, ``apply`` and ``simulate`` call this before
    touching the device, so all refuse it the same way (a clock merely outside the range is
    theirs to clamp or refuse); the :class:`~governor.runtime.Governor` refuses it too, with
    the same text (:func:`governor.runtime.feasibility.clock_unit_slip`).

    Raises:
        OptionValueError: exit code 2, naming the unit it probably was.
    """
    from governor.runtime.feasibility import clock_unit_slip

    text = clock_unit_slip(clock_mhz, clocks_mhz, board, what="--clock")
    if text is not None:
        raise OptionValueError(text)
