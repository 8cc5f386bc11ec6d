"""governor.calibrate.loads: work counting on a fake clock, commands, and load selection.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md); expected values
come from the fake clock's steps and the commands' known exit codes.
"""

import sys
import types

import pytest

import governor
from governor.calibrate import loads
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError


class _Stepped(loads.ThreadedLoad):
    """Each unit advances a fake clock by 0.25 s; stops itself after ``n`` units."""

    name = "stepped"

    def __init__(self, n, fail=None):
        super().__init__()
        self.clock = 100.0
        self._now = lambda: self.clock
        self.n = n
        self.fail = fail
        self.runs = 0

    def _run_once(self):
        self.runs += 1
        if self.fail is not None and self.runs == self.n:
            raise self.fail
        self.clock += 0.25
        if self.runs == self.n:
            self._stop.set()


def test_loop_counts_units_and_their_time():
    load = _Stepped(3)
    load.start()
    load._thread.join(5)
    assert load._units == 3
    assert load._unit_time_s == pytest.approx(0.75, rel=1e-12)
    assert load._current_start is None
    assert load.work_done() == 3.0
    load.stop()
    assert load._thread is None


def test_start_twice_keeps_one_thread():
    load = _Stepped(1)
    load.start()
    first = load._thread
    assert first.daemon  # a load thread never keeps the process alive
    load.start()
    assert load._thread is first
    load.stop()


def test_work_done_adds_the_elapsed_fraction_of_the_current_unit():
    load = _Stepped(1)
    load._units, load._unit_time_s = 4, 2.0  # mean unit 0.5 s
    load._current_start = 100.0
    load.clock = 100.2  # 0.2 / 0.5 = 0.4 of a unit
    assert load.work_done() == pytest.approx(4.4, rel=1e-12)
    load.clock = 101.0  # 2 units' time: capped just below one unit
    assert load.work_done() == pytest.approx(4.999, rel=1e-12)
    load._units, load._unit_time_s = 0, 0.0  # no mean yet: no fraction
    assert load.work_done() == 0.0


def test_failures_are_reported_by_check():
    load = _Stepped(2, fail=loads.LoadFailed("the load broke"))
    load.start()
    load._thread.join(5)
    with pytest.raises(CalibrationError, match="^the load broke$"):
        load.check()
    with pytest.raises(CalibrationError):
        load.work_done()
    load.stop()
    other = _Stepped(1, fail=OSError("driver gone"))
    other.start()
    other._thread.join(5)
    with pytest.raises(CalibrationError, match="^stepped failed: driver gone$"):
        other.check()
    other.stop()
    _Stepped(1).check()  # no error: nothing raised


def test_command_load_runs_and_reports_exit_codes():
    ok = loads.CommandLoad("true")
    assert ok.kind == "command" and ok.argv == ["true"] and ok.name == "true"
    ok._run_once()
    script = "import sys; sys.stderr.write('a\\noops\\n'); sys.exit(3)"
    cmd = f'{sys.executable} -c "{script}"'
    with pytest.raises(loads.LoadFailed, match="^load command exited with 3: oops$"):
        loads.CommandLoad(cmd)._run_once()
    with pytest.raises(loads.LoadFailed, match="^load command exited with 1: $"):
        loads.CommandLoad("false")._run_once()
    with pytest.raises(
        loads.LoadFailed, match="^cannot run 'no-such-cmd-xyz': No such file or directory$"
    ):
        loads.CommandLoad("no-such-cmd-xyz --x")._run_once()
    with pytest.raises(InvalidRequestError, match="empty"):
        loads.CommandLoad("   ")


def test_command_load_counts_runs_in_its_thread():
    load = loads.CommandLoad("true")
    with load as entered:
        assert entered is load
        deadline = 200
        while load._units < 2 and deadline:
            import time

            time.sleep(0.05)
            deadline -= 1
    assert load.work_done() >= 2.0


def test_make_load_on_a_simulated_board():
    dev = governor.open_device("sim:agx-orin")
    for spec, workload, kind in (
        (None, "compute", "builtin"),
        ("", "compute", "builtin"),
        (" builtin ", "compute", "builtin"),
        ("compute", "compute", "builtin"),
        ("memory", "memory", "memory"),
        ("workload:memory", "memory", "builtin"),
    ):
        load = loads.make_load(dev, spec)
        assert isinstance(load, loads.SimLoad)
        assert (load.name, load.kind) == (workload, kind)
    assert isinstance(loads.make_load(dev, "true"), loads.CommandLoad)
    with pytest.raises(InvalidRequestError, match="unknown workload 'nope'"):
        loads.make_load(dev, "workload:nope")


def test_sim_load_runs_the_boards_workload():
    dev = governor.open_device("sim:agx-orin")
    load = loads.SimLoad(dev, "memory")
    assert load.kind == "builtin"
    with load:
        assert dev.workload is not None and dev.workload.name == "memory"
        assert load.work_done() == dev.work_done()
    assert dev.workload is None


def test_no_builtin_load_without_a_gpu_kind():
    fake = types.SimpleNamespace(uri="replay:x", identity=types.SimpleNamespace(kind="replay"))
    with pytest.raises(UnsupportedError, match="no built-in load for replay:x"):
        loads.make_load(fake, "builtin")
    with pytest.raises(UnsupportedError, match="not a simulated board"):
        loads.SimLoad(fake, "compute")


def test_gpu_devices_get_the_cuda_load(monkeypatch):
    made = []
    fake = types.ModuleType("governor.calibrate.cuda_loads")
    fake.make_cuda_load = lambda device, kind: made.append((device.uri, kind)) or "cuda-load"
    import governor.calibrate

    monkeypatch.setitem(sys.modules, "governor.calibrate.cuda_loads", fake)
    monkeypatch.setattr(governor.calibrate, "cuda_loads", fake, raising=False)
    for kind in ("nvml", "jetson", "jtop", "tegrastats"):
        dev = types.SimpleNamespace(uri=kind + ":0", identity=types.SimpleNamespace(kind=kind))
        assert loads.make_load(dev, "memory") == "cuda-load"
    assert loads.make_load(dev, "builtin") == "cuda-load"
    assert made[0] == ("nvml:0", "memory") and made[-1] == ("tegrastats:0", "builtin")
