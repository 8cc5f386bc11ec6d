"""governor on ROS 2: a node, ROS-native telemetry and MCAP recordings.

``governor ros2 --device URI --policy ...`` runs :class:`GovernorNode` (named ``governor``;
remap and set parameters with ``--ros-args``); an app can instead add
``GovernorNode(device, policy)`` to its own executor. The node publishes ``/diagnostics``
(``diagnostic_msgs/DiagnosticArray``), ``~/battery`` (``sensor_msgs/BatteryState``) and
``~/power`` (``std_msgs/Float64``), takes the parameters ``policy``, ``cap_w``,
``battery_wh``, ``hours``, ``rate_hz``, ``clock_mhz`` and ``scope``, the services
``~/reset`` and ``~/apply_ppw`` (``std_srvs/Trigger``), and counts frames from ``~/tick``
or an app's topic. See docs/robotics.md.

Nothing here imports rclpy until :class:`GovernorNode` is used, so ``import governor`` stays
fast; :mod:`governor.ros2.telemetry` and :mod:`governor.ros2.recording` work without ROS.
"""

from __future__ import annotations

from typing import Any

__all__ = ["INSTALL_HINT", "GovernorNode", "import_rclpy"]

INSTALL_HINT = (
    "governor ros2 needs ROS 2's rclpy, which this Python cannot import: "
    "pip install 'gpu-governor[ros2]' (Python 3.10+, ROS 2 Jazzy wheels), "
    "or source your ROS 2 install first (source /opt/ros/humble/setup.bash)"
)


def import_rclpy() -> Any:
    """rclpy, or a one-line :class:`~governor.errors.GovernorError` saying what to install."""
    from governor.errors import GovernorError

    try:
        import rclpy
    except ImportError:
        raise GovernorError(INSTALL_HINT) from None
    return rclpy


def __getattr__(name: str) -> Any:
    if name == "GovernorNode":
        import_rclpy()
        from governor.ros2.node import GovernorNode

        return GovernorNode
    raise AttributeError(f"module 'governor.ros2' has no attribute {name!r}")
