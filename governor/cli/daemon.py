"""``governor daemon``: run the root daemon, or ask it for something as an unprivileged user.

- ``governor daemon --config FILE``          run the daemon (root; ``--test-mode`` otherwise)
- ``governor daemon --config FILE --check``  validate the config and print it
- ``governor daemon status``                 what the daemon serves and each device's state
- ``governor daemon apply ppw|max``          apply a profile policy through the daemon
- ``governor daemon lock --min-mhz F [--max-mhz F]``  lock within the site's limits
- ``governor daemon reset``                  restore, and resume the site's policy
"""

from __future__ import annotations

import enum
import logging
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json

SocketOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--socket",
        envvar="GOVERNOR_DAEMON_SOCKET",
        help="The daemon's socket (default /run/governor/governor.sock).",
    ),
]
TargetOpt = Annotated[
    Optional[str],
    typer.Option(
        "--device", "-d", help="Device URI as the daemon names it (optional if it serves one)."
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout-s",
        callback=values.number(ge=0.1, le=600.0, unit="seconds"),
        help="Give up after this many seconds.",
    ),
]


class ClientPolicy(str, enum.Enum):
    ppw = "ppw"
    max = "max"


def register(app: typer.Typer) -> None:
    daemon_app = typer.Typer(
        help="Run the governor daemon (root), or ask it to change clocks as an unprivileged user.",
        add_completion=False,
    )
    daemon_app.callback(invoke_without_command=True)(daemon)
    daemon_app.command("status")(status)
    daemon_app.command("apply")(apply)
    daemon_app.command("lock")(lock)
    daemon_app.command("reset")(reset)
    app.add_typer(daemon_app, name="daemon")


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("governor")
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


def daemon(
    ctx: typer.Context,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            "-c",
            envvar="GOVERNOR_DAEMON_CONFIG",
            help="The daemon's TOML config (see deploy/governor-daemon.toml).",
        ),
    ] = None,
    test_mode: Annotated[
        bool,
        typer.Option(
            "--test-mode",
            help="Allow running without root, with a socket under the temporary directory.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Validate the config, open (read only) every device it names, print it and exit.",
        ),
    ] = False,
    log_level: Annotated[
        str, typer.Option("--log-level", help="debug, info, warning or error.")
    ] = "info",
    json_out: JsonOpt = False,
) -> None:
    """Run the daemon: enforce the configured policy and serve the allow-listed actions."""
    if ctx.invoked_subcommand is not None:
        return
    if config is None:
        raise typer.BadParameter(
            "--config FILE is required to run the daemon (clients use: governor daemon status|apply|lock|reset)",
            param_hint="--config",
        )
    from governor.runtime.daemon.config import check_may_start, load_config

    cfg = load_config(config)
    if check:
        from governor.runtime.daemon.server import check_devices

        opened = check_devices(cfg)  # opens what the config names, as the daemon would
        if json_out:
            emit_json({"config": str(config), **cfg.to_dict(), "opened": opened})
        else:
            devices = ", ".join(
                f"{d['uri']} ({d['name']}, clients {d['limits_mhz'][0]:g}-"
                f"{d['limits_mhz'][1]:g} MHz)"
                for d in opened
            )
            typer.echo(f"{config}: valid; socket {cfg.socket}; devices {devices}")
        return
    check_may_start(cfg, test_mode=test_mode)
    _setup_logging(log_level)
    from governor.runtime.daemon.server import run_daemon

    raise typer.Exit(run_daemon(cfg))


def _client(socket: Optional[Path], timeout_s: float) -> Any:
    from governor.devices.daemon.client import DaemonClient

    return DaemonClient(socket, timeout_s=timeout_s)


def _clocks(applied: Dict[str, Any]) -> str:
    clocks = applied.get("gpu_clocks_mhz") or []
    if len(clocks) == 2 and clocks[0] == clocks[1]:
        return f"{clocks[0]:g} MHz"
    return "-".join(f"{c:g}" for c in clocks) + " MHz"


def status(
    device: TargetOpt = None,
    socket: SocketOpt = None,
    timeout_s: TimeoutOpt = 5.0,
    json_out: JsonOpt = False,
) -> None:
    """Ask the daemon what it serves and the state of each device."""
    result = _client(socket, timeout_s).request("status", device=device)
    if json_out:
        emit_json(result)
        return
    info = result.get("daemon", {})
    typer.echo(
        f"governor daemon {info.get('version')} (pid {info.get('pid')}) on {info.get('socket')}; "
        f"allowed: {', '.join(info.get('allow', []))}"
    )
    for dev in result.get("devices", []):
        typer.echo(f"  {_device_line(dev)}")


def _policy_text(policy: Dict[str, Any]) -> str:
    """``power-cap (cap_w 150)`` from a policy spec."""
    name = policy.get("policy", "none")
    rest = ", ".join(
        f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
        for k, v in policy.items()
        if k != "policy"
    )
    return f"{name} ({rest})" if rest else str(name)


def _device_line(dev: Dict[str, Any]) -> str:
    """One device of ``status``: its clock and who set it (a client, or the site's policy),
    the limits the site gives clients, and the site's policy."""
    state = dev.get("state") or {}
    locked = state.get("gpu_clocks_mhz")
    clock = _clocks({"gpu_clocks_mhz": locked}) if locked else "not locked"
    site = _policy_text(dev.get("policy") or {})
    override = dev.get("client_override")
    if override:
        clock += f" (set by uid {override.get('by_uid')}, a client)"
    elif locked and dev.get("enforcing"):
        clock += " (set by the site policy, which the client limits do not bind)"
    lo, hi = dev.get("limits_mhz") or (None, None)
    limits = f"{lo:g}-{hi:g} MHz" if lo is not None and hi is not None else "none"
    line = f"{dev.get('uri')}: GPU clock {clock}; clients may lock {limits}; site policy {site}"
    if dev.get("policy_error"):
        line += f"; policy error: {dev['policy_error']}"
    return line


def apply(
    policy: Annotated[
        ClientPolicy, typer.Argument(help="ppw (the profile's PPW-optimal clock) or max.")
    ],
    device: TargetOpt = None,
    socket: SocketOpt = None,
    timeout_s: TimeoutOpt = 5.0,
    json_out: JsonOpt = False,
) -> None:
    """Ask the daemon to apply a profile policy to a device."""
    result = _client(socket, timeout_s).request("apply", device=device, policy=policy.value)
    if json_out:
        emit_json(result)
        return
    applied = result.get("applied", {})
    typer.echo(
        f"{result.get('device')}: {policy.value} applied, GPU clock locked to {_clocks(applied)}"
    )


def lock(
    min_mhz: Annotated[
        float,
        typer.Option(
            "--min-mhz",
            callback=values.policy_number("clock_mhz"),
            help="Lowest GPU clock (MHz).",
        ),
    ],
    max_mhz: Annotated[
        Optional[float],
        typer.Option(
            "--max-mhz",
            callback=values.policy_number("clock_mhz"),
            help="Highest GPU clock (MHz); default min.",
        ),
    ] = None,
    device: TargetOpt = None,
    socket: SocketOpt = None,
    timeout_s: TimeoutOpt = 5.0,
    json_out: JsonOpt = False,
) -> None:
    """Ask the daemon to lock the GPU clock within the site's limits."""
    result = _client(socket, timeout_s).request(
        "lock", device=device, min_mhz=min_mhz, max_mhz=max_mhz
    )
    if json_out:
        emit_json(result)
        return
    typer.echo(f"{result.get('device')}: GPU clock locked to {_clocks(result.get('applied', {}))}")


def reset(
    device: TargetOpt = None,
    socket: SocketOpt = None,
    timeout_s: TimeoutOpt = 5.0,
    json_out: JsonOpt = False,
) -> None:
    """Ask the daemon to restore a device and resume the site's policy."""
    result = _client(socket, timeout_s).request("reset", device=device)
    if json_out:
        emit_json(result)
        return
    restored = result.get("restored") or {}
    what = ", ".join(f"{k}={v}" for k, v in restored.items()) or "nothing to restore"
    typer.echo(f"{result.get('device')}: reset ({what}); policy {result.get('policy')}")
