"""Stress of the governor daemon by slow and normal clients (not a timed test).

    python scripts/stress_daemon.py [--duration-s 60] [--slow-clients 64] [--normal-clients 64]

Starts a real daemon (``governor daemon --test-mode`` in a subprocess) serving a simulated
board on a Unix socket in a fresh temporary directory, then for ``--duration-s`` runs:

- slow clients: each sends one byte of a ``status`` request every ``--slow-interval-s``
  (1.5 s) and reconnects whenever the daemon drops it;
- normal clients: each asks ``status`` through the real client
  (:class:`governor.devices.daemon.client.DaemonClient`, a connection per request) at
  ``--rate-hz`` requests per second (0: back to back), timing each round trip.

Prints requests served, the normal clients' latency (p50, p99, max), errors by kind, and how
often slow clients were dropped (by the daemon's reply). Exits 1 if p99 >= ``--p99-limit-ms``
(100) or no request was served. Everything stays on this machine: a Unix socket in a
temporary directory, a daemon that is stopped (SIGTERM, then SIGKILL) at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Counter, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from governor.devices.daemon.client import DaemonClient  # noqa: E402
from governor.errors import GovernorError  # noqa: E402

STATUS = b'{"action": "status"}\n'


def start_daemon(workdir: Path, board: str, extra_config: str) -> subprocess.Popen:
    config = workdir / "daemon.toml"
    config.write_text(
        "[daemon]\n"
        f'socket = "{workdir / "run" / "governor.sock"}"\n'
        f"{extra_config}\n"
        "[[device]]\n"
        f'uri = "{board}"\n'
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["GOVERNOR_STATE_DIR"] = str(workdir / "state")
    env["GOVERNOR_DATA_DIR"] = str(workdir / "data")
    with open(workdir / "daemon.log", "w") as log:  # the daemon keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "governor", "daemon", "--config", str(config), "--test-mode"],
            stdout=log,
            stderr=log,
            env=env,
            cwd=str(REPO),  # "-m governor" is this checkout's, whatever the caller's directory
        )


def wait_ready(path: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited early with status {proc.returncode}")
        try:
            DaemonClient(path, timeout_s=1.0).request("status")
            return
        except GovernorError:
            time.sleep(0.1)
    raise SystemExit(f"the daemon did not answer on {path} within {timeout_s:g} s")


def stop_daemon(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


class Stats:
    """What the clients saw (shared by the client threads; one lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies_s: List[float] = []
        self.errors: Counter[str] = collections.Counter()
        self.slow_drops: Counter[str] = collections.Counter()
        self.slow_connects = 0
        self.slow_completed = 0


def normal_client(path: Path, rate_hz: float, end: float, stats: Stats) -> None:
    client = DaemonClient(path, timeout_s=10.0)
    period = 1.0 / rate_hz if rate_hz > 0 else 0.0
    next_at = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= end:
            return
        if period and now < next_at:
            time.sleep(min(next_at - now, end - now))
            continue
        next_at = max(next_at + period, now) if period else now
        began = time.perf_counter()
        try:
            client.request("status")
        except GovernorError as err:
            kind = getattr(err, "code", None) or type(err).__name__
            with stats.lock:
                stats.errors[kind] += 1
            continue
        took = time.perf_counter() - began
        with stats.lock:
            stats.latencies_s.append(took)


def slow_client(path: Path, interval_s: float, end: float, stats: Stats) -> None:
    """Trickle a request one byte per ``interval_s``; reconnect whenever dropped."""
    while time.monotonic() < end:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(5.0)
            sock.connect(str(path))
        except OSError as err:
            with stats.lock:
                stats.errors[f"slow-connect:{type(err).__name__}"] += 1
            sock.close()
            time.sleep(interval_s)
            continue
        with stats.lock:
            stats.slow_connects += 1
        sent = 0
        try:
            while time.monotonic() < end:
                try:
                    sock.send(STATUS[sent % len(STATUS) : sent % len(STATUS) + 1])
                    sent += 1
                except OSError:
                    _record_drop(stats, b"")
                    break
                wait = min(interval_s, max(0.0, end - time.monotonic()))
                readable, _, _ = select.select([sock], [], [], wait)
                if readable:
                    _record_drop(stats, _read_reply(sock))
                    break
        finally:
            sock.close()


def _read_reply(sock: socket.socket) -> bytes:
    data = b""
    try:
        while b"\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data


def _record_drop(stats: Stats, data: bytes) -> None:
    kind = "closed"
    if data.strip():
        try:
            reply = json.loads(data.split(b"\n", 1)[0])
        except ValueError:
            reply = {}
        if reply.get("ok"):
            with stats.lock:
                stats.slow_completed += 1
            return
        kind = str(reply.get("code", "unreadable"))
    with stats.lock:
        stats.slow_drops[kind] += 1


def percentile(sorted_values: List[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100.0 * (len(sorted_values) - 1))))
    return sorted_values[index]


def report(args: argparse.Namespace, stats: Stats, elapsed_s: float) -> Dict[str, Any]:
    lat = sorted(stats.latencies_s)
    served = len(lat)
    return {
        "served": served,
        "throughput_per_s": served / elapsed_s if elapsed_s > 0 else 0.0,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "max_ms": (lat[-1] * 1e3) if lat else float("nan"),
        "errors": dict(stats.errors),
        "slow_connects": stats.slow_connects,
        "slow_drops": dict(stats.slow_drops),
        "slow_completed": stats.slow_completed,
    }


def print_table(args: argparse.Namespace, result: Dict[str, Any], daemon_log: str) -> None:
    rate = f"{args.rate_hz:g} req/s each" if args.rate_hz > 0 else "back to back"
    print(
        f"governor daemon stress: {args.board}, {args.duration_s:g} s, "
        f"{args.normal_clients} normal clients ({rate}), {args.slow_clients} slow clients "
        f"(1 byte / {args.slow_interval_s:g} s)"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(result["errors"].items())) or "none"
    drops = ", ".join(f"{k}: {v}" for k, v in sorted(result["slow_drops"].items())) or "none"
    rows = [
        ("requests served (normal)", f"{result['served']}"),
        ("throughput (normal)", f"{result['throughput_per_s']:.0f} req/s"),
        ("latency p50 (normal)", f"{result['p50_ms']:.2f} ms"),
        ("latency p99 (normal)", f"{result['p99_ms']:.2f} ms"),
        ("latency max (normal)", f"{result['max_ms']:.2f} ms"),
        ("errors by kind (normal)", errors),
        ("slow-client connections", f"{result['slow_connects']}"),
        ("slow-client connections dropped", f"{sum(result['slow_drops'].values())} ({drops})"),
        ("slow-client requests completed", f"{result['slow_completed']}"),
        ("daemon log: deadline misses", f"{daemon_log.count('request not complete within')}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"| {'measure'.ljust(width)} | value |")
    print(f"| {'-' * width} | ----- |")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--slow-clients", type=int, default=64)
    parser.add_argument("--normal-clients", type=int, default=64)
    parser.add_argument(
        "--rate-hz", type=float, default=5.0, help="status requests per second per normal client"
    )
    parser.add_argument("--slow-interval-s", type=float, default=1.5)
    parser.add_argument("--board", default="sim:agx-orin")
    parser.add_argument("--p99-limit-ms", type=float, default=100.0)
    parser.add_argument(
        "--daemon-config", default="", help="extra [daemon] lines, e.g. 'workers = 2'"
    )
    parser.add_argument("--json", action="store_true", help="also print the result as JSON")
    args = parser.parse_args(argv)
    if not (0 < args.duration_s <= 3600):
        parser.error("--duration-s must be above 0 and at most 3600")

    workdir = Path(tempfile.mkdtemp(prefix="gvd-stress-"))
    proc = start_daemon(workdir, args.board, args.daemon_config)
    path = workdir / "run" / "governor.sock"
    try:
        wait_ready(path, proc)
        stats = Stats()
        began = time.monotonic()
        end = began + args.duration_s
        threads = [
            threading.Thread(target=slow_client, args=(path, args.slow_interval_s, end, stats))
            for _ in range(args.slow_clients)
        ]
        threads += [
            threading.Thread(target=normal_client, args=(path, args.rate_hz, end, stats))
            for _ in range(args.normal_clients)
        ]
        for thread in threads:
            thread.daemon = True
            thread.start()
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()) + 15.0)
        elapsed = time.monotonic() - began
        if proc.poll() is not None:
            print(f"the daemon died during the run (status {proc.returncode})", file=sys.stderr)
            return 1
    finally:
        stop_daemon(proc)
    daemon_log = (workdir / "daemon.log").read_text(errors="replace")
    shutil.rmtree(workdir, ignore_errors=True)
    result = report(args, stats, elapsed)
    print_table(args, result, daemon_log)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    if result["served"] == 0:
        print("FAIL: no request of a normal client was served", file=sys.stderr)
        return 1
    if not result["p99_ms"] < args.p99_limit_ms:
        print(
            f"FAIL: p99 {result['p99_ms']:.2f} ms is not below {args.p99_limit_ms:g} ms",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
