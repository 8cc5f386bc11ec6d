"""Devices: one interface over NVML, Jetson sysfs, jtop, tegrastats, simulated and replayed boards."""
