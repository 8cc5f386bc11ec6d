"""Deadlines on device calls: a wedged driver never holds its caller.

On a GPU in a bad state NVML calls block for minutes or for ever, and a Jetson whose power
monitor (INA3221 on I2C, the BPMP) stalls blocks a sysfs read the same way. So every call a
device makes into its driver runs on that device's own **worker thread**, and the caller waits
for it with a deadline (seconds, per kind of call: :data:`DEFAULT_DEADLINES_S`, changed with
``$GOVERNOR_DEVICE_DEADLINES`` such as ``read=2,write=5``). A call past its deadline:

- marks the device **not responding**, said once on the ``governor.devices`` log (at info:
  the daemon's log, so the system journal; each command says it once in its own words:
  ``run`` in its notes, ``monitor`` and the exporter on stderr, the daemon in ``status``);
- abandons the stuck worker (a thread blocked in a C call cannot be stopped; it ends by itself
  when the driver answers) and fails the calls queued behind it at once;
- makes every later call fail at once with :class:`~governor.errors.DeviceNotRespondingError`
  (a :class:`~governor.errors.DeviceLostError`: callers already leave a lost device alone)
  instead of waiting out its own deadline;
- starts one background **probe** (the device's cheapest read) that blocks until the driver
  answers; when it returns, the device is served again (said once, too).

Why a thread per device and not a helper process: the device objects (their journal layers,
lock files, cached tables, the NVML handles) live in the caller's process, and every call is
cheap (tens of µs); a helper process would need every call and its result serialized across a
pipe, and its own NVML session. Its one advantage, that it can be killed, buys nothing here:
a killed NVML client does not unwedge the GPU, and the threads left behind are bounded (at
most the stuck call and the probe per wedged device, both daemon threads that never stop the
process from exiting). The limit is NVML's own locking: where a hung call holds a lock that
the whole library shares, the other GPUs' calls in the same process block behind it too; each
of them then misses its own deadline and is said not responding, but no caller is held (the
test stand-in can do either: ``tests/fakes/nvml``).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from governor.errors import DeviceNotRespondingError

__all__ = [
    "DEADLINE_ENV",
    "DEFAULT_DEADLINES_S",
    "DeviceCalls",
    "call_with_deadline",
    "deadlines_s",
]

log = logging.getLogger("governor.devices")

DEADLINE_ENV = "GOVERNOR_DEVICE_DEADLINES"

#: seconds a call of each kind may take before its device is said not responding: reads
#: (a sample, the state), writes (a clock lock, a restore), opening and closing a device
DEFAULT_DEADLINES_S: Dict[str, float] = {"read": 2.0, "write": 5.0, "open": 10.0, "close": 2.0}


def deadlines_s(text: Optional[str] = None) -> Dict[str, float]:
    """The deadline of each kind of call (s): the defaults, changed by ``text`` (default
    ``$GOVERNOR_DEVICE_DEADLINES``), ``kind=seconds`` separated by commas; a bare number sets
    every kind. A malformed entry is logged and ignored."""
    out = dict(DEFAULT_DEADLINES_S)
    text = os.environ.get(DEADLINE_ENV, "") if text is None else text
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        kind, _, value = item.rpartition("=")
        try:
            seconds = float(value)
            if not 0.0 < seconds < 86400.0:
                raise ValueError(value)
        except ValueError:
            log.warning("%s: ignoring %r (a number of seconds above 0)", DEADLINE_ENV, item)
            continue
        kind = kind.strip()
        if not kind:
            out = {k: seconds for k in out}
        elif kind in out:
            out[kind] = seconds
        else:
            log.warning("%s: ignoring %r (kinds: %s)", DEADLINE_ENV, item, ", ".join(out))
    return out


class _Job:
    """One call handed to a worker, and its outcome."""

    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args)
        except BaseException as err:  # handed to the caller, whatever it is
            self.error = err
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


class DeviceCalls:
    """The worker thread of one device, its deadlines and whether the device responds.

    ``where`` names the device in messages; ``probe`` is its cheapest read, called on a
    background thread while the device is not responding (its return, or any error it
    raises, means the driver answers again). ``on_change(responding, why)`` is called after
    each change of state (from whichever thread saw it).
    """

    def __init__(
        self,
        where: str,
        probe: Callable[[], Any],
        deadlines: Optional[Dict[str, float]] = None,
    ) -> None:
        self.where = where
        self.deadlines_s = dict(deadlines) if deadlines is not None else deadlines_s()
        self._probe = probe
        self._lock = threading.Lock()
        self._queue: Optional["queue.Queue[Optional[_Job]]"] = None  # noqa: UP037 - 3.8
        self._worker: Optional[threading.Thread] = None
        self._prober: Optional[threading.Thread] = None
        self._why: Optional[str] = None
        self._closed = False
        #: how often the device stopped answering, and came back
        self.episodes = 0
        self.recoveries = 0
        self._listeners: List[Callable[[bool, Optional[str]], None]] = []

    # -- state -------------------------------------------------------------------------------
    @property
    def not_responding(self) -> Optional[str]:
        """Why the device is not responding (one line), or None while it answers."""
        return self._why

    def add_listener(self, listener: Callable[[bool, Optional[str]], None]) -> None:
        """Call ``listener(responding, why)`` on each change of state."""
        self._listeners.append(listener)

    def _notify(self, responding: bool, why: Optional[str]) -> None:
        for listener in list(self._listeners):
            try:
                listener(responding, why)
            except Exception:  # a listener must not break the device
                log.exception("%s: listener failed", self.where)

    # -- calls -------------------------------------------------------------------------------
    def call(self, kind: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the device's worker, waiting at most the deadline of ``kind``.

        Raises:
            DeviceNotRespondingError: the call is past its deadline, or the device is not
                responding already (then at once); whatever ``fn`` raised otherwise.
        """
        if threading.current_thread() is self._worker:
            return fn(*args)  # a call made by a call: already on the worker
        job = _Job(fn, args)
        with self._lock:
            if self._why is not None:
                self._start_probe_locked()
                raise DeviceNotRespondingError(self._why)
            if self._worker is None or self._queue is None:
                self._queue = queue.Queue()
                self._worker = threading.Thread(
                    target=_work,
                    args=(self._queue,),
                    name=f"governor-device {self.where}",
                    daemon=True,
                )
                self._worker.start()
            self._queue.put(job)
        deadline_s = self.deadlines_s.get(kind, DEFAULT_DEADLINES_S["read"])
        if not job.done.wait(deadline_s):
            name = getattr(fn, "__name__", "call")
            self._stalled(f"a {kind} call, {name}, took over {deadline_s:g} s")
            raise DeviceNotRespondingError(self._why or f"{self.where}: not responding")
        if job.error is not None:
            raise job.error
        return job.result

    def _stalled(self, what: str) -> None:
        """A call missed its deadline: abandon the worker, fail the calls behind it, say so
        once and start the probe."""
        with self._lock:
            if self._why is not None:
                return
            self._why = (
                f"{self.where}: not responding: the driver stopped answering ({what}); "
                "retried in the background"
            )
            self.episodes += 1
            stuck, self._queue = self._queue, None
            if self._worker is not None:
                self._worker.name += " (abandoned)"
            self._worker = None
            behind: List[_Job] = []
            if stuck is not None:
                while True:
                    try:
                        job = stuck.get_nowait()
                    except queue.Empty:
                        break
                    if job is not None:
                        behind.append(job)
                stuck.put(None)  # the stuck worker ends once its call returns
            why = self._why
            self._start_probe_locked()
        for job in behind:
            job.fail(DeviceNotRespondingError(why))
        log.info("%s", why)  # said at info: each command says it once in its own words
        self._notify(False, why)

    def _start_probe_locked(self) -> None:
        if self._closed or (self._prober is not None and self._prober.is_alive()):
            return
        self._prober = threading.Thread(
            target=self._probe_until_answered, name=f"governor-probe {self.where}", daemon=True
        )
        self._prober.start()

    def _probe_until_answered(self) -> None:
        try:
            self._probe()
        except Exception as err:  # an answer all the same: the driver is back
            log.debug("%s: probe answered with %s", self.where, err)
        with self._lock:
            if self._why is None:
                return
            self._why = None
            self.recoveries += 1
        log.info("%s: answers again; governor uses it again", self.where)
        self._notify(True, None)

    def close(self) -> None:
        """Stop the worker (its thread ends after the call in hand) and stop probing."""
        with self._lock:
            self._closed = True
            q, self._queue, self._worker = self._queue, None, None
        if q is not None:
            q.put(None)


def _work(jobs: "queue.Queue[Optional[_Job]]") -> None:  # noqa: UP037 - 3.8
    while True:
        job = jobs.get()
        if job is None:
            return
        job.run()


def call_with_deadline(
    where: str,
    what: str,
    deadline_s: float,
    fn: Callable[[], Any],
    dispose: Optional[Callable[[Any], None]] = None,
) -> Any:
    """``fn()`` on a thread of its own, waiting at most ``deadline_s``: for the calls made
    before a device (and its worker) exists, such as opening it. A result that comes after
    the deadline is handed to ``dispose`` (close the device opened too late).

    Raises:
        DeviceNotRespondingError: ``fn`` did not return within ``deadline_s`` (it goes on,
            abandoned); whatever ``fn`` raised otherwise.
    """
    lock = threading.Lock()
    state = {"waiting": True}
    job = _Job(fn, ())

    def run() -> None:
        job.run()
        with lock:
            late = not state["waiting"]
        if late and job.error is None and dispose is not None:
            try:
                dispose(job.result)
            except Exception as err:  # nobody waits for it any more
                log.debug("%s: disposing of a late %s: %s", where, what, err)

    thread = threading.Thread(target=run, name=f"governor-open {where}", daemon=True)
    thread.start()
    finished = job.done.wait(deadline_s)
    with lock:
        finished = finished or job.done.is_set()
        state["waiting"] = finished
    if not finished:
        raise DeviceNotRespondingError(
            f"{where}: not responding: {what} did not answer within {deadline_s:g} s"
        )
    if job.error is not None:
        raise job.error
    return job.result
