"""Shared pieces of the battery-policy tests: the calibrated model of a simulated board, one
busy control period's observation, and a whole mission of a job that changes load on a
simulated board, optionally ticking its work."""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Sequence, Tuple

import governor
from governor.runtime import Governor
from governor.runtime.controllers import Observation
from governor.runtime.model import ClockModel, model_from_profile


def model_of(profile_of, board: str = "a100-sxm") -> ClockModel:
    """The runtime's clock model of ``board`` from its calibrated profile."""
    clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
    return model_from_profile(clocks, profile_of(board))


def observation(
    t_s: float,
    clock_mhz: float,
    power_w: float,
    *,
    elapsed_s: float,
    energy_used_j: float = 0.0,
    board_energy_used_j: Optional[float] = None,
    busy: bool = True,
    dt_s: float = 0.1,
) -> Observation:
    """One control period at ``clock_mhz`` drawing ``power_w`` (the board's figure the same;
    its energy ``board_energy_used_j``, ``power_w · elapsed_s`` unless given)."""
    return Observation(
        t_s=t_s,
        dt_s=dt_s,
        power_w=power_w,
        clock_mhz=clock_mhz,
        applied_mhz=clock_mhz,
        energy_used_j=energy_used_j,
        elapsed_s=elapsed_s,
        busy=busy,
        board_power_w=power_w,
        board_energy_used_j=power_w * elapsed_s
        if board_energy_used_j is None
        else board_energy_used_j,
    )


class Mission(NamedTuple):
    work: float  # units of work done
    energy_j: float  # the device's true energy (a datacenter card: the board is the card)
    left_j: float  # the budget left by the governor's own meter
    clocks_mhz: List[float]  # the clock of each control period
    phase_mean_mhz: List[float]  # the mean clock of each phase


def run_mission(
    board: str, doc, budget_j: float, phases: Sequence[Tuple[str, float]], ticking: bool = True
) -> Mission:
    """A job that changes load (``phases``: [(workload, seconds), ...]) on the simulated
    ``board`` under the battery policy, reporting each whole unit of work it finishes with
    ``gov.tick`` when ``ticking``."""
    dev = governor.open_device(f"sim:{board}")
    dev.run_workload(phases[0][0])
    gov = Governor(
        dev,
        {"policy": "battery", "energy_j": budget_j, "duration_s": sum(s for _, s in phases)},
        profile=doc,
        background=False,
        handle_signals=False,
    )
    ticked = 0
    clocks: List[float] = []
    means: List[float] = []
    with dev:
        with gov:
            for load, seconds in phases:
                dev.run_workload(load)
                steps = int(round(seconds / gov.interval_s))
                for _ in range(steps):
                    dev.clock.sleep(gov.interval_s)
                    done = math.floor(dev.work_done())
                    if ticking and done > ticked:
                        gov.tick(float(done - ticked))
                    ticked = done
                    gov.step(advance_s=0)
                    clocks.append(gov.applied_clock_mhz)
                means.append(sum(clocks[-steps:]) / steps)
            left_j = gov.status()["remaining_j"]
        work = dev.work_done()
        energy_j = dev.true_energy_j()
        dev.stop_workload()
    return Mission(work, energy_j, left_j, clocks, means)


def phase_budget_j(board: str, phases: Sequence[Tuple[str, float]], share: float = 0.6) -> float:
    """The bench's budget for a mission of ``phases`` on ``board``: the lowest clock's GPU
    energy plus ``share`` of the way to the top clock's (steady power, default memory clock)."""
    from governor.devices.sim.catalog import get_board

    spec = get_board(board)
    mem = spec.default_mem_clock_mhz

    def energy_j(clock: float) -> float:
        return sum(spec.steady_gpu_power_w(clock, spec.workloads[w], mem) * s for w, s in phases)

    low, top = energy_j(spec.clocks_mhz[0]), energy_j(spec.clocks_mhz[-1])
    return low + share * (top - low)
