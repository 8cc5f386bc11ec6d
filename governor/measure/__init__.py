"""Measurement: energy and power windows, steady-state detection, lag correction."""
