"""The daemon's connections: one selector thread reads every client, a few workers act.

Why: a thread per connection that slept in ``recv`` with a per-``recv`` timeout let 16
clients sending one byte every 1.5 s hold every connection slot for hours. Here no thread
waits for a client:

- one thread (the caller of :meth:`ConnectionLoop.run`) owns the listening socket and every
  connection, all non-blocking, through :mod:`selectors`. It accepts, checks the peer, reads
  and assembles request lines, enforces the size limit and the deadlines, and writes replies;
- a complete request line goes to a fixed pool of ``workers`` threads (:mod:`.workers`),
  which call the handler and hand the reply line back. A connection has at most one request with the workers and is
  not read meanwhile, so requests on one connection are answered in order;
- deadlines are per request, not per ``recv``: the whole line must arrive within
  ``request_timeout_s`` of the daemon starting to wait for it (the accept, or the first byte
  after an idle pause between requests); a connection silent between requests is closed
  after ``idle_timeout_s``; a reply the client does not read within ``request_timeout_s``
  closes the connection. A missed request deadline gets a ``timeout`` error line first;
- at ``max_connections`` a new connection evicts the oldest idle connection, else the one
  that has waited longest for its request line (it gets ``busy``); only when every
  connection has a request in progress is the new one refused with ``busy``.

A connection's life: reading (idle, or receiving a request) -> working -> writing -> reading
... -> closed. Only the selector thread touches a connection's state; workers see the peer
credentials and the line, and return bytes through a queue and a wake-up socket.
"""

from __future__ import annotations

import collections
import errno
import logging
import math
import selectors
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional

from governor.devices.daemon.protocol import encode, error_reply
from governor.runtime.daemon.peers import PeerCredentials, peer_credentials
from governor.runtime.daemon.workers import Handler, WorkerPool

__all__ = ["ConnectionLoop"]

log = logging.getLogger("governor.daemon")

_POLL_S = 0.2  # longest wait between looks at the stop flag
_RECV_BYTES = 65536
_ACCEPTS_PER_WAKE = 64
_ACCEPT_PAUSE_S = 0.1  # after EMFILE and the like
_WORKER_JOIN_S = 2.0

_READING, _WORKING, _WRITING = "reading", "working", "writing"
_LISTENER, _WAKE = "listener", "wake"

#: None to admit a peer, else the one-line reason it is refused
Admission = Callable[[socket.socket, PeerCredentials], Optional[str]]


class _Conn:
    """One client connection (touched by the selector thread only)."""

    __slots__ = (
        "sock",
        "peer",
        "inbuf",
        "outbuf",
        "state",
        "idle",
        "since",
        "deadline",
        "eof",
        "close_after",
        "events",
        "closed",
    )

    def __init__(self, sock: socket.socket, peer: PeerCredentials, now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.state = _READING
        self.idle = False  # reading, between requests, nothing received yet
        self.since = now  # when the current wait (for a request, or idle) began
        self.deadline: Optional[float] = None
        self.eof = False
        self.close_after = False
        self.events = 0  # what the selector watches for
        self.closed = False


class _Table:
    """The open connections, what the selector watches on each, and their deadlines: the
    bookkeeping of the selector thread, apart from what it does with the bytes."""

    def __init__(self, selector: selectors.BaseSelector) -> None:
        self._selector = selector
        self._conns: Dict[_Conn, None] = {}  # insertion-ordered set
        #: the earliest deadline of any connection (a lower bound: see check_deadlines)
        self.next_check = math.inf

    def __len__(self) -> int:
        return len(self._conns)

    def __iter__(self) -> Iterator[_Conn]:
        return iter(list(self._conns))

    def add(self, conn: _Conn) -> None:
        self._conns[conn] = None

    def forget(self, conn: _Conn) -> None:
        """Drop ``conn`` without touching the selector (whose state is in doubt)."""
        conn.closed = True
        self._conns.pop(conn, None)

    def victim(self) -> Optional[_Conn]:
        """The connection to drop for a new one: the oldest idle, else the longest waiting."""
        reading = [c for c in self._conns if c.state == _READING]
        idle = [c for c in reading if c.idle]
        pool = idle or reading
        return min(pool, key=lambda c: c.since) if pool else None

    def set_deadline(self, conn: _Conn, at: float) -> None:
        conn.deadline = at
        if at < self.next_check:
            self.next_check = at

    def check_deadlines(self, now: float, expire: Callable[[_Conn, float], None]) -> None:
        """Call ``expire(conn, now)`` for each connection past its deadline, in the order they
        were opened, and keep the earliest deadline still to come."""
        upcoming = math.inf
        for conn in list(self._conns):
            deadline = conn.deadline
            if deadline is None:
                continue
            if deadline <= now:
                expire(conn, now)
            else:
                upcoming = min(upcoming, deadline)
        self.next_check = upcoming

    def watch(self, conn: _Conn, events: int) -> None:
        if conn.closed or events == conn.events:
            return
        if conn.events == 0:
            self._selector.register(conn.sock, events, conn)
        elif events == 0:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

    def abort(self, conn: _Conn, reply: Dict[str, Any]) -> None:
        """Best effort: one non-blocking send of ``reply``, then close."""
        try:
            conn.sock.send(encode(reply))
        except OSError:
            pass
        self.close(conn)

    def close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        self.watch(conn, 0)
        conn.closed = True
        self._conns.pop(conn, None)
        try:
            conn.sock.close()
        except OSError:  # pragma: no cover - defensive
            pass


def _send_and_close(sock: socket.socket, reply: Dict[str, Any]) -> None:
    try:
        sock.send(encode(reply))
    except OSError:
        pass
    sock.close()


class ConnectionLoop:
    """Serves request lines on ``listener`` until ``stop_event`` is set (see the module doc).

    ``handler(line, peer)`` makes the reply of one request line (it runs on a worker thread);
    ``admission(sock, peer)`` refuses a peer with a reason (a ``forbidden`` reply), or admits it.
    """

    def __init__(
        self,
        listener: socket.socket,
        handler: Handler,
        *,
        admission: Optional[Admission] = None,
        max_request_bytes: int = 4096,
        max_connections: int = 256,
        request_timeout_s: float = 2.0,
        idle_timeout_s: float = 10.0,
        workers: int = 4,
        stop_event: Optional[threading.Event] = None,
    ) -> None:
        self._listener = listener
        self._admission = admission
        self._max_bytes = max_request_bytes
        self._max_connections = max_connections
        self._request_timeout_s = request_timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._stop = stop_event if stop_event is not None else threading.Event()
        self._selector = selectors.DefaultSelector()
        self._pool = WorkerPool(handler, workers)
        self._conns = _Table(self._selector)
        self._accept_paused_until: Optional[float] = None
        #: what happened to connections, by kind (for logs, tests and the stress script)
        self.counters: collections.Counter = collections.Counter()

    # -- running -------------------------------------------------------------------------------
    @property
    def connection_count(self) -> int:
        return len(self._conns)

    def stop(self) -> None:
        """Ask the loop to end (any thread; safe from a signal handler)."""
        self._stop.set()
        self._pool.wake()

    def run(self) -> None:
        """Serve until stopped; then close every connection and end the workers."""
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._pool.wake_r, selectors.EVENT_READ, _WAKE)
        self._pool.start()
        try:
            while not self._stop.is_set():
                self._turn()
        finally:
            self._shutdown()

    def _turn(self) -> None:
        now = time.monotonic()
        timeout = min(_POLL_S, max(0.0, self._conns.next_check - now))
        if self._accept_paused_until is not None:
            timeout = min(timeout, max(0.0, self._accept_paused_until - now))
        for key, mask in self._selector.select(timeout):
            tag = key.data
            if tag is _LISTENER:
                self._accept()
            elif tag is _WAKE:
                self._pool.drain_wake()
            elif not tag.closed:
                try:
                    if mask & selectors.EVENT_READ and tag.state == _READING:
                        self._read(tag)
                    elif mask & selectors.EVENT_WRITE and tag.state == _WRITING:
                        self._flush(tag)
                except Exception:  # one connection's trouble must not end the daemon
                    self._crashed(tag)
        self._take_replies()
        now = time.monotonic()
        if now >= self._conns.next_check:
            self._conns.check_deadlines(now, self._expire)
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)

    def _shutdown(self) -> None:
        for conn in self._conns:
            self._conns.close(conn)
        self._pool.stop(_WORKER_JOIN_S)
        try:
            self._selector.unregister(self._listener)
        except (KeyError, ValueError):
            pass
        self._selector.close()
        self._pool.close()

    def _take_replies(self) -> None:
        for conn, data in self._pool.replies():
            if not conn.closed:
                try:
                    self._reply(conn, data, close_after=False)
                except Exception:
                    self._crashed(conn)

    def _crashed(self, conn: _Conn) -> None:
        pid, uid, _ = conn.peer
        self.counters["internal"] += 1
        log.exception("uid=%s pid=%s: internal error on the connection; closing it", uid, pid)
        try:
            self._conns.close(conn)
        except Exception:  # pragma: no cover - the selector itself is broken
            self._conns.forget(conn)

    # -- accepting -----------------------------------------------------------------------------
    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                if err.errno == errno.ECONNABORTED:
                    continue
                log.warning(
                    "cannot accept a connection: %s; pausing accepts for %g s",
                    err.strerror or err,
                    _ACCEPT_PAUSE_S,
                )
                self._selector.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + _ACCEPT_PAUSE_S
                return
            try:
                self._admit(sock)
            except Exception:  # a new connection's trouble must not end the daemon
                self.counters["internal"] += 1
                log.exception("internal error while admitting a connection; closing it")
                sock.close()

    def _admit(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        peer = peer_credentials(sock)
        pid, uid, gid = peer
        if self._admission is not None:
            refusal = self._admission(sock, peer)
            if refusal is not None:
                self.counters["forbidden"] += 1
                log.warning("refused uid=%s gid=%s pid=%s: %s", uid, gid, pid, refusal)
                _send_and_close(sock, error_reply("forbidden", refusal))
                return
        if len(self._conns) >= self._max_connections:
            victim = self._conns.victim()
            if victim is None:
                self.counters["refused_busy"] += 1
                log.info(
                    "uid=%s pid=%s refused: every connection has a request in progress", uid, pid
                )
                _send_and_close(
                    sock,
                    error_reply(
                        "busy",
                        f"the daemon is serving {len(self._conns)} requests; try again shortly",
                    ),
                )
                return
            self._evict(victim)
        now = time.monotonic()
        conn = _Conn(sock, peer, now)
        self._conns.add(conn)
        self._conns.set_deadline(conn, now + self._request_timeout_s)
        self._conns.watch(conn, selectors.EVENT_READ)

    def _evict(self, conn: _Conn) -> None:
        pid, uid, _ = conn.peer
        self.counters["evicted"] += 1
        if conn.idle:
            log.debug("uid=%s pid=%s: idle connection closed to make room", uid, pid)
            self._conns.close(conn)
            return
        log.info(
            "uid=%s pid=%s: connection closed to make room after waiting %.1f s for a request",
            uid,
            pid,
            time.monotonic() - conn.since,
        )
        self._conns.abort(
            conn,
            error_reply(
                "busy",
                f"the daemon has {self._max_connections} connections and this one had not "
                "sent a whole request; closing it",
            ),
        )

    # -- reading -------------------------------------------------------------------------------
    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            log.debug("client connection ended: %s", err)
            self._conns.close(conn)
            return
        if not chunk:
            conn.eof = True
        else:
            if conn.idle:  # the first byte of a request: its deadline starts now
                now = time.monotonic()
                conn.idle = False
                conn.since = now
                self._conns.set_deadline(conn, now + self._request_timeout_s)
            conn.inbuf += chunk
        self._next_line(conn)

    def _next_line(self, conn: _Conn) -> None:
        """Reading: hand the next complete line to the workers, or wait for more bytes."""
        limit = self._max_bytes
        while True:
            end = conn.inbuf.find(b"\n")
            if end < 0:
                break
            if end + 1 > limit:
                self._too_large(conn)
                return
            line = bytes(conn.inbuf[:end])
            del conn.inbuf[: end + 1]
            if line.strip():
                self._dispatch(conn, line)
                return
        if len(conn.inbuf) >= limit:
            self._too_large(conn)
            return
        if conn.eof:
            if conn.inbuf.strip():  # a last request without its newline
                line = bytes(conn.inbuf)
                conn.inbuf.clear()
                self._dispatch(conn, line)
            else:
                self._conns.close(conn)
            return
        self._conns.watch(conn, selectors.EVENT_READ)

    def _too_large(self, conn: _Conn) -> None:
        pid, uid, _ = conn.peer
        self.counters["too_large"] += 1
        log.info("uid=%s pid=%s (unparsed request) -> too-large", uid, pid)
        conn.inbuf.clear()
        reply = error_reply("too-large", f"request is larger than {self._max_bytes} bytes")
        self._reply(conn, encode(reply), close_after=True)

    def _dispatch(self, conn: _Conn, line: bytes) -> None:
        conn.state = _WORKING
        conn.idle = False
        conn.deadline = None  # the daemon's own time: no client deadline
        self._conns.watch(conn, 0)
        self._pool.submit(conn, line)

    # -- writing -------------------------------------------------------------------------------
    def _reply(self, conn: _Conn, data: bytes, *, close_after: bool) -> None:
        conn.state = _WRITING
        conn.deadline = None
        conn.outbuf += data
        conn.close_after = conn.close_after or close_after
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        if conn.outbuf:
            try:
                sent = conn.sock.send(conn.outbuf)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as err:
                log.debug("client connection ended: %s", err)
                self._conns.close(conn)
                return
            del conn.outbuf[:sent]
        if conn.outbuf:  # the client is not reading: it has request_timeout_s to start
            if conn.deadline is None:
                self._conns.set_deadline(conn, time.monotonic() + self._request_timeout_s)
            self._conns.watch(conn, selectors.EVENT_WRITE)
            return
        if conn.close_after:
            self._conns.close(conn)
            return
        now = time.monotonic()
        conn.state = _READING
        conn.since = now
        conn.idle = not conn.inbuf
        wait_s = self._idle_timeout_s if conn.idle else self._request_timeout_s
        self._conns.set_deadline(conn, now + wait_s)
        self._next_line(conn)

    # -- deadlines -----------------------------------------------------------------------------
    def _expire(self, conn: _Conn, now: float) -> None:
        pid, uid, _ = conn.peer
        if conn.state == _READING and conn.idle:
            self.counters["idle_closed"] += 1
            log.debug("uid=%s pid=%s: idle for %g s; closed", uid, pid, self._idle_timeout_s)
            self._conns.close(conn)
        elif conn.state == _READING:
            self.counters["timed_out"] += 1
            log.info(
                "uid=%s pid=%s: request not complete within %g s (%d bytes received); closed",
                uid,
                pid,
                self._request_timeout_s,
                len(conn.inbuf),
            )
            self._conns.abort(
                conn,
                error_reply(
                    "timeout",
                    f"the request line did not arrive within {self._request_timeout_s:g} s; "
                    "closing the connection",
                ),
            )
        else:
            self.counters["unread_reply"] += 1
            log.info(
                "uid=%s pid=%s: reply not read within %g s; closed",
                uid,
                pid,
                self._request_timeout_s,
            )
            self._conns.close(conn)
