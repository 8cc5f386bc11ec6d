"""The named parts of :class:`governor.runtime.battery_controller.BatteryController`.

- :mod:`.tables`: pure arithmetic over a clock table (fractional levels, marginal work per
  joule between neighbouring clocks, concavity);
- :mod:`.bursts`: the lengths of the bursts and gaps seen, and the busy time they forecast;
- :mod:`.plan`: the mission's busy-power plan from what is left, its duty cycle and idle power;
- :mod:`.share`: the load's memory-bound share estimated from its power (no ticks), and the
  measured-over-model power ratio;
- :mod:`.curves`: a phase's work-per-joule gaps below the model's power cap, and the band a
  probe pair's fit is trusted within;
- :mod:`.history`: the past phases' curves, as records;
- :mod:`.probe`: the probe runs of a new phase and the hold within its trusted band;
- :mod:`.forecast`: the mix of loads the rest of the mission is expected to run;
- :mod:`.solver`: the Lagrange multiplier at which that mix draws the plan's power.

Each imports only the model, :mod:`governor.runtime.workrate` and the parts listed above it.
"""
