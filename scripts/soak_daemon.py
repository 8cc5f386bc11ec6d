"""Soak of the governor daemon: many clients locking, resetting and asking status on several
GPUs for a long time, with driver faults flipped on and off (not a timed test).

    python scripts/soak_daemon.py [--duration-s 90] [--clients 12] [--gpus 2]
                                  [--faults lost,flaky,wedged] [--fault-every-s 10]

Builds the test stand-in of the NVIDIA driver (``tests/fakes/nvml``, a C library the real
nvidia-ml-py loads; needs a C compiler) with ``--gpus`` GPUs, starts a real daemon
(``governor daemon --test-mode`` in a subprocess, as root would run it: the backend's root
check is the only thing patched) serving ``nvml:0`` ... on a Unix socket in a fresh temporary
directory, then for ``--duration-s``:

- ``--clients`` clients, each a thread with the real client (:class:`DaemonClient`, a
  connection per request), take turns through ``lock`` (a random clock of a random GPU),
  ``status`` (every GPU) and ``reset`` (that GPU), back to back, timing each round trip;
- a fault thread flips one fault at a time on the last GPU, ``--fault-every-s`` on and as
  long off, in turn from ``--faults``: ``lost`` (off the bus), ``flaky`` (every third call
  times out), ``wedged`` (every call blocks until the fault is lifted); ``none``: no fault;
- the daemon's RSS and open descriptors are read from ``/proc`` every ``--sample-every-s``.

Prints requests served, errors by kind, p50/p99/max latency (all, and per GPU), RSS and
descriptors over time and their growth from ``--warmup-s`` (20 s) to the end, and the devices'
state at the end (the daemon's ``status`` and the driver's own state file). Exits 1 if a
request went unanswered (a client-side timeout or a dropped connection), or, when no fault
is flipped, if p99 is above ``--p99-limit-ms`` (100) or RSS grows more than ``--rss-limit-mib``
(8) or descriptors more than ``--fd-limit`` (4).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Counter, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from governor.devices.daemon.client import DaemonClient  # noqa: E402
from governor.errors import GovernorError  # noqa: E402

# the daemon, run as root would run it: the backend's root check is the one thing patched
DAEMON = (
    "import sys, runpy, os\n"
    "import governor.devices.nvml as backend\n"
    "backend._is_root = lambda: True\n"
    "if os.environ.get('SOAK_SHOW_STALLS'):\n"
    "    exec(os.environ['SOAK_SHOW_STALLS'])\n"
    "if os.environ.get('SOAK_TRACE_MEMORY'):\n"
    "    exec(os.environ['SOAK_TRACE_MEMORY'])\n"
    "sys.argv = ['governor'] + sys.argv[1:]\n"
    "runpy.run_module('governor', run_name='__main__')\n"
)

# --show-stalls: a thread in the daemon that prints the stack of a worker busy on one line of
# code for more than 1.5 s (how the 5 s stall of issue 47 was found: scontrol under a lock)
STALL_WATCH = """
import threading, time, traceback
def _watch_stalls():
    seen = {}
    while True:
        time.sleep(0.5)
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if 'worker' not in names.get(ident, ''):
                continue
            where = tuple((f.f_code.co_filename, n) for f, n in traceback.walk_stack(frame))
            if any(name.endswith('queue.py') for name, _ in where):
                seen.pop(ident, None)
                continue
            old = seen.get(ident)
            if old is None or old[0] != where:
                seen[ident] = (where, time.monotonic(), False)
            elif time.monotonic() - old[1] > 1.5 and not old[2]:
                seen[ident] = (where, old[1], True)
                stack = ''.join(traceback.format_stack(frame)[-8:])
                sys.stderr.write('STALL in ' + names[ident] + ':\\n' + stack)
threading.Thread(target=_watch_stalls, daemon=True).start()
"""

# --trace-memory: tracemalloc in the daemon, a baseline snapshot after the warm-up and, every
# sample, the allocation sites that grew most since it (and the live objects by type and the
# threads), written to a file the soak prints at the end (how the slow RSS growth was traced)
TRACE_MEMORY = """
import collections, ctypes, gc, threading, time, tracemalloc
class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        'arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks', 'fsmblks', 'uordblks',
        'fordblks', 'keepcost')]
try:
    _mallinfo2 = ctypes.CDLL(None).mallinfo2
    _mallinfo2.restype = _Mallinfo2
except AttributeError:  # glibc before 2.33, or not glibc
    _mallinfo2 = None
def _malloc_kib():
    if _mallinfo2 is None:
        return 'mallinfo2: n/a'
    m = _mallinfo2()
    return 'malloc: in use %.0f KiB, free %.0f KiB, heap %.0f KiB, mmapped %.0f KiB' % (
        m.uordblks / 1024, m.fordblks / 1024, m.arena / 1024, m.hblkhd / 1024)
def _rss_kib():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS:'))
def _trace_memory():
    out, warmup_s, every_s = os.environ['SOAK_TRACE_FILE'], float(os.environ['SOAK_TRACE_WARMUP_S']), float(os.environ['SOAK_TRACE_EVERY_S'])
    frames = int(os.environ.get('SOAK_TRACE_FRAMES', '6'))
    if frames:
        tracemalloc.start(frames)
    began = time.monotonic()
    time.sleep(warmup_s)
    def types():
        return collections.Counter(type(o).__name__ for o in gc.get_objects())
    gc.collect()
    filters = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, '<frozen importlib._bootstrap>')]
    base = tracemalloc.take_snapshot().filter_traces(filters) if frames else None
    base_size = sum(stat.size for stat in base.statistics('filename')) if frames else 0
    base_types = types()
    def sizes():  # every container the collector sees, by id: (len, what it is)
        out = {}
        for o in gc.get_objects():
            if type(o) in (dict, list, set, collections.deque, collections.OrderedDict):
                out[id(o)] = (len(o), type(o).__name__, o)
        return out
    base_sizes = {k: v[0] for k, v in sizes().items()}
    while True:
        time.sleep(every_s)
        gc.collect()
        lines = ['--- %.0f s: RSS %d KiB; pymalloc blocks %d; threads %d; %s' % (
            time.monotonic() - began, _rss_kib(), sys.getallocatedblocks(), threading.active_count(), _malloc_kib())]
        if frames:
            snap = tracemalloc.take_snapshot().filter_traces(filters)
            size = sum(stat.size for stat in snap.statistics('filename'))
            lines.append('  Python objects traced %.1f KiB (%+.1f KiB since the baseline)' % (size / 1024, (size - base_size) / 1024))
            for stat in snap.compare_to(base, 'lineno')[:10]:
                lines.append('  %+9.1f KiB %+7d blocks  %s' % (stat.size_diff / 1024, stat.count_diff, stat.traceback[0]))
            for stat in snap.compare_to(base, 'traceback')[:2]:
                lines.append('  %+9.1f KiB %+7d blocks, from:' % (stat.size_diff / 1024, stat.count_diff))
                lines.extend('      ' + str(frame) for frame in list(stat.traceback)[-6:])
            del snap
        sys.stderr.write('--- %.0f s\\n' % (time.monotonic() - began))
        sys._debugmallocstats()  # pymalloc's arenas and pools, on the daemon's stderr (its log)
        now_sizes = sizes()
        growth = sorted(((n - base_sizes[k], n, name, o) for k, (n, name, o) in now_sizes.items() if k in base_sizes), key=lambda g: -g[0])[:4]
        for d, n, name, o in growth:
            sample = list(o)[:3] if not isinstance(o, dict) else list(o.items())[:2]
            lines.append('  container grown %+d to %d: %s %s' % (d, n, name, repr(sample)[:160]))
        del now_sizes, growth
        grown = (types() - base_types).most_common(8)
        lines.append('  objects grown by type: ' + ', '.join('%s +%d' % kv for kv in grown))
        with open(out, 'a') as f:
            f.write('\\n'.join(lines) + '\\n')
threading.Thread(target=_trace_memory, name='soak-trace-memory', daemon=True).start()
"""

# the fake driver's clock table (graphics MHz at the top memory clock) of each built-in GPU
CLOCKS_MHZ = {0: (900, 1005, 1110, 1215, 1305, 1410), 1: (600, 795, 900, 1005, 1200, 1590)}


def build_fake(workdir: Path, gpus: int) -> Dict[str, str]:
    """Build the fake driver; returns the environment a daemon loads it with."""
    from fakes.nvml import build_library

    lib_dir = build_library(workdir / "lib")
    (workdir / "nvml").mkdir()
    (workdir / "nvml" / "config").write_text(f"gpus = {gpus}\n")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(lib_dir) + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    env["FAKE_NVML_CONFIG"] = str(workdir / "nvml" / "config")
    env["FAKE_NVML_STATE"] = str(workdir / "nvml" / "state")
    env["FAKE_NVML_FAULTS"] = str(workdir / "nvml" / "faults")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["GOVERNOR_STATE_DIR"] = str(workdir / "state")
    env["GOVERNOR_DATA_DIR"] = str(workdir / "data")
    return env


def start_daemon(
    workdir: Path, env: Dict[str, str], gpus: int, extra: str, wrapper: str = ""
) -> subprocess.Popen:
    devices = "".join(f'[[device]]\nuri = "nvml:{i}"\n' for i in range(gpus))
    config = workdir / "daemon.toml"
    config.write_text(
        f'[daemon]\nsocket = "{workdir / "run" / "governor.sock"}"\n{extra}\n{devices}'
    )
    with open(workdir / "daemon.log", "w") as log:
        return subprocess.Popen(
            wrapper.split()
            + [sys.executable, "-c", DAEMON, "daemon", "--config", str(config), "--test-mode"],
            stdout=log,
            stderr=log,
            env=env,
            cwd=str(REPO),
            start_new_session=bool(wrapper),  # stopped as a group: the wrapper and the daemon
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


def stop_daemon(proc: subprocess.Popen, group: bool = False) -> None:
    """SIGTERM (the daemon restores its devices), SIGKILL after 30 s; ``group``: to the
    daemon's whole process group (a --daemon-wrapper and the daemon under it)."""
    if proc.poll() is not None:
        return
    signal_it = (lambda sig: os.killpg(proc.pid, sig)) if group else proc.send_signal
    signal_it(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        signal_it(signal.SIGKILL)
        proc.wait(15)


class Stats:
    """What the clients saw (one lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies_s: List[Tuple[str, str, float]] = []  # (action, device, seconds)
        self.errors: Counter[str] = collections.Counter()
        self.unanswered: Counter[str] = collections.Counter()


def client(
    path: Path, gpus: int, end: float, stats: Stats, seed: int, timeout_s: float, rate_hz: float
) -> None:
    rng = random.Random(seed)
    daemon = DaemonClient(path, timeout_s=timeout_s)
    turn = rng.randrange(3)
    period_s = 1.0 / rate_hz if rate_hz > 0 else 0.0
    next_s = time.monotonic() + rng.random() * period_s
    while time.monotonic() < end:
        if period_s:
            wait_s = next_s - time.monotonic()
            if wait_s > 0:
                time.sleep(wait_s)
            next_s = max(next_s + period_s, time.monotonic())
        action = ("lock", "status", "reset")[turn % 3]
        turn += 1
        gpu = rng.randrange(gpus)
        device = f"nvml:{gpu}"
        params: Dict[str, Any] = {}
        if action == "lock":
            params = {"device": device, "min_mhz": rng.choice(CLOCKS_MHZ[gpu % 2])}
        elif action == "reset":
            params = {"device": device}
        else:
            device = "all"
        began = time.perf_counter()
        try:
            reply = daemon.send_raw((json.dumps({"action": action, **params}) + "\n").encode())
        except GovernorError as err:  # no reply: a timeout or a dropped connection
            with stats.lock:
                stats.unanswered[type(err).__name__ + ": " + str(err)[:60]] += 1
            continue
        took = time.perf_counter() - began
        with stats.lock:
            stats.latencies_s.append((action, device, took))
            if not reply.get("ok"):
                error = str(reply.get("error", ""))
                why = "not responding" if "not responding" in error else error[:40]
                stats.errors[f"{action} {device}: {reply.get('code')} ({why})"] += 1


def flip_faults(
    env: Dict[str, str], kinds: List[str], gpu: int, every_s: float, end: float, log: List[str]
) -> None:
    faults = Path(env["FAKE_NVML_FAULTS"])
    hang = Path(env["FAKE_NVML_STATE"] + f".hang{gpu}")
    began = time.monotonic()
    turn = 0
    while time.monotonic() + every_s < end:
        time.sleep(every_s)  # a quiet spell, then the next fault
        kind = kinds[turn % len(kinds)]
        turn += 1
        if time.monotonic() + every_s >= end:
            break
        log.append(f"{time.monotonic() - began:6.1f} s: nvml:{gpu} {kind}")
        if kind == "lost":
            faults.write_text(f"gpu.{gpu}.lost = 1\n")
        elif kind == "flaky":
            faults.write_text(f"gpu.{gpu}.flaky = 3:10\n")
        elif kind == "wedged":
            hang.write_text("hang\n")
        time.sleep(every_s)
        faults.write_text("")
        if hang.exists():
            hang.unlink()
        log.append(f"{time.monotonic() - began:6.1f} s: nvml:{gpu} back")


def proc_usage(pid: int) -> Tuple[float, int]:
    """(RSS in MiB, open descriptors) of process ``pid``."""
    rss_kib = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return rss_kib / 1024.0, len(os.listdir(f"/proc/{pid}/fd"))


def percentile(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100.0 * (len(ordered) - 1))))]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=90.0)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--faults", default="lost,flaky,wedged", help="in turn, or 'none'")
    parser.add_argument("--fault-every-s", type=float, default=10.0)
    parser.add_argument(
        "--rate-hz",
        type=float,
        default=4.0,
        help="requests per second per client (0: back to back)",
    )
    parser.add_argument("--sample-every-s", type=float, default=5.0)
    parser.add_argument("--warmup-s", type=float, default=20.0)
    parser.add_argument("--client-timeout-s", type=float, default=30.0)
    parser.add_argument("--deadlines", default="", help="$GOVERNOR_DEVICE_DEADLINES, e.g. 0.5")
    parser.add_argument("--daemon-config", default="", help="extra [daemon] lines")
    parser.add_argument(
        "--daemon-wrapper",
        default="",
        help="a command the daemon runs under, e.g. 'heaptrack -o /tmp/soak' (a memory profiler)",
    )
    parser.add_argument("--p99-limit-ms", type=float, default=100.0)
    parser.add_argument("--rss-limit-mib", type=float, default=8.0)
    parser.add_argument("--fd-limit", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="also print the result as JSON")
    parser.add_argument(
        "--show-stalls", action="store_true", help="print where a daemon worker stays > 1.5 s"
    )
    parser.add_argument(
        "--trace-memory",
        action="store_true",
        help="print the daemon's memory by kind (malloc, pymalloc, threads) every sample, and "
        "with --trace-frames the allocation sites grown since --warmup-s (tracemalloc)",
    )
    parser.add_argument(
        "--trace-frames",
        type=int,
        default=0,
        help="frames tracemalloc keeps per allocation (0: no tracemalloc, which costs time and "
        "memory of its own)",
    )
    args = parser.parse_args(argv)
    if not (0 < args.duration_s <= 86400):
        parser.error("--duration-s must be above 0 and at most 86400")
    if not (1 <= args.gpus <= 8) or args.clients < 1:
        parser.error("--gpus must be 1-8 and --clients at least 1")
    kinds = [k.strip() for k in args.faults.split(",") if k.strip() and k.strip() != "none"]
    if any(k not in ("lost", "flaky", "wedged") for k in kinds):
        parser.error("--faults: lost, flaky, wedged (comma-separated) or none")

    workdir = Path(tempfile.mkdtemp(prefix="gvd-soak-"))
    env = build_fake(workdir, args.gpus)
    if args.deadlines:
        env["GOVERNOR_DEVICE_DEADLINES"] = args.deadlines
    if args.show_stalls:
        env["SOAK_SHOW_STALLS"] = STALL_WATCH
    trace_file = workdir / "tracemalloc.txt"
    if args.trace_memory:
        env["SOAK_TRACE_MEMORY"] = TRACE_MEMORY
        env["SOAK_TRACE_FILE"] = str(trace_file)
        env["SOAK_TRACE_WARMUP_S"] = str(args.warmup_s)
        env["SOAK_TRACE_EVERY_S"] = str(args.sample_every_s)
        env["SOAK_TRACE_FRAMES"] = str(args.trace_frames)
    proc = start_daemon(workdir, env, args.gpus, args.daemon_config, args.daemon_wrapper)
    path = workdir / "run" / "governor.sock"
    usage: List[Tuple[float, float, int]] = []
    fault_log: List[str] = []
    try:
        wait_ready(path, proc)
        stats = Stats()
        began = time.monotonic()
        end = began + args.duration_s
        threads = [
            threading.Thread(
                target=client,
                args=(path, args.gpus, end, stats, seed, args.client_timeout_s, args.rate_hz),
                daemon=True,
            )
            for seed in range(args.clients)
        ]
        if kinds:
            threads.append(
                threading.Thread(
                    target=flip_faults,
                    args=(env, kinds, args.gpus - 1, args.fault_every_s, end, fault_log),
                    daemon=True,
                )
            )
        for thread in threads:
            thread.start()
        while time.monotonic() < end:
            usage.append((time.monotonic() - began, *proc_usage(proc.pid)))
            time.sleep(min(args.sample_every_s, max(0.0, end - time.monotonic())))
        for thread in threads:
            thread.join(args.client_timeout_s + 15.0)
        usage.append((time.monotonic() - began, *proc_usage(proc.pid)))
        elapsed = time.monotonic() - began
        status = DaemonClient(path, timeout_s=30.0).request("status")
        driver = Path(env["FAKE_NVML_STATE"])
        driver_state = driver.read_text() if driver.exists() else ""
        if proc.poll() is not None:
            print(f"the daemon died during the run (status {proc.returncode})", file=sys.stderr)
            return 1
    finally:
        stop_daemon(proc, group=bool(args.daemon_wrapper))
        driver = Path(env["FAKE_NVML_STATE"])
        after_stop = driver.read_text() if driver.exists() else ""
        daemon_log = (workdir / "daemon.log").read_text(errors="replace")
        if args.show_stalls:
            sys.stderr.write(
                "".join(
                    line + "\n"
                    for line in daemon_log.splitlines()
                    if "STALL" in line or line.startswith("  ")
                )
            )
        if args.trace_memory and trace_file.exists():
            sys.stderr.write(trace_file.read_text())
            sys.stderr.write(  # pymalloc's own account (sys._debugmallocstats) at each sample
                "".join(
                    line + "\n"
                    for line in daemon_log.splitlines()
                    if line.startswith(("--- ", "# arenas allocated current", "Total  "))
                    or "bytes in allocated blocks" in line
                    or "bytes in available blocks" in line
                    or "unused pools" in line
                )
            )
        shutil.rmtree(workdir, ignore_errors=True)
    restored = [line for line in after_stop.splitlines() if line.startswith("gpu ")]
    print_state = "\n".join(["driver state after the daemon stopped:"] + restored)
    code = report(args, kinds, stats, elapsed, usage, status, driver_state, fault_log, daemon_log)
    print(print_state)
    return code


def report(
    args: argparse.Namespace,
    kinds: List[str],
    stats: Stats,
    elapsed_s: float,
    usage: List[Tuple[float, float, int]],
    status: Dict[str, Any],
    driver_state: str,
    fault_log: List[str],
    daemon_log: str,
) -> int:
    lat = [s for _, _, s in stats.latencies_s]
    print(
        f"governor daemon soak: {args.gpus} GPUs (fake NVML under nvidia-ml-py), "
        f"{args.duration_s:g} s, {args.clients} clients (lock, status, reset in turn, "
        + (f"{args.rate_hz:g}/s each" if args.rate_hz > 0 else "back to back")
        + "), "
        f"faults: {', '.join(kinds) or 'none'}"
        + (f" ({args.fault_every_s:g} s on, {args.fault_every_s:g} s off)" if kinds else "")
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        f", load average {os.getloadavg()[0]:.1f}"
    )
    rows = [
        ("requests answered", f"{len(lat)} ({len(lat) / elapsed_s:.0f}/s)"),
        ("requests unanswered", f"{sum(stats.unanswered.values())}"),
        ("latency p50 / p99 / max (all)", _ms(lat)),
    ]
    for action in ("lock", "status", "reset"):
        values = [s for a, _, s in stats.latencies_s if a == action]
        rows.append((f"latency p50 / p99 / max ({action})", _ms(values)))
    for gpu in range(args.gpus):
        values = [s for a, d, s in stats.latencies_s if d == f"nvml:{gpu}"]
        rows.append((f"latency p50 / p99 / max (lock, reset nvml:{gpu})", _ms(values)))
    slow = sum(1 for s in lat if s > 1.0)
    rows.append(("requests slower than 1 s", f"{slow}"))
    errors = sum(stats.errors.values())
    rows.append(("error replies", f"{errors}"))
    width = max(len(name) for name, _ in rows)
    print(f"| {'measure'.ljust(width)} | value |")
    print(f"| {'-' * width} | ----- |")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")
    if stats.errors:
        print("\nerror replies by kind:")
        for kind, count in stats.errors.most_common():
            print(f"  {count:6d}  {kind}")
    if stats.unanswered:
        print("\nunanswered requests by kind:")
        for kind, count in stats.unanswered.most_common():
            print(f"  {count:6d}  {kind}")
    if fault_log:
        print("\nfaults: " + "; ".join(line.strip() for line in fault_log))
    print("\n| t (s) | daemon RSS (MiB) | open fds |")
    print("| ----- | ---------------- | -------- |")
    step = max(1, len(usage) // 12)
    for t_s, rss, fds in usage[::step] + ([usage[-1]] if (len(usage) - 1) % step else []):
        print(f"| {t_s:5.0f} | {rss:16.1f} | {fds:8d} |")
    after = [u for u in usage if u[0] >= args.warmup_s] or usage[-1:]
    rss_growth = after[-1][1] - after[0][1]
    fd_growth = after[-1][2] - after[0][2]
    print(
        f"\ngrowth from {after[0][0]:.0f} s to the end: RSS {rss_growth:+.1f} MiB, "
        f"fds {fd_growth:+d}"
    )
    print("\ndevices at the end (daemon status; driver state file):")
    for dev in status.get("devices", []):
        print(
            f"  {dev['uri']}: state {json.dumps(dev.get('state'))}, changed {dev.get('changed')}"
            f", responding {dev.get('responding', '?')}"
            + (f", state_error {dev['state_error']!r}" if dev.get("state_error") else "")
        )
    for line in driver_state.splitlines():
        if line.startswith("gpu "):
            print("  driver: " + line)
    said = sum(
        1
        for line in daemon_log.splitlines()
        if "retried in the background" in line and " -> " not in line
    )
    print(
        f"daemon log: 'not responding' said {said} times, 'answers again' "
        f"{daemon_log.count('answers again')} times"
    )
    if args.json:
        doc = {
            "answered": len(lat),
            "unanswered": dict(stats.unanswered),
            "errors": dict(stats.errors),
            "p50_ms": percentile(lat, 50) * 1e3,
            "p99_ms": percentile(lat, 99) * 1e3,
            "max_ms": max(lat) * 1e3 if lat else None,
            "rss_growth_mib": rss_growth,
            "fd_growth": fd_growth,
            "usage": usage,
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
    failed = False
    if stats.unanswered or not lat:
        print("FAIL: requests went unanswered", file=sys.stderr)
        failed = True
    if not kinds:
        p99_ms = percentile(lat, 99) * 1e3
        if p99_ms > args.p99_limit_ms:
            print(f"FAIL: p99 {p99_ms:.1f} ms > {args.p99_limit_ms:g} ms", file=sys.stderr)
            failed = True
        if rss_growth > args.rss_limit_mib or fd_growth > args.fd_limit:
            print("FAIL: RSS or descriptors grew past the limit", file=sys.stderr)
            failed = True
    return 1 if failed else 0


def _ms(values: List[float]) -> str:
    if not values:
        return "-"
    return (
        f"{percentile(values, 50) * 1e3:.1f} / {percentile(values, 99) * 1e3:.1f} / "
        f"{max(values) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
