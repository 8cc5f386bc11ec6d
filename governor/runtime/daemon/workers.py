"""The daemon's worker threads: a fixed pool that turns request lines into reply bytes.

The selector thread (:mod:`.connections`) submits a connection with one complete request
line; a worker calls the handler with the line and the connection's peer credentials,
queues the encoded reply and wakes the selector thread by writing a byte to a socket pair
whose reading end (:attr:`WorkerPool.wake_r`) the selector watches. Workers never touch a
connection's state: the selector thread takes the replies (:meth:`WorkerPool.replies`).
"""

from __future__ import annotations

import collections
import logging
import queue
import socket
import threading
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Tuple

from governor.devices.daemon.protocol import encode, error_reply
from governor.runtime.daemon.peers import PeerCredentials

__all__ = ["Handler", "WorkerPool"]

log = logging.getLogger("governor.daemon")

#: the reply to one request line, for a peer; must not raise
Handler = Callable[[bytes, PeerCredentials], Dict[str, Any]]


class WorkerPool:
    """``count`` threads calling ``handler(line, conn.peer)`` for each submitted job; the
    replies come back, in the order they were made, through :meth:`replies`."""

    def __init__(self, handler: Handler, count: int) -> None:
        self._handler = handler
        self._count = count
        self.wake_r, self._wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._jobs: queue.Queue = queue.Queue()  # (connection, line), or None: stop
        self._done: Deque[Tuple[Any, bytes]] = collections.deque()
        self._threads: List[threading.Thread] = []

    def start(self) -> None:
        for i in range(self._count):
            thread = threading.Thread(
                target=self._work, name=f"governor-daemon-worker-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, conn: Any, line: bytes) -> None:
        """Queue ``line`` of ``conn`` (an object with ``peer``) for the next free worker."""
        self._jobs.put((conn, line))

    def replies(self) -> Iterator[Tuple[Any, bytes]]:
        """``(conn, reply bytes)`` for every reply made so far (selector thread only)."""
        while self._done:
            yield self._done.popleft()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            conn, line = job
            try:
                reply = self._handler(line, conn.peer)
            except Exception as err:  # pragma: no cover - the handler never raises
                log.exception("internal error while handling %r", line[:200])
                reply = error_reply("internal", f"internal error: {type(err).__name__}: {err}")
            self._done.append((conn, encode(reply)))
            self.wake()

    def wake(self) -> None:
        """Wake the selector thread (any thread; safe from a signal handler)."""
        try:
            self._wake_w.send(b"\0")
        except OSError:  # full (a wake-up is pending anyway) or closed (stopping)
            pass

    def drain_wake(self) -> None:
        """Read the pending wake-up bytes (selector thread)."""
        try:
            while self.wake_r.recv(4096):
                pass
        except OSError:
            pass

    def stop(self, timeout_s: float) -> None:
        """End the workers once they finish their jobs, waiting ``timeout_s`` in all."""
        for _ in self._threads:
            self._jobs.put(None)
        end = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))

    def close(self) -> None:
        """Close the wake-up sockets (after :meth:`stop` and the selector's close)."""
        self.wake_r.close()
        self._wake_w.close()
