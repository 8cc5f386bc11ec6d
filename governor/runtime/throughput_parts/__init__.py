"""The parts of the throughput policy's controller (:mod:`governor.runtime.throughput_controller`).

- :mod:`.tables`: a clock's price at the rate (:func:`~.tables.cost_w`) and the cheapest
  clock that keeps the deadline (:class:`~.tables.ClockTables`, the hull; :func:`~.tables.scan`);
- :mod:`.frames`: what the ticks say (:class:`~.frames.FrameStats`: the deadline, the work
  per frame, the late frames, the tick rate) and the power between frames
  (:class:`~.frames.IdlePower`);
- :mod:`.pricing`: a clock's mean power at the rate, predicted and measured by a window;
- :mod:`.window`: the search's measurement windows;
- :mod:`.brackets`, :mod:`.duel`: comparisons of two clocks on a warming board;
- :mod:`.search`: the local search on measured power (energy counter only);
- :mod:`.dither`: time-sharing the deadline's floor with the clock below.
"""
