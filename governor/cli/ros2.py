"""``governor ros2``: run the governor as a ROS 2 node until Ctrl-C or SIGTERM.

Everything after ``--ros-args`` goes to ROS (remapping, namespace, parameter files). The node
holds the device like ``governor run`` and restores it on SIGINT, SIGTERM or ROS shutdown,
then exits 0. On ``sim:NAME`` the board runs its compute workload in real time.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import typer

from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json
from governor.cli.run import (
    POLICY_FLAGS,
    BatteryOpt,
    CapOpt,
    ClockOpt,
    HoursOpt,
    IntervalOpt,
    RateOpt,
    policy_from_options,
    policy_spec,
    quiet_runtime_log,
)

POLL_S = 0.1  # how often the main loop looks at the stop flag between executor turns


def register(app: typer.Typer) -> None:
    app.command(
        "ros2",
        context_settings={
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "allow_interspersed_args": False,
        },
    )(ros2_command)


def ros2_command(
    ctx: typer.Context,
    device: DeviceOpt = "auto",
    policy: Annotated[
        str,
        typer.Option("--policy", help="ppw, max, power-cap, battery, throughput, clock or none."),
    ] = "ppw",
    cap_w: CapOpt = None,
    battery_wh: BatteryOpt = None,
    hours: HoursOpt = None,
    rate_hz: RateOpt = None,
    clock: ClockOpt = None,
    interval_s: IntervalOpt = 0.1,
    tick_topic: Annotated[
        Optional[str],
        typer.Option(
            "--tick-topic",
            help="Count one frame per message on this topic of the app's (throughput policy).",
        ),
    ] = None,
    battery: Annotated[
        Optional[str],
        typer.Option(
            "--battery",
            help="Report (and budget from) a real battery: 'sysfs' or 'sysfs:NAME' "
            "(/sys/class/power_supply).",
        ),
    ] = None,
    mcap: Annotated[
        Optional[Path],
        typer.Option("--mcap", help="Also record the published messages to this MCAP file."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Run the governor as a ROS 2 node (topics, parameters, services; see docs/robotics.md).

    Pass ROS arguments after --ros-args, e.g. --ros-args -r __ns:=/robot1 -p cap_w:=12.
    """
    import contextlib

    from governor.devices.registry import open_device, resolve_uris
    from governor.errors import InvalidRequestError
    from governor.ros2 import import_rclpy
    from governor.timebase import WallClock

    ros_args = list(ctx.args)
    if ros_args and ros_args[0] != "--ros-args":
        raise typer.BadParameter(
            f"unexpected argument {ros_args[0]!r}; ROS arguments go after --ros-args"
        )
    rclpy = import_rclpy()
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from governor.ros2.node import GovernorNode

    quiet_runtime_log()
    if policy == "none":
        spec: Any = "none"
    else:
        spec = policy_spec(policy, cap_w, battery_wh, hours, rate_hz, clock)
        policy_from_options(spec, {k: v for k, v in POLICY_FLAGS.items() if v != "--until"})
    uris = resolve_uris(device)
    if len(uris) != 1:
        raise InvalidRequestError("governor ros2 governs one device; run one node per device")
    reader = _battery_reader(battery)

    stop: Dict[str, Any] = {"signal": None}

    def on_signal(signum: int, frame: Any) -> None:
        stop["signal"] = signum

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    context = Context()
    report: Dict[str, Any] = {}
    try:
        with contextlib.ExitStack() as stack:
            dev = open_device(uris[0], clock=WallClock())  # a node runs in real time
            stack.callback(dev.close)
            if dev.identity.kind == "sim":
                dev.run_workload("compute")  # type: ignore[attr-defined]
                stack.callback(dev.stop_workload)  # type: ignore[attr-defined]
            rclpy.init(
                args=["governor", *ros_args],
                context=context,
                signal_handler_options=SignalHandlerOptions.NO,
            )
            stack.callback(context.try_shutdown)
            node = GovernorNode(
                dev,
                spec,
                interval_s=interval_s,
                tick_topic=tick_topic,
                battery=reader,
                mcap=mcap,
                context=context,
            )
            stack.callback(node.destroy_node)
            typer.echo(
                f"governor: node {node.get_fully_qualified_name()} governs {dev.uri} "
                f"({node.policy_text()}); Ctrl-C to stop",
                err=True,
            )
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            stack.callback(executor.shutdown)
            while stop["signal"] is None and context.ok():
                executor.spin_once(timeout_sec=POLL_S)
            report = {
                "device": dev.uri,
                "node": node.get_fully_qualified_name(),
                "policy": node.policy_text(),
                "restored": node.stop(),
                "signal": stop["signal"],
                "recording": str(mcap) if mcap else None,
            }
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if json_out:
        emit_json(report)
    else:
        sys.stderr.write(f"governor: stopped; {report.get('device')} restored\n")


def _battery_reader(spec: Optional[str]) -> Any:
    """A SysfsBattery from ``--battery sysfs[:NAME]``; None without the option."""
    if spec is None:
        return None
    from governor.errors import InvalidRequestError
    from governor.runtime.battery import SysfsBattery

    kind, _, name = spec.partition(":")
    if kind != "sysfs":
        raise InvalidRequestError(f"--battery takes sysfs or sysfs:NAME, not {spec!r}")
    return SysfsBattery(name or None)
