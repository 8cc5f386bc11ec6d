"""Which devices a client of the daemon may change: the GPUs of its own job or session.

The socket's group says who may talk to the daemon (:mod:`.peers`); this module says what each
of them may change (``apply``, ``lock``, ``reset``; ``status`` is for everyone admitted):

- **admins** change any device: root, the daemon's own user, members of
  ``daemon.admin_group``, and in-process callers (no peer credentials: the library itself);
- **a Slurm job's process** changes the GPUs of that job only. The job is read from the
  process's cgroup (``/proc/<pid>/cgroup``: ``.../job_<id>/step_...``), which slurmd sets and
  the user cannot change, unlike the environment; where Slurm tracks processes without
  cgroups (``proctrack/linuxproc``), from the node's slurmd (``scontrol pidinfo <pid>``).
  The job's GPUs come from the record the Slurm
  prolog wrote (``<job_records>/running/<job>.json``, by GPU UUID). A job without a record
  may change nothing here;
- **anyone else** changes the devices whose device nodes (``/dev/nvidia<minor>``) their own
  uid and groups could open for reading and writing; a device without a node (a simulated
  board) is left to the socket's group.

The pid, uid and gid are the kernel's (``SO_PEERCRED``), the groups the kernel's record in
``/proc/<pid>/status``. A refusal is one line naming what the client may change.

A process's Slurm job does not change over its life, so the answer of ``scontrol pidinfo`` (a
subprocess that, without a configured slurmd, waits on a DNS lookup of the controller: up to
the resolver's 5 s, about one call in a hundred under load) is kept per process (pid and
start time), a "no job" answer for :data:`NO_JOB_TTL_S`; the daemon asks before it takes a
device's lock, never while holding it.
"""

from __future__ import annotations

import collections
import json
import os
import re
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import FrozenSet, List, Optional, Sequence, Tuple

from governor.devices.base import Device
from governor.runtime.daemon.peers import PeerCredentials

__all__ = ["Authority", "slurm_job_by_pidinfo", "slurm_job_of"]

_SLURM_JOB = re.compile(r"/job_([0-9]+)(?:/|$)")
_PIDINFO = re.compile(r"Slurm (?:job id |JobId=)([0-9]+)")  # 22.05: "Slurm JobId=12 ends at"
DEFAULT_JOB_RECORDS = Path("/var/lib/governor/jobs")  # the Slurm scripts' GOVERNOR_RECORD_DIR


def slurm_job_of(pid: int, proc_root: Path = Path("/proc")) -> Optional[str]:
    """The Slurm job whose cgroup holds process ``pid`` (cgroup v1 or v2), or None."""
    try:
        text = (proc_root / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        match = _SLURM_JOB.search(line.split(":", 2)[-1])
        if match:
            return match.group(1)
    return None


#: how long a "no job" answer of scontrol is kept for a process (s); a job's is kept for good
NO_JOB_TTL_S = 60.0
_CACHE_SIZE = 1024  # processes remembered (least recently asked dropped first)
_pidinfo_lock = threading.Lock()
_pidinfo: "collections.OrderedDict[Tuple[int, str], Tuple[Optional[str], float]]" = (  # noqa: UP037 - 3.8
    collections.OrderedDict()
)


def _start_time(pid: int, proc_root: Path) -> Optional[str]:
    """The start time of process ``pid`` (field 22 of /proc/<pid>/stat): with the pid, the
    process's identity (pids are reused); None when it cannot be read."""
    try:
        text = (proc_root / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def cached_job_by_pidinfo(
    pid: int, scontrol: str, proc_root: Path = Path("/proc"), timeout_s: float = 5.0
) -> Optional[str]:
    """:func:`slurm_job_by_pidinfo`, remembered per process (see the module docstring)."""
    started = _start_time(pid, proc_root)
    if started is None:
        return slurm_job_by_pidinfo(pid, scontrol, timeout_s)
    key = (pid, started)
    now = time.monotonic()
    with _pidinfo_lock:
        hit = _pidinfo.get(key)
        if hit is not None and (hit[0] is not None or now < hit[1]):
            _pidinfo.move_to_end(key)
            return hit[0]
    job = slurm_job_by_pidinfo(pid, scontrol, timeout_s)
    with _pidinfo_lock:
        _pidinfo[key] = (job, time.monotonic() + NO_JOB_TTL_S)
        _pidinfo.move_to_end(key)
        while len(_pidinfo) > _CACHE_SIZE:
            _pidinfo.popitem(last=False)
    return job


def slurm_job_by_pidinfo(pid: int, scontrol: str, timeout_s: float = 5.0) -> Optional[str]:
    """The Slurm job of process ``pid`` as this node's slurmd tracks it (``scontrol pidinfo``),
    or None (not a job's process, or slurmd not answering)."""
    try:
        done = subprocess.run(
            [scontrol, "pidinfo", str(pid)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = _PIDINFO.search(done.stdout) if done.returncode == 0 else None
    return match.group(1) if match else None


def _groups_of(pid: int, uid: int, gid: int, proc_root: Path) -> FrozenSet[int]:
    """The process's groups as the kernel holds them (``Groups:`` of /proc/<pid>/status),
    else as the user database gives them."""
    groups = {gid}
    try:
        for line in (proc_root / str(pid) / "status").read_text(encoding="utf-8").splitlines():
            if line.startswith("Groups:"):
                groups.update(int(g) for g in line.split()[1:])
                return frozenset(groups)
    except (OSError, ValueError):
        pass
    import pwd

    try:
        groups.update(os.getgrouplist(pwd.getpwuid(uid).pw_name, gid))
    except (KeyError, OSError):
        pass
    return frozenset(groups)


def _may_open(node: str, uid: int, groups: FrozenSet[int]) -> bool:
    """Whether ``uid`` with ``groups`` may open device node ``node`` for reading and writing."""
    try:
        st = os.stat(node)
    except OSError:
        return False
    if st.st_uid == uid:
        need = stat.S_IRUSR | stat.S_IWUSR
    elif st.st_gid in groups:
        need = stat.S_IRGRP | stat.S_IWGRP
    else:
        need = stat.S_IROTH | stat.S_IWOTH
    return st.st_mode & need == need


@dataclass(frozen=True)
class Authority:
    """What each client may change (see the module docstring). ``admin_uids``: root and the
    daemon's user; ``admin_gid``: the configured admin group."""

    admin_uids: FrozenSet[int]
    admin_gid: Optional[int] = None
    job_records: Path = DEFAULT_JOB_RECORDS
    proc_root: Path = Path("/proc")
    scontrol: Optional[str] = None  # asked where the cgroup names no job (None: not asked)

    def job_of(self, peer: PeerCredentials) -> Optional[str]:
        """The Slurm job of the client ``peer``, or None."""
        pid = peer[0]
        if pid is None:
            return None
        job = slurm_job_of(pid, self.proc_root)
        if job is None and self.scontrol is not None:
            job = cached_job_by_pidinfo(pid, self.scontrol, self.proc_root)
        return job

    def job_gpus(self, job: str) -> Tuple[Optional[FrozenSet[str]], str]:
        """(the job's GPU identities, lower case: UUIDs and identity keys; None without a
        record) and where they came from."""
        path = self.job_records / "running" / f"{job}.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            gpus = doc["gpus"]
            names = {str(g.get(k)).lower() for g in gpus for k in ("uuid", "key") if g.get(k)}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None, f"no prolog record {path}"
        return frozenset(names), str(path)

    def refusal(
        self, peer: PeerCredentials, device: Device, served: Sequence[Device]
    ) -> Optional[str]:
        """None when the client ``peer`` may change ``device``, else one line saying which of
        the ``served`` devices it may change."""
        pid, uid, gid = peer
        if uid is None or uid in self.admin_uids:
            return None
        groups: FrozenSet[int] = frozenset()
        if pid is not None and gid is not None:
            groups = _groups_of(pid, uid, gid, self.proc_root)
        elif gid is not None:
            groups = frozenset({gid})
        if self.admin_gid is not None and self.admin_gid in groups:
            return None
        job = self.job_of(peer)
        if job is not None:
            mine, source = self.job_gpus(job)

            def allowed(dev: Device) -> bool:
                ids = {str(dev.identity.uuid or "").lower(), str(dev.identity.key or "").lower()}
                return mine is not None and bool(ids & mine)

            who = f"uid {uid} in Slurm job {job}"
        else:
            source = "the device nodes your user and groups can open"

            def allowed(dev: Device) -> bool:
                nodes = dev.device_nodes()
                return all(_may_open(n, uid, groups) for n in nodes)

            who = f"uid {uid}"
        if allowed(device):
            return None
        yours: List[str] = [d.uri for d in served if allowed(d)]
        return (
            f"{who} may not change {device.uri}: it may change "
            f"{', '.join(yours) if yours else 'no device here'} (from {source})"
        )
