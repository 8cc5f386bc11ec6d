"""Helpers of the ROS 2 tests: bounded waits, a probe node, rclpy in its own context."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any, Callable, Dict, List, Optional

WAIT_S = 15.0  # the longest any single wait may take


def wait_for(condition: Callable[[], Any], timeout_s: float = WAIT_S, what: str = "condition"):
    """Poll ``condition`` until it is truthy (returned) or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.02)


class Probe:
    """A test node: subscribes to a governor node's three topics and calls its parameter
    services and Trigger services, as any ROS 2 client would."""

    def __init__(self, context: Any, namespace: str = "/governor") -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rcl_interfaces.srv import GetParameters, SetParameters, SetParametersAtomically
        from rclpy.node import Node
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import BatteryState
        from std_msgs.msg import Float64
        from std_srvs.srv import Trigger

        self.node = Node("probe", context=context)
        self.ns = namespace
        self.lock = threading.Lock()
        self.power: List[tuple] = []  # (receive time monotonic, W)
        self.diagnostics: List[Any] = []
        self.battery: List[Any] = []
        self.node.create_subscription(
            Float64, f"{namespace}/power", self._power, qos_profile_sensor_data
        )
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diag, 10)
        self.node.create_subscription(BatteryState, f"{namespace}/battery", self._battery, 10)
        self.set_atomic = self.node.create_client(
            SetParametersAtomically, f"{namespace}/set_parameters_atomically"
        )
        self.set_each = self.node.create_client(SetParameters, f"{namespace}/set_parameters")
        self.get = self.node.create_client(GetParameters, f"{namespace}/get_parameters")
        self.reset = self.node.create_client(Trigger, f"{namespace}/reset")
        self.apply_ppw = self.node.create_client(Trigger, f"{namespace}/apply_ppw")
        self.tick = self.node.create_publisher(Float64, f"{namespace}/tick", 10)

    def _power(self, msg: Any) -> None:
        with self.lock:
            self.power.append((time.monotonic(), msg.data))

    def _diag(self, msg: Any) -> None:
        with self.lock:
            self.diagnostics.append(msg)

    def _battery(self, msg: Any) -> None:
        with self.lock:
            self.battery.append(msg)

    def powers_between(self, t0: float, t1: float) -> List[float]:
        with self.lock:
            return [w for t, w in self.power if t0 <= t < t1]

    def last_status(self) -> Optional[Any]:
        with self.lock:
            for msg in reversed(self.diagnostics):
                for status in msg.status:
                    if status.name.startswith("governor: "):
                        return status
        return None

    def values(self) -> Dict[str, str]:
        status = self.last_status()
        return {kv.key: kv.value for kv in status.values} if status else {}

    def call(self, client: Any, request: Any, timeout_s: float = WAIT_S) -> Any:
        assert client.wait_for_service(timeout_sec=timeout_s), f"{client.srv_name} not offered"
        future = client.call_async(request)
        wait_for(future.done, timeout_s, f"a reply from {client.srv_name}")
        return future.result()

    def set_parameters(self, atomic: bool = True, **values: Any) -> List[Any]:
        """Set parameters through the node's real parameter services; the results."""
        from rcl_interfaces.srv import SetParameters, SetParametersAtomically
        from rclpy.parameter import Parameter

        params = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        if atomic:
            reply = self.call(self.set_atomic, SetParametersAtomically.Request(parameters=params))
            return [reply.result]
        return self.call(self.set_each, SetParameters.Request(parameters=params)).results

    def get_parameters(self, *names: str) -> Dict[str, Any]:
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python

        reply = self.call(self.get, GetParameters.Request(names=list(names)))
        return {n: parameter_value_to_python(v) for n, v in zip(names, reply.values)}

    def trigger(self, client: Any) -> Any:
        from std_srvs.srv import Trigger

        return self.call(client, Trigger.Request())


class Ros:
    """rclpy in its own context, with an executor spinning in a background thread."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.context = Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.nodes: List[Any] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="ros test executor", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.context.ok() and not self._stopping.is_set():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # shutdown under way
                if not self.context.ok():
                    return
                raise

    def add(self, node: Any) -> Any:
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def probe(self, namespace: str = "/governor") -> Probe:
        probe = Probe(self.context, namespace)
        self.add(probe.node)
        return probe

    def close(self) -> None:
        # Stop spinning and let the callbacks in flight finish before anything is destroyed:
        # a callback that meets a destroyed node or context leaves its exception in an rclpy
        # Future, which prints "never retrieved" to stderr whenever it is collected, maybe
        # inside a later test that reads stderr.
        self._stopping.set()
        self._thread.join(timeout=WAIT_S)
        self.executor.shutdown(timeout_sec=5)
        for node in self.nodes:
            try:
                node.destroy_node()
            except Exception:
                pass
        self.context.try_shutdown()
        # Whatever such Future a test left (one that shut the context down itself) is
        # collected now, inside this test's teardown, not in another test's stderr.
        gc.collect()
