"""Start a real single-node Slurm (munged, MariaDB, slurmdbd, slurmctld, slurmd) and a real
Prometheus from Debian's packages, each in the foreground from one private directory, and
stop each by its pid. Follows /work/shared/specs/real-services.md (what starts, how, when it
is ready). Loopback only; every wait is bounded.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sacct")
DBD_PROGRAMS = ("slurmdbd", "mariadbd", "mariadb-install-db", "mariadb", "sacctmgr")
REPO = Path(__file__).resolve().parents[2]


def which(name: str) -> Optional[str]:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + SBIN)


def missing(names) -> List[str]:
    return [n for n in names if which(n) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check: Callable[[], object], timeout_s: float, every_s: float = 0.2):
    """Poll ``check`` until it returns something true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(every_s)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Stack:
    """The daemons of one test module; ``stop()`` ends each by its pid."""

    def __init__(self, work: Path) -> None:
        self.w = work
        self.procs: List[subprocess.Popen] = []
        self.names: List[str] = []
        self.env = dict(os.environ, SLURM_CONF=str(work / "slurm.conf"))
        self.env["PATH"] = self.env.get("PATH", "") + ":" + SBIN

    def start(self, name: str, argv: List[str], env: Optional[Dict[str, str]] = None):
        log = open(self.w / f"{name}.out", "ab")
        proc = subprocess.Popen(
            argv,
            env=env or self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(self.w),
        )
        log.close()
        self.procs.append(proc)
        self.names.append(name)
        return proc

    def run(self, *argv: str, timeout_s: float = 30.0, check: bool = True) -> str:
        out = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout_s
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr}")
        return out.stdout + out.stderr

    def alive(self, name: str) -> bool:
        proc = self.procs[self.names.index(name)]
        return proc.poll() is None

    def stop(self) -> None:
        if "slurmctld" in self.names and self.alive("slurmctld"):
            self.run("scancel", "--full", "-w", "node1", check=False, timeout_s=10)
            try:
                wait_for(
                    "no job left",
                    lambda: not self.run("squeue", "-h", check=False, timeout_s=10).strip(),
                    30,
                    0.5,
                )
            except (TimeoutError, subprocess.TimeoutExpired):
                pass
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.procs.clear()
        self.names.clear()


def governor_wrapper(work: Path) -> Path:
    """``$W/governor``: this checkout's governor under this Python, by absolute path."""
    path = work / "governor"
    path.write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m governor "$@"\n', encoding="utf-8"
    )
    path.chmod(0o755)
    return path


def stop_process(proc: Optional[subprocess.Popen], sig: int = signal.SIGTERM) -> None:
    """Signal a service started by a test and wait for it (killed after 20 s)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def start_munged(stack: Stack, w: Path, key: Path) -> None:
    """munged in the foreground on ``w``'s socket with ``key``; returns once it listens."""
    stack.start(
        "munged",
        [
            which("munged"),
            "-F",
            f"--socket={w}/munge.sock",
            f"--key-file={key}",
            f"--pid-file={w}/munged.pid",
            f"--seed-file={w}/munged.seed",
            f"--log-file={w}/munged.log",
        ],
    )
    wait_for("munged socket", lambda: (w / "munge.sock").exists(), 10, 0.05)


def start_slurm(
    work: Path,
    fake_env: Dict[str, str],
    accounting: bool,
    gres: Optional[Tuple[str, str]] = None,
    extra_conf: str = "",
) -> Stack:
    """munged, (MariaDB + slurmdbd), slurmctld and slurmd, with the prolog/epilog of
    deploy/slurm/ behind a wrapper that gives them the fake NVML driver's environment.

    ``gres``: the node's ``Gres=`` and the text of gres.conf (``{w}`` stands for the work
    directory); default: a typed A100 on ``dev/gpu0`` and T4 on ``dev/gpu1``. ``extra_conf``:
    more ``VAR=value`` lines for the scripts' governor-slurm.conf (later lines win)."""
    w = work
    w.mkdir(parents=True, exist_ok=True)
    w.chmod(0o755)  # munged refuses a socket directory others cannot search
    for sub in ("ctld-state", "spool", "dev", "jobs"):
        (w / sub).mkdir(exist_ok=True)
    for i in (0, 1):
        link = w / "dev" / f"gpu{i}"
        if not link.exists():
            link.symlink_to("/dev/null")
    key = w / "munge.key"
    key.write_bytes(secrets.token_bytes(128))
    key.chmod(0o600)
    ctld, slurmd_port, dbd = free_port(), free_port(), free_port()
    gov = governor_wrapper(w)
    conf = w / "governor-slurm.conf"
    conf.write_text(
        f"GOVERNOR_BIN={gov}\nGOVERNOR_POLICY=ppw\nGOVERNOR_RECORD_DIR={w}/jobs\n"
        f"GOVERNOR_STATE_DIR={w}/gov-state\nGOVERNOR_DATA_DIR={w}/gov-data\n"
        f"GOVERNOR_SYSLOG=0\nGOVERNOR_STRICT=1\nGOVERNOR_GRES_CONF={w}/gres.conf\n" + extra_conf,
        encoding="utf-8",
    )
    for mode in ("prolog", "epilog"):
        script = w / f"{mode}.sh"
        script.write_text(
            "#!/bin/bash\n# slurmd clears the environment: give the scripts the fake driver\n"
            f"export LD_LIBRARY_PATH={fake_env['LD_LIBRARY_PATH']}\n"
            f"export FAKE_NVML_CONFIG={fake_env['FAKE_NVML_CONFIG']}\n"
            f"export FAKE_NVML_STATE={fake_env['FAKE_NVML_STATE']}\n"
            f"export GOVERNOR_SLURM_CONF={conf}\n"
            f"exec {REPO}/deploy/slurm/{mode}.sh\n",
            encoding="utf-8",
        )
        script.chmod(0o755)
    storage = (
        "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost\n"
        f"AccountingStoragePort={dbd}\nAccountingStoragePass={w}/munge.sock\n"
        "AccountingStorageTRES=gres/gpu\n"
        if accounting
        else "AccountingStorageType=accounting_storage/none\n"
    )
    (w / "slurm.conf").write_text(
        f"""ClusterName=test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={w}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld}
SlurmdPort={slurmd_port}
StateSaveLocation={w}/ctld-state
SlurmdSpoolDir={w}/spool
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd.pid
SlurmctldLogFile={w}/slurmctld.log
SlurmdLogFile={w}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
{storage}JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
Prolog={w}/prolog.sh
Epilog={w}/epilog.sh
PrologFlags=Alloc
PrologEpilogTimeout=90
KillWait=5
MinJobAge=600
ReturnToService=2
MailProg=/bin/true
MpiDefault=none
NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={min(2, os.cpu_count() or 1)} RealMemory=1000 Gres={gres[0] if gres else "gpu:a100:1,gpu:t4:1"} State=UNKNOWN
PartitionName=debug Nodes=node1 Default=YES MaxTime=INFINITE State=UP
""",
        encoding="utf-8",
    )
    # The fake driver: NVML GPU 0 is an A100 (minor 0), GPU 1 a T4 (minor 1).
    (w / "gres.conf").write_text(
        gres[1].replace("{w}", str(w))
        if gres
        else f"NodeName=node1 Name=gpu Type=a100 File={w}/dev/gpu0\n"
        f"NodeName=node1 Name=gpu Type=t4 File={w}/dev/gpu1\n",
        encoding="utf-8",
    )
    stack = Stack(w)
    try:
        start_munged(stack, w, key)
        if accounting:
            _start_dbd(stack, w, dbd)
        stack.start("slurmctld", [which("slurmctld"), "-D", "-i"])
        wait_for("slurmctld", lambda: "UP" in stack.run("scontrol", "ping", check=False), 20)
        slurmd_env = dict(stack.env, **{k: fake_env[k] for k in ("LD_LIBRARY_PATH",)})
        stack.start("slurmd", [which("slurmd"), "-D", "-N", "node1"], env=slurmd_env)
        wait_for(
            "slurmd idle",
            lambda: "idle" in stack.run("sinfo", "-h", "-o", "%T", check=False),
            30,
        )
        if accounting:
            wait_for(
                "cluster registered in slurmdbd",
                lambda: "test" in stack.run("sacctmgr", "-n", "list", "cluster", check=False),
                20,
                0.5,
            )
    except BaseException:
        stack.stop()
        raise
    return stack


def _start_dbd(stack: Stack, w: Path, port: int) -> None:
    db = w / "db"
    out = subprocess.run(
        [
            which("mariadb-install-db"),
            "--no-defaults",
            f"--datadir={db}",
            "--user=root",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"mariadb-install-db failed: {out.stderr[-500:]}")
    stack.start(
        "mariadbd",
        [
            which("mariadbd"),
            "--no-defaults",
            f"--datadir={db}",
            "--user=root",
            f"--socket={w}/mysql.sock",
            "--skip-networking",
            f"--pid-file={w}/mysqld.pid",
            f"--log-error={w}/mysqld.err",
            "--innodb-buffer-pool-size=64M",
        ],
    )
    wait_for("mariadb socket", lambda: (w / "mysql.sock").exists(), 30)
    password = secrets.token_hex(8)
    stack.run(
        which("mariadb"),
        "--no-defaults",
        "-S",
        f"{w}/mysql.sock",
        "-u",
        "root",
        "-e",
        f"create user 'slurm'@'localhost' identified by '{password}'; "
        "grant all on slurm_acct_db.* to 'slurm'@'localhost';",
    )
    conf = w / "slurmdbd.conf"
    conf.write_text(
        f"AuthType=auth/munge\nAuthInfo=socket={w}/munge.sock\nDbdHost=localhost\n"
        f"DbdPort={port}\nSlurmUser=root\nLogFile={w}/slurmdbd.log\nPidFile={w}/slurmdbd.pid\n"
        "StorageType=accounting_storage/mysql\nStorageHost=localhost\n"
        f"StorageLoc=slurm_acct_db\nStorageUser=slurm\nStoragePass={password}\n",
        encoding="utf-8",
    )
    conf.chmod(0o600)
    stack.start(
        "slurmdbd",
        [which("slurmdbd"), "-D"],
        env=dict(stack.env, MYSQL_UNIX_PORT=f"{w}/mysql.sock"),
    )
    wait_for("slurmdbd port", lambda: port_open(port), 30)
