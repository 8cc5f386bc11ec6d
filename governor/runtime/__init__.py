"""The runtime governor: a policy applied to a device by a control loop, restored on exit.

The contract other layers (CLI, daemon, deploy scripts, apps) rely on::

    from governor.runtime import Governor, policies
    policy = policies.from_spec({"policy": "ppw"|"max"|"power-cap"|"battery"|"throughput"|"clock",
                                 "cap_w": W, "battery_wh": WH, "hours": H, "rate_hz": HZ,
                                 "clock_mhz": MHZ})       # InvalidRequestError, one line
    gov = Governor(device, policy, profile=None, interval_s=0.1)
    gov.start(); ...; gov.stop()          # background thread; stop() restores the device
    with Governor(device, policy) as gov:  # restores on exit, exceptions, Ctrl-C, SIGTERM
        gov.tick(units=1.0)                # app progress (throughput policy)
        gov.status()                       # clock, power, policy, safe_hold, notes, ...
        gov.tiles("gemm"); gov.block_size("vector-add")   # Cached(value|None, reason)
    Governor(sim_device, policy, background=False).start().step()   # deterministic stepping

Who owns a device and its journal (locks, layers, ``reset``) is the device layer's business:
see :mod:`governor.devices.ownership` and docs/ownership.md.

A missing profile is not an error: the governor falls back to a generic model (PPW clock
guessed at 75 % of the top clock) and says so in ``status()["notes"]`` and on the log, naming
``governor calibrate``. What the policy asks that the board cannot do (a clock clamped or
snapped, a cap below its least power, a budget run out) is governed as near as it can and said
once, in ``status()["notes"]`` and ``status()["unmet"]`` (see :mod:`governor.runtime.unmet`).
Nothing here imports numpy or scipy.
"""

from __future__ import annotations

from governor.runtime import policies
from governor.runtime.governor import Cached, Governor

__all__ = ["Cached", "Governor", "policies"]
