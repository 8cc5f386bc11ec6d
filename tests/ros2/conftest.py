"""Real ROS 2 (rclpy over Fast DDS, from the Jazzy wheels the dev extra installs) for the
node's tests: discovery kept on this host, a random domain per test session, every wait
bounded.

``ros`` starts rclpy in a fresh context and spins the nodes a test adds in a background
thread; the test's own probe node has real subscribers and parameter/service clients.
"""

from __future__ import annotations

import os
import random
import sys

import pytest

# Before anything initialises rclpy: this host only, a domain no other run shares.
os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 100))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"  # Jazzy
os.environ.pop("ROS_LOCALHOST_ONLY", None)  # Humble's spelling; Jazzy warns when both are set
os.environ.pop("ROS_STATIC_PEERS", None)

if sys.version_info < (3, 10):  # the ROS 2 wheels exist for CPython 3.10+ only
    collect_ignore_glob = ["test_node*.py", "test_cli_node*.py"]


@pytest.fixture
def ros():
    from ros_helpers import Ros

    r = Ros()
    yield r
    r.close()


@pytest.fixture
def board():
    """A simulated Orin Nano on the wall clock (the node's timers run in real time), busy with
    its compute load; closed after the test."""
    import governor
    from governor.timebase import WallClock

    dev = governor.open_device("sim:orin-nano", clock=WallClock())
    dev.run_workload("compute")
    yield dev
    dev.stop_workload()
    dev.close()
