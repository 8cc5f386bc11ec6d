"""The ROS 2 node: a :class:`~governor.runtime.Governor` driven by the node's own timers.

Imports rclpy (this module only; ``governor.ros2`` loads it on first use). Every device
access (the control step, telemetry, re-targeting, reset, stop) happens under
:attr:`GovernorNode.lock`, so the node works in single- and multi-threaded executors, and
context shutdown (Ctrl-C, SIGTERM, ``rclpy.shutdown()``) restores the device from whatever
thread it comes.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)
from sensor_msgs.msg import BatteryState
from std_msgs.msg import Float64
from std_srvs.srv import Trigger

from governor.errors import GovernorError, InvalidRequestError
from governor.ros2 import params as _params
from governor.ros2 import telemetry
from governor.runtime.floor_controller import FloorState
from governor.runtime.status import find_record

__all__ = ["GovernorNode", "import_message_type"]

log = logging.getLogger("governor.ros2")

#: /diagnostics: reliable, as diagnostic aggregators subscribe
DIAGNOSTICS_QOS = QoSProfile(
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
    history=HistoryPolicy.KEEP_LAST,
)
#: ~/battery: reliable, like battery drivers
BATTERY_QOS = DIAGNOSTICS_QOS
#: ~/tick and --tick-topic: best effort, which matches reliable and best-effort publishers
TICK_QOS = QoSProfile(
    depth=100,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
    history=HistoryPolicy.KEEP_LAST,
)
REPORT_PERIOD_S = 1.0

_DESCRIPTIONS = {
    "policy": f"{', '.join(_params.POLICIES[:-1])}, or none (device at its own settings)",
    "cap_w": "power-cap: the cap in W (0: not set)",
    "battery_wh": "battery: the energy budget in Wh (0: not set)",
    "hours": "battery: how long the budget must last, in hours (0: not set)",
    "rate_hz": "throughput: the frame rate to keep, in Hz (0: not set)",
    "clock_mhz": "clock: the GPU clock in MHz (0: not set)",
    "scope": "which power figure the policy governs ('': the device's own)",
}


def import_message_type(datatype: str) -> Any:
    """The rclpy message class of ``pkg/msg/Name``.

    Raises:
        InvalidRequestError: the name is malformed or its package cannot be imported (one line).
    """
    parts = datatype.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or not all(parts):
        raise InvalidRequestError(f"{datatype!r} is not a message type (pkg/msg/Name)")
    package, kind, name = parts
    try:
        module = importlib.import_module(f"{package}.{kind}")
        return getattr(module, name)
    except (ImportError, AttributeError) as err:
        raise InvalidRequestError(
            f"cannot import message type {datatype} ({type(err).__name__}: {err}); "
            f"install or source the package that defines it"
        ) from None


def _number(value: float) -> float:
    return float(value) if value is not None else math.nan


class GovernorNode(Node):
    """A node named ``governor`` (by default) that governs ``device`` with ``policy``.

    Publishes ``/diagnostics``, ``~/battery`` and ``~/power``; takes the parameters of
    :mod:`governor.ros2.params`, the services ``~/reset`` and ``~/apply_ppw``, and frames on
    ``~/tick`` (and ``tick_topic``). The device is taken at once (its lock and a journal
    layer) and restored by :meth:`stop`, :meth:`destroy_node` or context shutdown.

    Args:
        device: an open device on the wall clock (a simulated board opened with
            ``?realtime=1`` or ``clock=WallClock()``); the node does not close it.
        policy: a policy, a spec dictionary or a name; ROS parameter overrides
            (``--ros-args -p cap_w:=12``) take precedence.
        interval_s: the control period (``~/power`` is published once per period).
        tick_topic: a topic of the app's whose every message is one frame (any type: looked
            up from the running graph and subscribed best effort).
        battery: a real battery to report on ``~/battery`` (and read by the battery policy),
            e.g. :class:`governor.runtime.battery.SysfsBattery`.
        mcap: a path to record the published messages to (see :mod:`governor.ros2.recording`).
        profile: the board profile, as for :class:`~governor.runtime.Governor`.

    Raises:
        InvalidRequestError: a virtual-clock device, or bad parameters (one line).
        DeviceBusyError: another governor holds the device.
    """

    def __init__(
        self,
        device: Any,
        policy: Union[None, str, Mapping[str, Any], Any] = "ppw",
        *,
        node_name: str = "governor",
        interval_s: float = 0.1,
        tick_topic: Optional[str] = None,
        battery: Any = None,
        mcap: Any = None,
        profile: Any = None,
        **node_kwargs: Any,
    ) -> None:
        if device.clock.virtual:
            raise InvalidRequestError(
                f"{device.uri} runs on virtual time, which a ROS node's timers never advance: "
                "open it with ?realtime=1 (or clock=WallClock())"
            )
        defaults = _params.from_policy(policy)
        super().__init__(node_name, **node_kwargs)
        self.device = device
        #: held around every use of the device; hold it to read the device from another thread
        self.lock = threading.RLock()
        self.interval_s = float(interval_s)
        self.governor: Any = None
        self.notes: List[str] = []
        self._battery = battery
        self._profile = profile
        self._values: Dict[str, Any] = {}
        self._error: Optional[str] = None
        self._stopped = False
        self._owns = False
        self._recorder: Any = None
        self._tick_topic = tick_topic
        self._tick_sub: Any = None
        self._tick_timer: Any = None
        self._ticks = 0
        self._seen_errors: Any = None
        self._group = MutuallyExclusiveCallbackGroup()
        try:
            for name, default in defaults.items():
                descriptor = ParameterDescriptor(
                    name=name, description=_DESCRIPTIONS[name], dynamic_typing=True
                )
                self.declare_parameter(name, default, descriptor)
            values = {
                name: self.get_parameter(name).value for name in _params.DEFAULTS
            }  # with --ros-args overrides
            pol, notes = _params.make_policy(values)
            self._values = {k: _params.check_value(k, v) for k, v in values.items()}
            if mcap is not None:
                from governor.ros2.recording import Recorder

                self._recorder = Recorder(mcap)
            device.acquire(command=f"governor ros2 node {self.get_fully_qualified_name()}")
            self._owns = True
            self._start_governor(pol)
            self._note_all(notes)
            group = self._group
            self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS)
            self._battery_pub = self.create_publisher(BatteryState, "~/battery", BATTERY_QOS)
            self._power_pub = self.create_publisher(Float64, "~/power", qos_profile_sensor_data)
            self.create_subscription(
                Float64, "~/tick", self._on_tick, TICK_QOS, callback_group=group
            )
            self.create_service(Trigger, "~/reset", self._on_reset, callback_group=group)
            self.create_service(Trigger, "~/apply_ppw", self._on_apply_ppw, callback_group=group)
            self.create_timer(self.interval_s, self._control, callback_group=group)
            self.create_timer(REPORT_PERIOD_S, self._report, callback_group=group)
            self.add_on_set_parameters_callback(self._on_set_parameters)
            self.context.on_shutdown(self._on_context_shutdown)
            if tick_topic and not self._subscribe_ticks():  # an unimportable type raises
                self.get_logger().info(f"waiting for {self._resolved_tick_topic()} to appear")
                self._tick_timer = self.create_timer(1.0, self._retry_ticks, callback_group=group)
        except BaseException:  # nothing half-made: the device is restored and let go
            self._teardown()
            super().destroy_node()
            raise

    # -- the governor ------------------------------------------------------------------
    def _note_all(self, notes: List[str]) -> None:
        for text in notes:
            if text not in self.notes:
                self.notes.append(text)
                self.get_logger().warning(text)

    def _new_governor(self, pol: Any) -> Any:
        from governor.runtime import Governor

        gov = Governor(
            self.device,
            pol,
            profile=self._profile,
            interval_s=self.interval_s,
            background=False,
            battery=self._battery,
            handle_signals=False,
        )
        return gov

    def _start_governor(self, pol: Any) -> None:
        """Govern with ``pol`` (None: stop governing; the device returns to its settings)."""
        with self.lock:
            if pol is not None and self.governor is not None:
                # the running governor changes policy in place: the device is not restored
                # and taken again between the two, and the run's meter goes on
                before = len(self.governor.notes)
                self.governor.set_policy(pol)  # a bad policy raises; the old one is kept
                fresh = self.governor.notes[before:]
                self._note_all([f"{self.device.uri}: {text}" for text in fresh])
                return
            new = self._new_governor(pol) if pol is not None else None  # validates first
            old, self.governor = self.governor, None
            if old is not None:
                old.stop()
            if new is None:
                return
            try:
                new.start()
            except BaseException:
                if old is not None:  # keep the running policy when the new one cannot start
                    old.start()
                    self.governor = old
                raise
            self.governor = new
            self._note_all([f"{self.device.uri}: {text}" for text in new.notes])

    def policy_text(self) -> str:
        """What the node does now, in words (``power-cap 12 W``, ``none``)."""
        gov = self.governor
        return gov.policy.describe() if gov is not None else "none"

    # -- parameters --------------------------------------------------------------------
    def _on_set_parameters(self, parameters: List[Parameter]) -> SetParametersResult:
        changes: Dict[str, Any] = {}
        try:
            for p in parameters:
                if p.name not in _params.DEFAULTS:
                    continue
                if p.type_ == Parameter.Type.NOT_SET:
                    raise InvalidRequestError(f"{p.name} cannot be undeclared; 0 or '' unsets it")
                changes[p.name] = _params.check_value(p.name, p.value)
            if not changes:
                return SetParametersResult(successful=True)
            with self.lock:
                if self._stopped:
                    raise GovernorError("the node has stopped governing")
                values = dict(self._values, **changes)
                try:
                    pol, notes = _params.make_policy(values)
                except InvalidRequestError as err:
                    if "policy needs" in str(err):
                        raise InvalidRequestError(
                            f"{err} (set a policy and its numbers in one atomic call)"
                        ) from None
                    raise
                current = self.governor.policy if self.governor is not None else None
                if pol != current or (pol is not None and current is None):
                    self._start_governor(pol)
                    self.get_logger().info(f"now {self.policy_text()}")
                self._values = values
                self._note_all(notes)
        except (GovernorError, ValueError) as err:
            reason = " ".join(str(err).split())
            self.get_logger().warning(f"parameters rejected: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    # -- services ----------------------------------------------------------------------
    def _on_reset(self, request: Any, response: Any) -> Any:
        try:
            with self.lock:
                self._start_governor(None)
                restored = self.device.restore() if self._owns else {}
            result = self.set_parameters([Parameter("policy", Parameter.Type.STRING, "none")])[0]
            response.success = bool(result.successful)
            shown = ", ".join(f"{k}={v}" for k, v in sorted(restored.items())) or "nothing to undo"
            response.message = (
                f"restored {self.device.uri} ({shown}); not governing until policy is set"
                if result.successful
                else result.reason
            )
        except GovernorError as err:
            response.success, response.message = False, " ".join(str(err).split())
        return response

    def _on_apply_ppw(self, request: Any, response: Any) -> Any:
        result = self.set_parameters([Parameter("policy", Parameter.Type.STRING, "ppw")])[0]
        response.success = bool(result.successful)
        response.message = f"now {self.policy_text()}" if result.successful else result.reason
        return response

    # -- frames ------------------------------------------------------------------------
    def _on_tick(self, msg: Any) -> None:
        busy = msg.data
        busy_s = (
            float(busy) if isinstance(busy, float) and math.isfinite(busy) and busy > 0 else None
        )
        self._tick(busy_s)

    def _on_frame(self, msg: Any) -> None:
        self._tick(None)

    def _tick(self, busy_s: Optional[float]) -> None:
        with self.lock:
            self._ticks += 1
            if self.governor is not None:
                self.governor.tick(1.0, busy_s=busy_s)

    def _resolved_tick_topic(self) -> str:
        return self.resolve_topic_name(self._tick_topic or "")

    def _subscribe_ticks(self) -> bool:
        """Subscribe to the tick topic when the graph knows its type. Returns whether it did.

        Raises:
            InvalidRequestError: its type cannot be imported (one line).
        """
        topic = self._resolved_tick_topic()
        types = dict(self.get_topic_names_and_types()).get(topic)
        if not types:
            return False
        msg_type = import_message_type(types[0])
        self._tick_sub = self.create_subscription(
            msg_type, topic, self._on_frame, TICK_QOS, callback_group=self._group, raw=True
        )
        self.get_logger().info(f"counting frames on {topic} ({types[0]})")
        return True

    def _retry_ticks(self) -> None:
        try:
            done = self._subscribe_ticks()
        except InvalidRequestError as err:
            self._error = str(err)
            self.get_logger().error(str(err))
            done = True
        if done and self._tick_timer is not None:
            self._tick_timer.cancel()
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None

    # -- telemetry ---------------------------------------------------------------------
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _record(self, topic: str, datatype: str, message: Mapping[str, Any], ns: int) -> None:
        if self._recorder is not None:
            try:
                self._recorder.write(topic, datatype, message, ns)
            except Exception as err:  # a full disk must not stop the governor
                self.get_logger().error(f"recording stopped: {err}")
                self._recorder.close()
                self._recorder = None

    def _control(self) -> None:
        power: Optional[float] = None
        with self.lock:
            if self._stopped:
                return
            try:
                if self.governor is not None:
                    self.governor.update()
                    power = self.governor.state().power_w
                else:
                    power = self.device.sample().power_w
            except Exception as err:  # the loop must outlive one bad period
                self._error = f"control step failed: {type(err).__name__}: {err}"
                self.get_logger().error(self._error)
                return
        if power is None:
            return
        self._power_pub.publish(Float64(data=float(power)))
        self._record(self._power_pub.topic_name, telemetry.FLOAT64, {"data": power}, self._now_ns())

    def _report(self) -> None:
        with self.lock:
            if self._stopped:
                return
            sample = None
            error = self._error
            self._error = None
            try:
                sample = self.device.sample()
            except Exception as err:
                error = f"telemetry failed: {err}"
            gov = self.governor
            state = gov.state() if gov is not None else None
            records = gov.controller.records() if gov is not None else ()
            budget = gov.controller.budget_state() if gov is not None else None
            if state is not None:
                self._note_all([f"{self.device.uri}: {text}" for text in state.notes])
                if state.errors and state.errors != self._seen_errors:
                    self._seen_errors = state.errors
                    error = error or state.errors[-1]
            extra: List[Tuple[str, str]] = [("frames", str(self._ticks))]
            floor = find_record(records, FloorState)
            if floor is not None:  # a throughput battery floor
                extra.append(("admitted rate (Hz)", f"{floor.admitted_rate_hz:.3g}"))
            if self._values.get("scope"):
                extra.append(("scope", self._values["scope"]))
            if self.notes:
                extra.append(("notes", "; ".join(self.notes[-3:])))
            diag = telemetry.device_status(
                self.device,
                sample,
                policy=self.policy_text(),
                status=telemetry.governed(gov) if gov is not None else None,
                error=error,
                extra=extra,
            )
            ns = self._now_ns()
            if self._battery is not None and getattr(self._battery, "path", None) is not None:
                battery = telemetry.battery_from_sysfs(ns, self._battery.path)
            elif budget is not None:
                battery = telemetry.battery_from_budget(
                    ns,
                    budget_j=budget.budget_j,
                    remaining_j=budget.remaining_j,
                    power_w=state.power_w if state is not None else None,
                    voltage_v=telemetry.input_voltage_v(sample),
                )
            else:
                battery = telemetry.no_battery(ns)
        array = telemetry.diagnostic_array(ns, [diag])
        self._diag_pub.publish(_diagnostic_msg(array))
        self._battery_pub.publish(_battery_msg(battery))
        self._record("/diagnostics", telemetry.DIAGNOSTIC_ARRAY, array, ns)
        self._record(self._battery_pub.topic_name, telemetry.BATTERY_STATE, battery, ns)

    # -- ending ------------------------------------------------------------------------
    def _teardown(self) -> Dict[str, Any]:
        restored: Dict[str, Any] = {}
        with self.lock:
            self._stopped = True
            try:
                gov, self.governor = self.governor, None
                if gov is not None:
                    gov.stop()
                if self._owns:
                    self._owns = False
                    restored = self.device.release()
            finally:
                if self._recorder is not None:
                    self._recorder.close()
                    self._recorder = None
        return restored

    def stop(self) -> Dict[str, Any]:
        """Stop governing, restore the device and let it go (safe to repeat). Returns what
        the node's own layer restored."""
        return self._teardown()

    def _on_context_shutdown(self) -> None:
        try:
            self._teardown()
        except Exception as err:  # pragma: no cover - reported, the process is ending
            log.error("restoring %s on shutdown failed: %s", self.device.uri, err)

    def destroy_node(self) -> None:
        self._teardown()
        super().destroy_node()


def _diagnostic_msg(doc: Mapping[str, Any]) -> DiagnosticArray:
    msg = DiagnosticArray()
    msg.header.stamp.sec = doc["header"]["stamp"]["sec"]
    msg.header.stamp.nanosec = doc["header"]["stamp"]["nanosec"]
    msg.header.frame_id = doc["header"]["frame_id"]
    for s in doc["status"]:
        status = DiagnosticStatus(
            level=bytes([s["level"]]),
            name=s["name"],
            message=s["message"],
            hardware_id=s["hardware_id"],
            values=[KeyValue(key=kv["key"], value=kv["value"]) for kv in s["values"]],
        )
        msg.status.append(status)
    return msg


def _battery_msg(doc: Mapping[str, Any]) -> BatteryState:
    msg = BatteryState()
    msg.header.stamp.sec = doc["header"]["stamp"]["sec"]
    msg.header.stamp.nanosec = doc["header"]["stamp"]["nanosec"]
    msg.header.frame_id = doc["header"]["frame_id"]
    for key in (
        "voltage",
        "temperature",
        "current",
        "charge",
        "capacity",
        "design_capacity",
        "percentage",
    ):
        setattr(msg, key, _number(doc[key]))
    msg.power_supply_status = int(doc["power_supply_status"])
    msg.power_supply_health = int(doc["power_supply_health"])
    msg.power_supply_technology = int(doc["power_supply_technology"])
    msg.present = bool(doc["present"])
    msg.cell_voltage = [float(v) for v in doc["cell_voltage"]]
    msg.cell_temperature = [float(v) for v in doc["cell_temperature"]]
    msg.location = doc["location"]
    msg.serial_number = doc["serial_number"]
    return msg
