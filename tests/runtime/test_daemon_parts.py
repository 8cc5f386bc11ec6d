"""The daemon's parts on their own: the worker pool, the connection table, a device slot, the
socket's removal and the order in which the config file's mistakes are reported."""

from __future__ import annotations

import json
import os
import select
import selectors
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest
from daemon_helpers import config_text, short_socket_dir

from governor.devices.registry import open_device
from governor.errors import GovernorError
from governor.runtime.daemon.config import ConfigError, DeviceConfig, parse_config
from governor.runtime.daemon.connections import _READING, _WORKING, _Conn, _Table
from governor.runtime.daemon.listen import bind_socket, remove_socket
from governor.runtime.daemon.slots import Slot
from governor.runtime.daemon.workers import WorkerPool
from governor.timebase import WallClock


# -- the worker pool ---------------------------------------------------------------------------
class _Job:
    def __init__(self, uid: int) -> None:
        self.peer = (1000 + uid, uid, uid)


def test_the_worker_pool_answers_every_job_with_its_peer_and_wakes_the_selector():
    seen_threads = set()

    def handler(line, peer):
        seen_threads.add(threading.current_thread().name)
        return {"ok": True, "line": line.decode(), "uid": peer[1]}

    pool = WorkerPool(handler, 3)
    pool.start()
    jobs = [_Job(uid) for uid in range(8)]
    for i, job in enumerate(jobs):
        pool.submit(job, f"request {i}".encode())
    replies = []
    while len(replies) < len(jobs):
        readable, _, _ = select.select([pool.wake_r], [], [], 5.0)
        assert readable, "no wake-up byte within 5 s"
        pool.drain_wake()
        replies += list(pool.replies())
    by_job = {id(job): json.loads(data) for job, data in replies}
    for i, job in enumerate(jobs):
        assert by_job[id(job)] == {"ok": True, "line": f"request {i}", "uid": job.peer[1]}
    assert seen_threads <= {f"governor-daemon-worker-{i}" for i in range(3)}
    pool.stop(2.0)
    assert not any(t.is_alive() for t in threading.enumerate() if t.name in seen_threads)
    pool.close()
    assert pool.wake_r.fileno() == -1


# -- the connection table ----------------------------------------------------------------------
@pytest.fixture
def table():
    selector = selectors.DefaultSelector()
    pairs = []

    def conn(since: float, state: str = _READING, idle: bool = False) -> _Conn:
        ours, theirs = socket.socketpair()
        pairs.extend((ours, theirs))
        c = _Conn(ours, (None, None, None), since)
        c.state, c.idle = state, idle
        return c

    yield _Table(selector), conn, selector
    for sock in pairs:
        sock.close()
    selector.close()


def test_the_victim_is_the_oldest_idle_connection_else_the_longest_waiting(table):
    conns, conn, _ = table
    busy = conn(0.0, state=_WORKING)
    waiting_long, waiting = conn(1.0), conn(2.0)
    idle_old, idle_new = conn(5.0, idle=True), conn(6.0, idle=True)
    for c in (busy, waiting, waiting_long, idle_new, idle_old):
        conns.add(c)
    assert conns.victim() is idle_old
    conns.close(idle_old)
    conns.close(idle_new)
    assert conns.victim() is waiting_long
    conns.close(waiting_long)
    conns.close(waiting)
    assert conns.victim() is None  # only a connection with a request in progress is left
    assert len(conns) == 1


def test_deadlines_expire_in_opening_order_and_the_next_check_is_the_earliest_left(table):
    conns, conn, _ = table
    first, second, third, none = conn(0.0), conn(0.0), conn(0.0), conn(0.0)
    for c, at in ((first, 2.0), (second, 1.0), (third, 3.0)):
        conns.add(c)
        conns.set_deadline(c, at)
    conns.add(none)
    assert conns.next_check == 1.0
    expired = []
    conns.check_deadlines(2.5, lambda c, now: expired.append((c, now)))
    assert expired == [(first, 2.5), (second, 2.5)]
    assert conns.next_check == 3.0


def test_closing_a_watched_connection_unregisters_and_closes_its_socket(table):
    conns, conn, selector = table
    c = conn(0.0)
    conns.add(c)
    conns.watch(c, selectors.EVENT_READ)
    assert selector.get_key(c.sock).data is c
    conns.close(c)
    assert c.closed and c.sock.fileno() == -1 and len(conns) == 0
    assert c.sock not in [key.fileobj for key in selector.get_map().values()]
    conns.close(c)  # twice is harmless


# -- a device slot -----------------------------------------------------------------------------
@pytest.fixture
def a100():
    device = open_device("sim:a100-pcie", clock=WallClock())
    yield device
    device.close()


def test_a_slot_locks_the_top_clock_within_its_limits_and_restores_on_release(a100):
    table = a100.supported_clocks_mhz()
    slot = Slot(DeviceConfig(uri="sim:a100-pcie", min_mhz=600.0, max_mhz=1200.0), a100)
    slot.take()
    top_within = max(c for c in table if 600.0 - 1.0 <= c <= 1200.0 + 1.0)
    assert slot.clocks_within_limits()[-1] == top_within
    applied = slot.apply_static("max")
    assert a100.state().gpu_clocks_mhz == (top_within, top_within)
    assert applied["gpu_clocks_mhz"] == [top_within, top_within]
    assert a100.changed
    slot.mark(applied, (4321, 1000, 1000))
    assert slot.policy_info() == {"policy": "max", "source": "client"}
    status = slot.status()
    assert status["limits_mhz"] == [600.0, 1200.0]
    assert status["client_override"]["by_uid"] == 1000
    assert status["state"]["gpu_clocks_mhz"] == [top_within, top_within]
    slot.release()
    assert not a100.changed


def test_a_slot_without_a_clock_in_its_limits_says_so(a100):
    slot = Slot(DeviceConfig(uri="sim:a100-pcie", min_mhz=1.0, max_mhz=2.0), a100)
    with pytest.raises(GovernorError, match="supports no clock within the configured limits"):
        slot.nearest_allowed(1.5)
    assert not a100.changed


def test_a_slot_without_the_runtime_enforces_a_static_policy_and_refuses_the_rest(a100):
    policy = {"policy": "clock", "clock_mhz": 810.0}
    slot = Slot(DeviceConfig(uri="sim:a100-pcie", policy=policy), a100)
    slot.take()
    slot.enforce(0.5, lambda: None)
    assert slot.enforced["by"] == "static" and slot.policy_error is None
    assert a100.state().gpu_clocks_mhz == (810.0, 810.0)
    slot.stop_governor()
    capped = Slot(DeviceConfig(uri="sim:a100-pcie", policy={"policy": "power-cap"}), a100)
    capped.enforce(0.5, lambda: None)
    assert capped.enforced is None and "needs governor.runtime" in capped.policy_error
    slot.release()
    assert not a100.changed


# -- the socket --------------------------------------------------------------------------------
def test_the_socket_is_removed_only_while_it_is_the_one_this_daemon_bound():
    sockdir = short_socket_dir()
    try:
        path = sockdir / "run" / "governor.sock"
        bind_socket(path).close()
        st = os.stat(path)
        remove_socket(path, (st.st_dev, st.st_ino + 1))  # another daemon's socket now
        assert path.exists()
        remove_socket(path, (st.st_dev, st.st_ino))
        assert not path.exists()
        remove_socket(path, (st.st_dev, st.st_ino))  # already gone: nothing to do
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)


# -- the config file's first mistake -----------------------------------------------------------
@pytest.mark.parametrize(
    "daemon, device, first",
    [
        ('socket_mode = "0777"\nmetrics_listen = "x:y"', 'uri = "auto"', "daemon.socket_mode"),
        ('metrics_listen = "x:y"', 'uri = "auto"', "device[0].uri"),
        ('metrics_listen = "x:y"\nworkers = 0', 'uri = "sim:a100-pcie"', "daemon.metrics_listen"),
        ('workers = 0\nallow = ["nope"]', 'uri = "sim:a100-pcie"', "daemon.allow"),
    ],
)
def test_a_config_with_several_mistakes_reports_the_same_first_one(daemon, device, first):
    text = config_text(Path(tempfile.gettempdir()) / "g.sock", [device], daemon)
    with pytest.raises(ConfigError) as err:
        parse_config(text, "gov.toml")
    assert str(err.value).startswith(f"gov.toml: {first}: ")
