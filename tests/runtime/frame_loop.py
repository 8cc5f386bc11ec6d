"""A synthetic 30 Hz frame loop for driving a throughput controller without the simulator
(deterministic and fast): shared by the search and the cold-board tests."""

from __future__ import annotations

import random
from typing import Callable, List, Tuple

from governor.runtime.controllers import Observation, Tick

RATE_HZ = 30.0
PERIOD_S = 0.1


def drive(
    ctl,
    power_of: Callable[[float, float, float], float],
    seconds: float,
    load: float = 0.45,
    seed: int = 0,
) -> Tuple[List[Tuple[float, float]], float]:
    """Run ``ctl`` over a steady frame load (``load`` of a period at the top clock, ±5 %
    jitter) for ``seconds``; ``power_of(clock_mhz, busy_share, t_s)`` is the period's
    measured mean power. Returns ``[(t_s, clock_mhz)]`` per period and the energy (J)."""
    rng = random.Random(seed)
    model = ctl.model
    clock = ctl.initial_mhz()
    energy_j = 0.0
    applied = []
    for k in range(int(round(seconds / PERIOD_S))):
        t = PERIOD_S * (k + 1)
        frames = [load / RATE_HZ * rng.gauss(1.0, 0.05) * model.time_rel_at(clock) for _ in "abc"]
        ticks = [Tick(t - PERIOD_S + i / RATE_HZ, 1.0, s, clock) for i, s in enumerate(frames)]
        busy = min(1.0, sum(frames) / PERIOD_S)
        power = power_of(clock, busy, t)
        energy_j += power * PERIOD_S
        obs = Observation(t, PERIOD_S, power, clock, clock, energy_j, t, busy > 0)
        applied.append((t, clock))
        clock, _ = ctl.decide(obs, ticks, clock)
    return applied, energy_j
