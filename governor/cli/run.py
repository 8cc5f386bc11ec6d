"""``governor run``: govern a device while a command runs, then restore and report energy.

The command is started without a shell; Ctrl-C and SIGTERM are passed on to it; the device is
restored however the command ends, and ``governor run`` exits with the command's code (127 when
it cannot be found, 126 when it cannot be executed). A GPU lost while the command runs is left
alone from then on (one that stopped answering is governed again once it answers) and the
command goes on; a restore that fails (the GPU still lost) is said
on stderr and in the report (``device_lost``, ``restore_failed``) and stays journaled for
``governor reset``: the exit code is still the command's. On a simulated board (``sim:NAME``) the
board runs in real time with its compute workload for as long as the command runs, so the
report is what the board would have used under that load.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

import typer

from governor.cli import values
from governor.cli.common import Annotated, DeviceOpt, emit_json

PolicyOpt = Annotated[
    str, typer.Option("--policy", help="ppw, max, power-cap, battery, throughput or clock.")
]
CapOpt = Annotated[
    Optional[float],
    typer.Option("--cap-w", callback=values.policy_number("cap_w"), help="power-cap: the cap (W)."),
]
BatteryOpt = Annotated[
    Optional[float],
    typer.Option(
        "--battery-wh",
        callback=values.policy_number("battery_wh"),
        help="battery: the energy budget (Wh).",
    ),
]
HoursOpt = Annotated[
    Optional[float],
    typer.Option(
        "--hours",
        callback=values.policy_number("hours"),
        help="battery: how long it must last (h).",
    ),
]
RateOpt = Annotated[
    Optional[float],
    typer.Option(
        "--rate-hz",
        callback=values.policy_number("rate_hz"),
        help="throughput: the target rate (Hz); with --battery-wh and --hours or --until, "
        "kept while the battery lasts the mission (a battery floor).",
    ),
]
ClockOpt = Annotated[
    Optional[float],
    typer.Option(
        "--clock", callback=values.policy_number("clock_mhz"), help="clock: the GPU clock (MHz)."
    ),
]
IntervalOpt = Annotated[
    float,
    typer.Option(
        "--interval-s",
        callback=values.number(ge=0.001, le=60.0, unit="seconds"),
        help="Control period (s).",
    ),
]


UntilOpt = Annotated[
    Optional[str],
    typer.Option(
        "--until",
        metavar="HH:MM",
        help="battery, or throughput with --battery-wh: the mission ends at this local time "
        "(instead of --hours).",
    ),
]
ScopeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--scope",
        metavar="board|gpu",
        help="battery: meter the budget at the board's input (default) or on the GPU figure.",
    ),
]
JsonOutOpt = Annotated[
    Optional[str],
    typer.Option(
        "--json-out",
        metavar="FILE",
        help="Write the JSON report to FILE (the job's output stays on the terminal).",
    ),
]
JobStdoutOpt = Annotated[
    Optional[str],
    typer.Option(
        "--stdout",
        metavar="FILE",
        help="Send the job's standard output to FILE (then --json may use stdout).",
    ),
]
RunJsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the JSON report on stdout; needs the job's stdout elsewhere (--stdout FILE). "
        "See --json-out.",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("run", context_settings={"allow_interspersed_args": False})(run_command)


def policy_spec(
    policy: str,
    cap_w: Optional[float],
    battery_wh: Optional[float],
    hours: Optional[float],
    rate_hz: Optional[float],
    clock_mhz: Optional[float] = None,
    scope: Optional[str] = None,
    until: Optional[str] = None,
) -> Dict[str, Any]:
    """The policy dictionary of the common CLI options (``scope`` is the battery's).

    ``until`` (a local time of day) ends the mission: the battery policy's ``hours`` from
    now, or the throughput policy's battery floor."""
    from governor.runtime.policies import seconds_until

    if scope is not None and scope not in ("board", "gpu"):
        raise typer.BadParameter(f"choose board or gpu, not {scope!r}", param_hint="--scope")
    if until is not None:
        from governor.runtime.policies import POLICIES

        kind = POLICIES.get(policy)
        if kind is None or not kind.has_mission:
            with_end = " and ".join(n for n, k in POLICIES.items() if k.has_mission)
            raise typer.BadParameter(
                f"only the {with_end} policies have a mission end", param_hint="--until"
            )
        if hours is not None:
            raise typer.BadParameter("give --hours or --until, not both", param_hint="--until")
        try:
            seconds = seconds_until(until)
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--until") from None
        if policy == "battery":
            hours, until = seconds / 3600.0, None
    return {
        "policy": policy,
        "cap_w": cap_w,
        "battery_wh": battery_wh,
        "hours": hours,
        "until": until,
        "rate_hz": rate_hz,
        "clock_mhz": clock_mhz,
        "scope": scope,
    }


#: The option that gives each policy field on the command line. ``--until`` ends a mission
#: (the battery's hours from now, or a battery floor's ``until``); a field missing here
#: (``energy_j``, ``margin``, ...) is the Python API's and daemon config's only.
POLICY_FLAGS: Dict[str, str] = {
    "policy": "--policy",
    "cap_w": "--cap-w",
    "battery_wh": "--battery-wh",
    "hours": "--hours",
    "duration_s": "--until",
    "until": "--until",
    "rate_hz": "--rate-hz",
    "clock_mhz": "--clock",
    "scope": "--scope",
}


def policy_from_options(
    spec: Dict[str, Any], flags: Optional[Dict[str, str]] = None, *, defaulted: bool = False
) -> Any:
    """The policy of ``spec`` (from :func:`policy_spec`); a spec that names no policy (a
    required option missing, two that exclude each other, one of another policy) is a usage
    error naming the options (``flags``, default :data:`POLICY_FLAGS`), exit code 2;
    ``defaulted``: the policy was not given (the message says it is the default).

    Raises:
        OptionValueError: the options do not make a policy.
        InvalidRequestError: a value out of range (the options' own checks catch most).
    """
    from governor.runtime import policies

    names = POLICY_FLAGS if flags is None else flags
    problem = policies.spec_problem(spec, names.get)
    if problem is not None:
        if defaulted and "not apply" in problem:
            problem += f" (the default policy is {spec.get('policy')}; pick one with --policy)"
        raise values.OptionValueError(problem)
    return policies.from_spec(spec)


def run_command(
    command: Annotated[List[str], typer.Argument(help="The command to run, after --.")],
    device: DeviceOpt = "auto",
    policy: Annotated[
        Optional[str],
        typer.Option(
            "--policy", help="ppw (the default), max, power-cap, battery, throughput or clock."
        ),
    ] = None,
    cap_w: CapOpt = None,
    battery_wh: BatteryOpt = None,
    hours: HoursOpt = None,
    rate_hz: RateOpt = None,
    clock: ClockOpt = None,
    interval_s: IntervalOpt = 0.1,
    scope: ScopeOpt = None,
    until: UntilOpt = None,
    json_out: RunJsonOpt = False,
    json_file: JsonOutOpt = None,
    job_stdout: JobStdoutOpt = None,
    kernel: Annotated[
        Optional[str],
        typer.Option(
            "--kernel",
            help="With --policy ppw: the PPW clock of this library kernel at its tuned "
            "configuration (governor kernels table --save), else the board's.",
        ),
    ] = None,
    mem_clock: Annotated[
        Optional[float],
        typer.Option(
            "--mem-clock",
            callback=values.number(gt=0, le=100000.0, unit="MHz"),
            help="Pin the memory clock (MHz, snapped to the device's memory clocks) for the "
            "job; journaled and restored like the GPU clock. The policy governs the core clock.",
        ),
    ] = None,
) -> int:
    """Apply a policy, run CMD, restore the device, print an energy report.

    The job's stdout and stderr pass through untouched; the report goes to stderr, to a
    file (--json-out FILE), or to stdout (--json) when the job's stdout goes to a file
    (--stdout FILE): never mixed with the job's output."""
    quiet_runtime_log()
    plan = _validate(
        command,
        policy_spec(policy or "ppw", cap_w, battery_wh, hours, rate_hz, clock, scope, until),
        json_out=json_out,
        json_file=json_file,
        job_stdout=job_stdout,
        kernel=kernel,
        defaulted=policy is None,
    )
    plan.mem_clock_mhz = mem_clock
    code, docs = _govern_job(plan, device, interval_s)
    _report(plan, code, docs)
    raise typer.Exit(code)


class _RunPlan:
    """What ``run`` was asked, checked before any device is opened."""

    def __init__(
        self,
        command: List[str],
        policy: Any,
        battery: Any,
        json_out: bool,
        json_file: Optional[str],
        out_stream: Any,
        kernel: Optional[str] = None,
    ) -> None:
        self.command = command
        self.policy = policy
        self.battery = battery
        self.json_out = json_out
        self.json_file = json_file
        self.out_stream = out_stream
        self.kernel = kernel
        #: --mem-clock: pinned through the device before the governor starts
        self.mem_clock_mhz: Optional[float] = None
        #: the devices whose memory clock the run set (--mem-clock, or the PPW pair's)
        self.mem_set: set = set()


def _validate(
    command: List[str],
    spec: Dict[str, Any],
    *,
    json_out: bool,
    json_file: Optional[str],
    job_stdout: Optional[str],
    kernel: Optional[str] = None,
    defaulted: bool = False,
) -> _RunPlan:
    """The policy, the battery it reads and the output streams, or a usage error, before
    anything runs or any device is touched."""
    from governor.runtime import policies

    usage = values.OptionValueError
    pol = policy_from_options(spec, defaulted=defaulted)
    if policies.POLICIES[pol.name].ticks:
        raise usage(
            "--policy throughput needs the app to report progress with gov.tick(); "
            "use the Python API"
        )
    if kernel is not None:
        from governor.kernels.mapping import find_template

        if pol.name != policies.MaxEfficiency.name:
            raise usage("--kernel goes with --policy ppw")
        find_template(kernel)  # an unknown kernel is one line naming the known ones
    if not command:
        raise usage("no command to run: governor run [options] -- CMD ...")
    battery = None
    if pol.budget_scope is not None:  # a battery's (throughput, the other, was refused)
        from governor.runtime.battery import find_battery

        battery = find_battery()  # the real battery, when the machine has one
        if battery is None and pol.budget_j is None:
            raise usage(
                "the battery policy needs --battery-wh: no battery found under "
                "/sys/class/power_supply"
            )
        if battery is not None:
            sys.stderr.write(
                f"governor: reading battery {battery.name} "
                f"({battery.remaining_j() / 3600.0:.1f} Wh left)\n"
            )
    if json_out and job_stdout is None:
        raise typer.BadParameter(
            "--json would mix the report with the job's output on stdout; write it to a file "
            "with --json-out FILE, or send the job's output elsewhere with --stdout FILE",
            param_hint="--json",
        )
    out_stream = _open_output(job_stdout, "--stdout") if job_stdout is not None else None
    if json_file is not None:  # writable? the report is written there once the job ends
        _open_output(json_file, "--json-out").close()
    return _RunPlan(command, pol, battery, json_out, json_file, out_stream, kernel)


def _govern_job(plan: _RunPlan, device: str, interval_s: float) -> Tuple[int, List[Dict[str, Any]]]:
    """Open the devices, govern each while the job runs, restore them. Returns the job's
    exit code and one report per device."""
    import contextlib

    from governor.devices.base import WorkloadDevice
    from governor.devices.registry import last_auto_note, open_device, resolve_uris
    from governor.runtime import Governor
    from governor.timebase import WallClock

    uris = resolve_uris(device)
    with contextlib.ExitStack() as stack:
        devs = []
        for uri in uris:
            dev = open_device(uri, clock=WallClock())  # a real command runs in real time
            stack.callback(dev.close)
            devs.append(dev)
        note = last_auto_note() if device == "auto" else None
        if note:
            sys.stderr.write(f"governor: {note}; its compute load runs in real time\n")
        wanted_mhz = plan.policy.requested_clock_mhz
        for dev in devs:  # a unit slip is refused as apply refuses it, before any change
            if wanted_mhz is not None:
                values.check_clock_scale(wanted_mhz, dev.supported_clocks_mhz(), dev.uri)
        mem_clocks = [_job_mem_clock(dev, plan) for dev in devs]
        govs = []
        for dev in devs:
            gov = Governor(
                dev,
                _device_policy(plan, dev),
                interval_s=interval_s,
                handle_signals=False,
                battery=plan.battery,
            )
            govs.append(_NoteEcho(gov))
        for dev in devs:
            if isinstance(dev, WorkloadDevice):  # a simulated board runs its compute load
                dev.run_workload("compute")
                stack.callback(dev.stop_workload)
        restore_failed: Dict[str, str] = {}
        for echo in govs:
            echo.gov.start()  # each takes its device; all are restored on the way out
            stack.callback(_stop, echo.gov, restore_failed)
            echo()  # what it found when it took the device
        if plan.out_stream is not None:
            stack.callback(plan.out_stream.close)
        code = _run_child(plan.command, stdout=plan.out_stream)
        for echo in govs:  # close the last interval at the job's exit: a job shorter than
            _stop(echo.gov, restore_failed)  # one period is metered from start to exit, not 0 J
            echo()  # what it could not meet during the job (a budget run out, a cap too low)
        reports = [(echo.gov.device, echo.gov.report()) for echo in govs]
    for (dev, report), echo in zip(reports, govs):
        if report["device_lost"] is not None and not echo.told(report["device_lost"]):
            how = "stopped answering" if "not responding" in report["device_lost"] else "was lost"
            sys.stderr.write(f"governor: {dev.uri} {how} during the job: {report['device_lost']}\n")
        if dev.uri in restore_failed:
            sys.stderr.write(f"governor: {restore_failed[dev.uri]}\n")
    docs = [
        {
            "exit_code": code,
            "duration_s": report["duration_s"],
            "energy_j": report["energy_j"],
            "mean_power_w": report["mean_power_w"],
            "policy": plan.policy.name,
            "mean_clock_mhz": report["mean_clock_mhz"],
            "mem_clock_mhz": _mean_mem_clock(report, mem_mhz),
            "max_power_w": report["max_power_w"],
            "board_energy_j": report["board_energy_j"],
            "device": dev.uri,
            "simulated": dev.identity.kind == "sim",
            "notes": echo.gov.notes,
            "unmet": echo.gov.state().unmet,
            "device_lost": report["device_lost"],
            "restore_failed": restore_failed.get(dev.uri),
            "transient_retries": report["transient_retries"],
        }
        for (dev, report), echo, mem_mhz in zip(reports, govs, mem_clocks)
    ]
    return code, docs


def _mean_mem_clock(report: Dict[str, Any], start_mhz: Optional[float]) -> Optional[float]:
    """The memory clock's mean over the job (MHz, to 0.1 as ``simulate --json`` gives it):
    the governor's meter's, where the device read one in its periods; else the memory clock
    at the start (``start_mhz``; None where the device reads none)."""
    mean = report.get("mean_mem_clock_mhz")
    return round(mean, 1) if mean is not None else start_mhz


def _job_mem_clock(dev: Any, plan: _RunPlan) -> Optional[float]:
    """The memory clock of the job on ``dev`` (see :func:`_pin_mem_clock`): ``--mem-clock``
    where given (a governed policy then governs the core clock alone); for the PPW policy
    without it, the memory clock of the profile's (core, memory) pair, whose core clock the
    policy's controller then holds; else the memory clock as it is."""
    from governor.runtime import policies

    if plan.mem_clock_mhz is None and plan.policy.name == policies.MaxEfficiency.name:
        from governor.runtime.model import core_table_at, model_for_device, ppw_pair_for

        model = model_for_device(dev, None, plan.policy.model_workload).model
        pair, note = ppw_pair_for(dev, model)
        table = core_table_at(dev, pair[1]) if pair is not None else ()
        if pair is not None and table and table != tuple(dev.supported_clocks_mhz()):
            # the model and the profile's checks are of the core clocks offered now
            note = (
                f"the profile's PPW pair ({pair[0]:g} MHz core, {pair[1]:g} MHz memory) is "
                f"set by 'governor apply ppw'; governor run cannot hold it on {dev.uri}, whose "
                f"core clocks change with its memory clock: the core clock alone at "
                f"{model.ppw_clock_mhz:g} MHz"
            )
            pair = None
        if note:
            sys.stderr.write(f"governor: {note}\n")
        if pair is not None:  # the controller says the pair once it holds it
            plan.mem_set.add(dev.uri)
            return _pin_mem_clock(dev, pair[1])
    if plan.mem_clock_mhz is not None:
        plan.mem_set.add(dev.uri)
    return _pin_mem_clock(dev, plan.mem_clock_mhz)


def _pin_mem_clock(dev: Any, wanted_mhz: Optional[float]) -> Optional[float]:
    """Lock ``dev``'s memory clock at the supported clock nearest ``wanted_mhz`` (journaled,
    restored when the device closes) and return it; without ``--mem-clock``, the memory clock
    the device reads now (None where it reads none). Nothing changes it during the job."""
    if wanted_mhz is None:
        from governor.errors import GovernorError

        try:
            return dev.sample().mem_clock_mhz
        except GovernorError:  # a report field, never a reason to fail the job
            return None
    from governor.cli.apply import _mem_clock

    notes: List[str] = []
    mhz = _mem_clock(dev, wanted_mhz, notes)  # one line on stderr when snapped
    return dev.lock_mem_clock(mhz)


class _NoteEcho:
    """Says a governor's notes on stderr as they come, each once (call it to say the new)."""

    def __init__(self, gov: Any) -> None:
        self.gov = gov
        self.said = 0
        self()

    def __call__(self) -> None:
        for text in self.gov.notes[self.said :]:
            typer.echo(f"governor: {text}", err=True)
        self.said = len(self.gov.notes)

    def told(self, text: str) -> bool:
        """Whether a note already said ``text`` on stderr."""
        return any(text in note for note in self.gov.notes[: self.said])


def _stop(gov: Any, restore_failed: Dict[str, str]) -> None:
    """Stop ``gov`` and restore its device; a restore that fails is kept in
    ``restore_failed`` (its settings stay journaled for ``governor reset``), not raised: the
    job's exit code is the run's."""
    from governor.errors import GovernorError

    try:
        gov.stop()
    except GovernorError as err:
        restore_failed[gov.device.uri] = str(err)


def _device_policy(plan: _RunPlan, dev: Any) -> Any:
    """The plan's policy; with ``--kernel``, the PPW clock of that kernel on ``dev``'s board
    where its profile has a table (said on stderr either way)."""
    if plan.kernel is None:
        return plan.policy
    from governor.profiles.profile import board_key
    from governor.runtime import policies
    from governor.runtime.kernel_config import kernel_ppw_policy

    spec, why = kernel_ppw_policy(board_key(dev), plan.kernel)
    typer.echo(f"governor: {why}", err=True)
    return policies.from_spec(spec)


def _report(plan: _RunPlan, code: int, docs: List[Dict[str, Any]]) -> None:
    """The energy report: on stderr, to ``--json-out FILE``, or on stdout (``--json``)."""
    if len(docs) == 1:
        doc = docs[0]
    else:
        energies = [d["energy_j"] for d in docs]
        duration = max(d["duration_s"] for d in docs)
        total = sum(energies) if all(e is not None for e in energies) else None
        doc = {
            "exit_code": code,
            "duration_s": duration,
            "energy_j": total,
            "mean_power_w": total / duration if total is not None and duration > 0 else None,
            "policy": plan.policy.name,
            "mean_clock_mhz": None,
            "max_power_w": None,
            "board_energy_j": None,
            "device": ",".join(d["device"] for d in docs),
            "simulated": any(d["simulated"] for d in docs),
            "notes": [n for d in docs for n in d["notes"]],
            "unmet": [n for d in docs for n in d["unmet"]],
            "device_lost": next((d["device_lost"] for d in docs if d["device_lost"]), None),
            "restore_failed": next(
                (d["restore_failed"] for d in docs if d["restore_failed"]), None
            ),
            "transient_retries": sum(d["transient_retries"] for d in docs),
            "devices": docs,
        }
    if plan.json_file is not None:
        import json

        from governor.cli.common import to_jsonable

        with open(plan.json_file, "w", encoding="utf-8") as f:
            f.write(json.dumps(to_jsonable(doc)) + "\n")
    if plan.json_out:
        emit_json(doc)
    if not plan.json_out and plan.json_file is None:

        def show(value: Any, unit: str, spec: str) -> str:
            return "-" if value is None else f"{value:{spec}} {unit}"

        for d in docs:
            sys.stderr.write(
                f"governor: {plan.policy.describe()} on {d['device']}: "
                f"{show(d['duration_s'], 's', '.2f')}, "
                f"{show(d['energy_j'], 'J', '.1f')}, mean {show(d['mean_power_w'], 'W', '.1f')} at "
                f"{show(d['mean_clock_mhz'], 'MHz', '.0f')}"
                + (
                    f", memory {d['mem_clock_mhz']:g} MHz"
                    if d["device"] in plan.mem_set and d["mem_clock_mhz"] is not None
                    else ""
                )
                + (
                    f" (board {d['board_energy_j']:.1f} J)"
                    if d["device"] in plan.mem_set and d["board_energy_j"] is not None
                    else ""
                )
                + f"; exit code {code}"
                + (
                    f"; {d['transient_retries']} driver call(s) retried after a transient error"
                    if d["transient_retries"]
                    else ""
                )
                + "\n"
            )


def quiet_runtime_log() -> None:
    """The commands print the governor's notes themselves: keep the log from repeating them."""
    import logging

    logger = logging.getLogger("governor.runtime")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())


def _open_output(path: str, option: str) -> Any:
    """Open ``path`` for writing before the job starts, so a bad path fails first."""
    try:
        return open(path, "wb")  # noqa: SIM115 - closed by the caller's exit stack
    except OSError as err:
        raise typer.BadParameter(
            f"cannot write {path}: {err.strerror or err}", param_hint=option
        ) from None


def _run_child(command: List[str], stdout: Any = None) -> int:
    """Run ``command``, forwarding SIGINT/SIGTERM to it; its exit code (128+N if killed).
    Its stdout goes to ``stdout`` when given; stdin and stderr are inherited untouched."""
    try:
        child = subprocess.Popen(command, stdout=stdout)
    except FileNotFoundError:
        sys.stderr.write(f"governor: error: command not found: {command[0]}\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"governor: error: command not executable: {command[0]}\n")
        return 126
    except OSError as err:
        sys.stderr.write(f"governor: error: cannot run {command[0]}: {err.strerror or err}\n")
        return 126

    def forward(signum: int, frame: Any) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    return 128 - code if code < 0 else code
