"""The decision each policy makes once per control period: which GPU clock to hold next.

A controller learns from each :class:`Observation` (the power measured over the period just
ended, the clock it ran at) and the app's ticks, and chooses the next clock and whether the
change is urgent (lowering power under a cap, raising the clock for a missed rate: never
delayed by the rate limiter). Controllers are plain state machines with no threads and no
device, so the same code runs in the background thread, in deterministic stepping and in
tests.

Where each lives: the shared pieces (:class:`Observation`, :class:`Tick`,
:class:`Controller`, :class:`PowerTracker`) in :mod:`governor.runtime.controller_base`; the
power cap's in :mod:`governor.runtime.cap_controller`; the battery's in
:mod:`governor.runtime.battery_controller`; the throughput policy's in
:mod:`governor.runtime.throughput_controller` and, with a battery floor,
:mod:`governor.runtime.floor_controller`; the PPW searches in
:mod:`governor.runtime.ppw_local`; the factory each policy is made by in
:mod:`governor.runtime.factories`, named by the policy table
(:data:`governor.runtime.policies.POLICIES`). All are re-exported here.
"""

from __future__ import annotations

from governor.runtime.battery_controller import BatteryController
from governor.runtime.cap_controller import PowerCapController
from governor.runtime.controller_base import (
    ControlContext,
    Controller,
    Decision,
    Now,
    Observation,
    PowerTracker,
    StaticController,
    Tick,
)
from governor.runtime.floor_controller import FloorThroughputController
from governor.runtime.policies import make_controller
from governor.runtime.ppw_local import OnlinePpwController, PriorPpwController
from governor.runtime.throughput_controller import ThroughputController

__all__ = [
    "BatteryController",
    "ControlContext",
    "Controller",
    "Decision",
    "FloorThroughputController",
    "Now",
    "Observation",
    "OnlinePpwController",
    "PowerCapController",
    "PowerTracker",
    "PriorPpwController",
    "StaticController",
    "Tick",
    "ThroughputController",
    "make_controller",
]
