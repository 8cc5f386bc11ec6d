"""tegrastats: a parser for every Jetson generation's output, a streaming reader over
``tegrastats --interval N``, and the read-only ``tegrastats`` device built on it.

- :mod:`.parser`  one line -> :class:`TegrastatsSample` (never raises; bad lines are counted)
- :mod:`.reader`  runs tegrastats and keeps the latest sample
- :mod:`.device`  the ``tegrastats`` telemetry source
- :mod:`.summary` per-rail mean/max power and energy over a log
"""
