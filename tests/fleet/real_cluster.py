"""A real Slurm cluster of two nodes on one host for the cluster budget tests (issue 45).

munged, slurmctld and one ``slurmd -N nodeK`` per node (each NodeName with its own Port=, as
/work/shared/specs/real-services.md measured), every node with its own fake NVML driver
(config and state files: an A100 at index 0, a T4 at index 1, UUIDs of its own), its own
journal directory and its own governor daemon (a subprocess, ``governor daemon --config``).
The Slurm prolog/epilog of deploy/slurm/ run behind a wrapper that picks the node's driver
and settings by ``SLURMD_NODENAME``. Everything is started from one private directory and
stopped by pid.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional, Tuple

from fakes.nvml import FakeNvml, Gpu
from fleet_services import (
    REPO,
    Stack,
    free_port,
    governor_wrapper,
    start_munged,
    stop_process,
    wait_for,
    which,
)

NODES = ("node1", "node2")
#: per node: the UUIDs of its A100 (index 0) and T4 (index 1)
UUIDS = {
    "node1": ("GPU-a1000001-2222-3333-4444-555555555555", "GPU-7e540001-aaaa-bbbb-cccc-dddddddddddd"),
    "node2": ("GPU-a1000002-2222-3333-4444-555555555555", "GPU-7e540002-aaaa-bbbb-cccc-dddddddddddd"),
}  # fmt: skip
DEFAULT_LIMITS_W = (400.0, 70.0)  # the fake A100's and T4's default power limits
MIN_CAPS_W = (100.0, 60.0)


class Node:
    """One simulated node: its fake driver's files, its daemon and its settings."""

    def __init__(self, name: str, work: Path, lib_dir: Path) -> None:
        self.name = name
        self.dir = work / name
        for sub in ("fake", "state", "jobs", "data"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "fake" / "config"
        self.state_path = self.dir / "fake" / "state"
        lines = ["gpus = 2", "unprivileged = 0"]
        for i, uuid in enumerate(UUIDS[name]):
            # the jobs' GPUs draw near their top (the fake's power does not follow the cap): the
            # service's online refinement then keeps each job's curve as its load kind gives
            watts = 390000 if i == 0 else 65000
            lines += Gpu(uuid=uuid, power_mw=watts, instant_mw=watts, average_mw=watts).lines(i)
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.socket = work / "s" / f"{name}.sock"
        self.env = {
            "LD_LIBRARY_PATH": str(lib_dir),
            "FAKE_NVML_CONFIG": str(self.config),
            "FAKE_NVML_STATE": str(self.state_path),
            "FAKE_NVML_FAULTS": str(self.dir / "fake" / "faults"),
            "GOVERNOR_STATE_DIR": str(self.dir / "state"),
        }
        self.daemon: Optional[subprocess.Popen] = None

    def limits_w(self) -> Tuple[float, ...]:
        """The power limits the node's fake driver holds (its state file), in W."""
        if not self.state_path.exists():
            return DEFAULT_LIMITS_W
        states = FakeNvml.state(SimpleNamespace(state_path=self.state_path))  # type: ignore[arg-type]
        if not states:
            return DEFAULT_LIMITS_W
        return tuple(s.power_limit_mw / 1000.0 for s in states)

    def gpu_states(self):
        return FakeNvml.state(SimpleNamespace(state_path=self.state_path))  # type: ignore[arg-type]

    def daemon_config(self) -> Path:
        path = self.dir / "daemon.toml"
        path.write_text(
            "\n".join(
                [
                    "[daemon]",
                    f'socket = "{self.socket}"',
                    'socket_group = "nogroup"',
                    "test_mode = true",
                    f'job_records = "{self.dir / "jobs"}"',
                    '[[device]]\nuri = "nvml:0"',
                    '[[device]]\nuri = "nvml:1"',
                ]
            )
            + "\n",
            encoding="utf-8",
        )
        return path

    def start_daemon(self, stack_env: Dict[str, str]) -> None:
        env = dict(stack_env, **self.env)
        log = open(self.dir / "daemon.out", "ab")
        self.daemon = subprocess.Popen(
            [sys.executable, "-m", "governor", "daemon", "--config", str(self.daemon_config())],
            env=dict(env, PYTHONPATH=str(REPO)),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        proc = self.daemon

        def up() -> bool:
            if proc.poll() is not None:
                out = (self.dir / "daemon.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.name}'s daemon exited ({proc.returncode}): {out}")
            return self.socket.exists()

        wait_for(f"{self.name}'s daemon socket", up, 30, 0.1)

    def stop_daemon(self, sig: int = signal.SIGTERM) -> None:
        proc, self.daemon = self.daemon, None
        stop_process(proc, sig)


class Sampler:
    """Reads every node's fake driver every few ms and keeps the largest sum of limits."""

    def __init__(self, nodes: List[Node]) -> None:
        self.nodes = nodes
        self.worst_w = 0.0
        self.worst_at: Tuple[float, ...] = ()
        self.samples = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.sample()  # one sample before the thread: a busy machine may not run it soon
        self._thread.start()
        return self

    def sample(self) -> None:
        """Read every fake driver once (also called by the tests, so none depends on when
        the thread gets the CPU)."""
        with self._lock:
            limits = tuple(w for n in self.nodes for w in n.limits_w())
            self.samples += 1
            if sum(limits) > self.worst_w:
                self.worst_w, self.worst_at = sum(limits), limits

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class Cluster:
    """The whole set-up; ``start()`` brings up Slurm and the daemons, ``service()`` the
    budget service."""

    def __init__(self, work: Path, lib_dir: Path) -> None:
        self.w = work
        work.mkdir(parents=True, exist_ok=True)
        work.chmod(0o755)
        (work / "s").mkdir(exist_ok=True)
        (work / "s").chmod(0o755)
        (work / "out").mkdir(exist_ok=True)
        (work / "out").chmod(0o777)
        self.lib_dir = lib_dir
        self.nodes = {name: Node(name, work, lib_dir) for name in NODES}
        self.stack: Optional[Stack] = None
        self.service_proc: Optional[subprocess.Popen] = None
        self.metrics_port = 0
        self.slurmd: Dict[str, subprocess.Popen] = {}

    # -- Slurm ---------------------------------------------------------------------------------
    def _write_conf(self) -> None:
        w = self.w
        for sub in ("ctld-state", "dev"):
            (w / sub).mkdir(exist_ok=True)
        gres, node_lines = [], []
        for name in NODES:
            for i, kind in enumerate(("a100", "t4")):
                link = w / "dev" / f"{name}-gpu{i}"
                if not link.exists():
                    link.symlink_to("/dev/null")
                gres.append(f"NodeName={name} Name=gpu Type={kind} File={link}")
            node_lines.append(
                f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={free_port()} "
                "CPUs=1 RealMemory=500 Gres=gpu:a100:1,gpu:t4:1 State=UNKNOWN"
            )
        (w / "gres.conf").write_text("\n".join(gres) + "\n", encoding="utf-8")
        gov = governor_wrapper(w)
        for node in self.nodes.values():
            (node.dir / "governor-slurm.conf").write_text(
                f"GOVERNOR_BIN={gov}\nGOVERNOR_POLICY=none\nGOVERNOR_VIA=daemon\n"
                f"GOVERNOR_DAEMON_SOCKET={node.socket}\nGOVERNOR_RECORD_DIR={node.dir}/jobs\n"
                f"GOVERNOR_STATE_DIR={node.dir}/prolog-state\nGOVERNOR_DATA_DIR={node.dir}/data\n"
                f"GOVERNOR_SYSLOG=0\nGOVERNOR_STRICT=0\nGOVERNOR_GRES_CONF={w}/gres.conf\n",
                encoding="utf-8",
            )
            exports = "".join(
                f"export {k}={v}\n" for k, v in node.env.items() if k != "GOVERNOR_STATE_DIR"
            )
            (node.dir / "env.sh").write_text(
                exports + f"export GOVERNOR_SLURM_CONF={node.dir}/governor-slurm.conf\n",
                encoding="utf-8",
            )
        for mode in ("prolog", "epilog"):
            script = w / f"{mode}.sh"
            script.write_text(
                "#!/bin/bash\n# slurmd clears the environment: this node's fake driver and settings\n"
                f'. "{w}/$SLURMD_NODENAME/env.sh"\n'
                f"exec {REPO}/deploy/slurm/{mode}.sh\n",
                encoding="utf-8",
            )
            script.chmod(0o755)
        ctld = free_port()
        (w / "slurm.conf").write_text(
            f"""ClusterName=test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={w}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld}
StateSaveLocation={w}/ctld-state
SlurmdSpoolDir={w}/spool-%n
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd-%n.pid
SlurmctldLogFile={w}/slurmctld.log
SlurmdLogFile={w}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
Prolog={w}/prolog.sh
Epilog={w}/epilog.sh
PrologFlags=Alloc
PrologEpilogTimeout=90
KillWait=2
MinJobAge=600
ReturnToService=2
SlurmdTimeout=5
MailProg=/bin/true
MpiDefault=none
{chr(10).join(node_lines)}
PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""",
            encoding="utf-8",
        )

    def start(self) -> None:
        w = self.w
        self._write_conf()
        key = w / "munge.key"
        key.write_bytes(secrets.token_bytes(128))
        key.chmod(0o600)
        stack = self.stack = Stack(w)
        start_munged(stack, w, key)
        stack.start("slurmctld", [which("slurmctld"), "-D", "-i"])
        wait_for("slurmctld", lambda: "UP" in stack.run("scontrol", "ping", check=False), 20)
        for name in NODES:
            self.start_slurmd(name)
        wait_for("both nodes idle", lambda: self.node_states() == ["idle", "idle"], 30)
        for node in self.nodes.values():
            node.start_daemon(stack.env)

    def start_slurmd(self, name: str) -> None:
        assert self.stack is not None
        self.slurmd[name] = self.stack.start(f"slurmd-{name}", [which("slurmd"), "-D", "-N", name])

    def node_states(self) -> List[str]:
        assert self.stack is not None
        out = self.stack.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)
        return [states.get(n, "").rstrip("*~#") for n in NODES]

    def run(self, *argv: str, check: bool = True) -> str:
        assert self.stack is not None
        return self.stack.run(*argv, check=check)

    def submit(self, *args: str) -> str:
        out = self.run("sbatch", "--parsable", "--no-requeue", "-o", "/dev/null", *args)
        return out.strip().split(";")[0]

    def job_state(self, job: str) -> str:
        out = self.run("scontrol", "show", "job", job, check=False)
        for word in out.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    # -- the service ---------------------------------------------------------------------------
    def start_service(self, budget_w: float, period_s: float = 1.0, lease_s: float = 3.0) -> None:
        assert self.stack is not None
        self.metrics_port = free_port()
        log = open(self.w / "service.out", "ab")
        self.service_proc = subprocess.Popen(
            [
                str(self.w / "governor"),
                "cluster",
                "--budget-w",
                f"{budget_w:g}",
                "--period-s",
                f"{period_s:g}",
                "--lease-s",
                f"{lease_s:g}",
                "--daemon-socket",
                str(self.w / "s" / "{node}.sock"),
                "--metrics-listen",
                f"127.0.0.1:{self.metrics_port}",
            ],
            env=self.stack.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()

    def stop_service(self, sig: int = signal.SIGTERM) -> None:
        proc, self.service_proc = self.service_proc, None
        stop_process(proc, sig)

    def service_log(self) -> str:
        path = self.w / "service.out"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def metrics(self) -> str:
        import urllib.request

        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            return r.read().decode()

    def limits_w(self) -> Dict[str, Tuple[float, ...]]:
        return {name: node.limits_w() for name, node in self.nodes.items()}

    def total_w(self) -> float:
        return sum(w for node in self.nodes.values() for w in node.limits_w())

    # -- the end -------------------------------------------------------------------------------
    def stop(self) -> None:
        self.stop_service()
        if self.stack is not None and self.stack.alive("slurmctld"):
            for name in NODES:
                self.run("scancel", "--full", "-w", name, check=False)
            try:
                wait_for(
                    "no job left",
                    lambda: not self.run("squeue", "-h", check=False).strip(),
                    30,
                    0.5,
                )
            except TimeoutError:
                pass
        for node in self.nodes.values():
            node.stop_daemon()
        if self.stack is not None:
            self.stack.stop()
        self._kill_strays()

    def _kill_strays(self) -> None:
        """Job steps a killed slurmd left running carry ``SLURM_CONF=<this dir>``."""
        marker = f"SLURM_CONF={self.w}/slurm.conf".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass

    def reset_node(self, name: str) -> str:
        """``governor reset`` on a node whose daemon was killed: its journal put back."""
        node = self.nodes[name]
        env = dict(os.environ, **node.env, PYTHONPATH=str(REPO))
        done = subprocess.run(
            [sys.executable, "-m", "governor", "reset", "--all"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout + done.stderr


def wait_until(what: str, check, timeout_s: float = 60.0):
    return wait_for(what, check, timeout_s, 0.1)


def now() -> float:
    return time.monotonic()
