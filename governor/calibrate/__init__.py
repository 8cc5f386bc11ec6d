"""Calibration: probe a device at a few clocks under a load, fit its models, write a profile."""
