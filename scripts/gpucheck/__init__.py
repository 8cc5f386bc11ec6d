"""The steps of ``scripts/gpu_check.py``: governor's first contact with a real NVIDIA GPU.

- :mod:`gpucheck.core`: settings (windows, budgets), the context the steps share, step
  records and the runner that turns any step's exception into a one-line ``fail``.
- :mod:`gpucheck.read_steps`: discovery, telemetry, the built-in loads, energy windows and the
  exporter (reading only).
- :mod:`gpucheck.control_steps`: control, calibration against a brute-force sweep, and
  ``tune-blocks`` on a real kernel (these change the GPU, journaled and restored).
- :mod:`gpucheck.kernel_step`: the kernel library, behind one small interface.
- :mod:`gpucheck.report`: ``report.json`` and ``report.md``.
"""
