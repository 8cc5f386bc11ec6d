"""Slurm prolog and epilog: set a job's GPUs to the site's policy, and record the energy it used.

Slurm runs the prolog and the epilog as root on the compute node, with a cleared environment
(no ``PATH``, nothing of slurmd's own) plus the job's variables (``SLURM_JOB_ID``,
``SLURM_JOB_GPUS``, ``CUDA_VISIBLE_DEVICES``...). A prolog that exits non-zero drains the
node, and slurmd keeps the scripts' output only when they fail, so everything here logs one
line per event to syslog and to its own log file, and fails the prolog only when the site asks
(``GOVERNOR_STRICT=1``).

**Prolog** (:func:`prolog`): the job's GPUs are the indices in ``SLURM_JOB_GPUS`` (else
``CUDA_VISIBLE_DEVICES``, else ``GPU_DEVICE_ORDINAL``), joined with the ``IDX`` lists of
``scontrol show job -d`` (Slurm 22.05 leaves GPUs out of the variables when a node has several
GPU types). These indices number the GPU device files of gres.conf in the order slurmd
lists them: line by line, and inside ``File=/dev/nvidia[1,0]`` in the order written (slurmd
22.05 logs ``gpu device number 1(/dev/nvidia1)`` first for that line, and gives the first
job GRES index 0); with ``AutoDetect`` slurmd sorts them by file. GRES index i is therefore
the i-th such file, ``/dev/nvidiaN``, and is matched to the NVML GPU whose minor number is N
(by NVML index where the driver reports no minor numbers); without a readable gres.conf
listing files for the node, index i is taken as ``/dev/nvidia<i>``. From there on the GPU is
known by its UUID. Each GPU is set to the
policy (``ppw``: the board profile's PPW-optimal clock) in a journal layer of its own, kept
after the prolog exits, and its energy counter is read. The record of the job (GPUs, UUIDs,
counters, clocks set) is written to ``$GOVERNOR_RECORD_DIR/running/<job>.json``.

**Epilog** (:func:`epilog`): works from that record, not from its own environment. For each
GPU it reads the energy counter again (the job's energy is the difference, in J), undoes the
job's journal layer (and only it: a site's ``governor apply`` below stays), and writes
``$GOVERNOR_RECORD_DIR/<job>.json``. Without a record (``salloc`` with no step runs the epilog
without a prolog) it still writes the file, says why it has no energy, and undoes any layer a
prolog of this job left. With Slurm accounting it stores a one-line summary in the job's
``AdminComment`` through ``sacctmgr`` (:func:`admin_comment`), in a form that survives
sacctmgr lowercasing it and turning quotes into backticks.

Settings come from the environment, then from ``$GOVERNOR_SLURM_CONF`` (default
``/etc/governor/slurm.conf``; ``VAR=value`` lines, read, never executed); see :data:`SETTINGS`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from governor._compat import json_loads
from governor.errors import GovernorError, InvalidRequestError

__all__ = [
    "SETTINGS",
    "Settings",
    "admin_comment",
    "epilog",
    "expand_hostlist",
    "gres_gpu_files",
    "job_gpu_indices",
    "load_settings",
    "parse_admin_comment",
    "parse_gpu_list",
    "prolog",
    "scontrol_gpu_indices",
]

log = logging.getLogger("governor.fleet.slurm")

FORMAT = "governor-slurm-job"
VERSION = 1

#: setting -> (default, what it means)
SETTINGS: Dict[str, Tuple[str, str]] = {
    "GOVERNOR_POLICY": ("ppw", "ppw | max | none | clock=MHZ | power-limit=W"),
    "GOVERNOR_DEVICE_TEMPLATE": (
        "",
        "device URI of GRES index {gpu}; empty: the NVML GPU whose minor number is {gpu}",
    ),
    "GOVERNOR_RECORD_DIR": ("/var/lib/governor/jobs", "per-job JSON records and the log"),
    "GOVERNOR_LOG": ("", "log file (default: slurm.log in GOVERNOR_RECORD_DIR)"),
    "GOVERNOR_STATE_DIR": ("/var/lib/governor", "journals shared by prolog, epilog and reset"),
    "GOVERNOR_DATA_DIR": ("/var/lib/governor", "calibrated board profiles (in its profiles/)"),
    "GOVERNOR_STRICT": ("0", "1: a failure fails the prolog (Slurm drains the node)"),
    "GOVERNOR_SYSLOG": ("1", "1: also log to syslog"),
    "GOVERNOR_ACCOUNTING": ("auto", "auto | on | off: the summary in AdminComment via sacctmgr"),
    "GOVERNOR_PARTITIONS": ("", "governed partitions, comma-separated (empty: all)"),
    "GOVERNOR_SKIP_PARTITIONS": ("", "partitions never governed (energy is still recorded)"),
    "GOVERNOR_JOB_CHOICE": ("1", "1: a job's --comment governor=off|on opts it out or in"),
    "GOVERNOR_SLURM_BIN": ("", "directory of scontrol and sacctmgr (default: PATH, /usr/bin)"),
    "GOVERNOR_GRES_CONF": (
        "",
        "Slurm's gres.conf (default: beside $SLURM_CONF, else /etc/slurm/gres.conf)",
    ),
    "GOVERNOR_VIA": ("direct", "direct (set clocks as root) | daemon (ask the node's daemon)"),
    "GOVERNOR_DAEMON_SOCKET": ("/run/governor/governor.sock", "the daemon's socket (via daemon)"),
}
_GPU_VARS = ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
_SACCTMGR_TRIES = 8
_SACCTMGR_WAIT_S = 0.5


# -- settings ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """Validated settings of one prolog or epilog run."""

    policy: str
    clock_mhz: Optional[float]
    power_limit_w: Optional[float]
    template: str
    record_dir: Path
    log_file: Path
    strict: bool
    syslog: bool
    accounting: str
    partitions: Tuple[str, ...]
    skip_partitions: Tuple[str, ...]
    job_choice: bool
    slurm_bin: str
    via: str = "direct"
    gres_conf: Optional[Path] = None
    #: settings the rest of governor reads from the environment (state and data directories,
    #: the daemon's socket): a prolog or epilog exports them to its own process
    exports: Tuple[Tuple[str, str], ...] = ()
    problems: Tuple[str, ...] = ()


def _read_conf(path: Path) -> Tuple[Dict[str, str], List[str]]:
    values: Dict[str, str] = {}
    problems: List[str] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return values, problems
    except OSError as err:
        return values, [f"cannot read {path}: {err.strerror}"]
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if not sep or (key not in SETTINGS and key != "GOVERNOR_BIN"):
            problems.append(f"{path}:{number}: ignoring unknown setting {key!r}")
            continue
        values[key] = value
    return values, problems


def load_settings(environ: Optional[Mapping[str, str]] = None) -> Settings:
    """The settings: the environment wins over ``$GOVERNOR_SLURM_CONF``.

    Raises:
        InvalidRequestError: a setting has a bad value (the message names it).
    """
    env = os.environ if environ is None else environ
    conf = Path(env.get("GOVERNOR_SLURM_CONF") or "/etc/governor/slurm.conf")
    from_file, problems = _read_conf(conf)

    def get(key: str) -> str:
        if env.get(key) is not None:
            return str(env[key]).strip()
        return from_file.get(key, SETTINGS[key][0])

    exports = tuple(
        (key, get(key))
        for key in ("GOVERNOR_STATE_DIR", "GOVERNOR_DATA_DIR", "GOVERNOR_DAEMON_SOCKET")
    )
    via = get("GOVERNOR_VIA") or "direct"
    if via not in ("direct", "daemon"):
        raise InvalidRequestError(f"GOVERNOR_VIA must be direct or daemon, not {via!r}")
    policy_text = get("GOVERNOR_POLICY") or "ppw"
    policy, clock_mhz, power_w = _parse_policy(policy_text)
    template = get("GOVERNOR_DEVICE_TEMPLATE")
    if template and not re.fullmatch(r"[A-Za-z0-9:._/?=&{}-]+", template):
        raise InvalidRequestError(
            f"GOVERNOR_DEVICE_TEMPLATE has unexpected characters: {template!r}"
        )
    flags = {}
    for key in ("GOVERNOR_STRICT", "GOVERNOR_SYSLOG", "GOVERNOR_JOB_CHOICE"):
        value = get(key)
        if value not in ("0", "1"):
            raise InvalidRequestError(f"{key} must be 0 or 1, not {value!r}")
        flags[key] = value == "1"
    accounting = get("GOVERNOR_ACCOUNTING").lower()
    if accounting not in ("auto", "on", "off"):
        raise InvalidRequestError(
            f"GOVERNOR_ACCOUNTING must be auto, on or off, not {accounting!r}"
        )
    record_dir = Path(get("GOVERNOR_RECORD_DIR") or SETTINGS["GOVERNOR_RECORD_DIR"][0])
    if not record_dir.is_absolute():
        raise InvalidRequestError(f"GOVERNOR_RECORD_DIR must be absolute, not {str(record_dir)!r}")
    log_text = get("GOVERNOR_LOG")
    return Settings(
        policy=policy,
        clock_mhz=clock_mhz,
        power_limit_w=power_w,
        template=template,
        record_dir=record_dir,
        log_file=Path(log_text) if log_text else record_dir / "slurm.log",
        strict=flags["GOVERNOR_STRICT"],
        syslog=flags["GOVERNOR_SYSLOG"],
        accounting=accounting,
        partitions=_names(get("GOVERNOR_PARTITIONS")),
        skip_partitions=_names(get("GOVERNOR_SKIP_PARTITIONS")),
        job_choice=flags["GOVERNOR_JOB_CHOICE"],
        slurm_bin=get("GOVERNOR_SLURM_BIN"),
        via=via,
        gres_conf=_gres_conf_path(get("GOVERNOR_GRES_CONF"), env),
        exports=exports,
        problems=tuple(problems),
    )


def _gres_conf_path(setting: str, env: Mapping[str, str]) -> Path:
    if setting:
        return Path(setting)
    if env.get("SLURM_CONF"):
        return Path(env["SLURM_CONF"]).parent / "gres.conf"
    return Path("/etc/slurm/gres.conf")


def _names(text: str) -> Tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _parse_policy(text: str) -> Tuple[str, Optional[float], Optional[float]]:
    from governor.runtime.policies import CLIENT_POLICIES  # the profile policies: ppw, max

    text = text.strip().lower()
    if text in CLIENT_POLICIES or text == "none":
        return text, None, None
    name, _, number = text.partition("=")
    if name in ("clock", "power-limit"):
        try:
            value = float(number)
        except ValueError:
            value = float("nan")
        if value > 0 and value < 1e5:
            return (name, value, None) if name == "clock" else (name, None, value)
    raise InvalidRequestError(
        f"GOVERNOR_POLICY must be ppw, max, none, clock=MHZ or power-limit=W, not {text!r}"
    )


# -- logging -----------------------------------------------------------------------------------
class _Log:
    """One line per event to the log file and (if asked) syslog; the last error kept."""

    def __init__(self, settings: Optional[Settings], mode: str, job: str) -> None:
        self.settings = settings
        self.prefix = f"governor-slurm[{mode} job {job}]"
        self.errors: List[str] = []

    def __call__(self, message: str, *, error: bool = False) -> None:
        line = " ".join(str(message).split())
        if error:
            self.errors.append(line)
        text = f"{self.prefix}: {'error: ' if error else ''}{line}"
        import sys

        sys.stderr.write(text + "\n")  # slurmd keeps this when the script fails
        settings = self.settings
        if settings is None:
            return
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            settings.log_file.parent.mkdir(parents=True, exist_ok=True)
            with open(settings.log_file, "a", encoding="utf-8") as out:
                out.write(f"{stamp} {text}\n")
        except OSError:
            pass
        if settings.syslog:
            try:
                import syslog

                syslog.openlog("governor-slurm", 0, syslog.LOG_DAEMON)
                syslog.syslog(syslog.LOG_ERR if error else syslog.LOG_INFO, text)
            except Exception:  # no syslog on this host: the log file has it
                pass


# -- which GPUs -------------------------------------------------------------------------------
def parse_gpu_list(text: str) -> Tuple[List[int], List[str]]:
    """Indices from ``0,2,4-5`` (Slurm's form), and the entries that are not indices."""
    indices: List[int] = []
    skipped: List[str] = []
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        match = re.fullmatch(r"([0-9]{1,4})(?:-([0-9]{1,4}))?", entry)
        if match is None or (match.group(2) and int(match.group(2)) < int(match.group(1))):
            skipped.append(entry)
            continue
        lo = int(match.group(1))
        hi = int(match.group(2) or lo)
        for i in range(lo, min(hi, lo + 1023) + 1):
            if i not in indices:
                indices.append(i)
    return indices, skipped


def expand_hostlist(text: str) -> List[str]:
    """Slurm's bracket expressions, in the order written: ``/dev/nvidia[1,0,2-3]`` ->
    nvidia1, nvidia0, nvidia2, nvidia3 (zero padding kept: ``[00-01]`` -> 00, 01); several
    comma-separated names outside brackets are taken in turn.

    Raises:
        InvalidRequestError: an unclosed bracket or a reversed range.
    """
    names: List[str] = []
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    if depth != 0:
        raise InvalidRequestError(f"unclosed bracket in {text!r}")
    for part in (p.strip() for p in parts):
        if part:
            names.extend(_expand_one(part))
    return names


def _expand_one(name: str) -> List[str]:
    match = re.search(r"\[([^\[\]]*)\]", name)
    if match is None:
        return [name]
    head, tail = name[: match.start()], name[match.end() :]
    out: List[str] = []
    for entry in match.group(1).split(","):
        entry = entry.strip()
        lo_hi = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", entry)
        if lo_hi is None:
            raise InvalidRequestError(f"unexpected range {entry!r} in {name!r}")
        lo, hi = lo_hi.group(1), lo_hi.group(2) or lo_hi.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) > 4096:
            raise InvalidRequestError(f"unexpected range {entry!r} in {name!r}")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        for n in range(int(lo), int(hi) + 1):
            for rest in _expand_one(tail):
                out.append(f"{head}{n:0{width}d}{rest}")
    return out


def _device_number(path: str) -> Optional[int]:
    """Slurm's device number of a device file: its trailing digits (``/dev/nvidia3`` -> 3)."""
    match = re.search(r"([0-9]+)$", path)
    return int(match.group(1)) if match else None


def gres_gpu_files(text: str, node: Optional[str] = None) -> List[str]:
    """The GPU device files of gres.conf ``text`` for ``node``, in the order slurmd numbers
    them: the lines in order (``NodeName=`` lines of other nodes skipped, lines without it
    apply to every node), each ``File=`` expanded in the order written; sorted by device
    number when gres.conf sets ``AutoDetect`` (slurmd sorts the merged records by file then).
    A file listed twice counts once.

    Raises:
        InvalidRequestError: a bracket expression that cannot be read.
    """
    files: List[str] = []
    autodetect = False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: Dict[str, str] = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep:
                fields[key.lower()] = value
        if fields.get("autodetect", "off").lower() not in ("off", "none", ""):
            autodetect = True
        if node is not None and "nodename" in fields:
            if node not in expand_hostlist(fields["nodename"]):
                continue
        if fields.get("name", "").lower() != "gpu":
            continue
        for key in ("file", "files"):
            for path in expand_hostlist(fields.get(key, "")):
                if path not in files:
                    files.append(path)
    if autodetect:
        files.sort(key=lambda f: (_device_number(f) is None, _device_number(f) or 0, f))
    return files


def gres_device_numbers(path: Path, node: Optional[str] = None) -> Tuple[Optional[List[int]], str]:
    """(device number of GRES index i, for each i; or None) and what was found, for a log
    line: None when gres.conf cannot be read or lists no GPU files for ``node`` (then index i
    stands for ``/dev/nvidia<i>``)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return None, f"{path}: {err.strerror or err}"
    try:
        files = gres_gpu_files(text, node)
    except InvalidRequestError as err:
        return None, f"{path}: {err}"
    numbers = [_device_number(f) for f in files]
    if not files or any(n is None for n in numbers):
        return None, f"{path} lists no numbered GPU device files for {node or 'this node'}"
    return [n for n in numbers if n is not None], f"{path}: {', '.join(files)}"


def scontrol_gpu_indices(text: str, node: Optional[str] = None) -> List[int]:
    """GPU indices in ``scontrol show job -d`` output (``GRES=gpu:a100:1(IDX:0),...``), for
    ``node`` when the job spans several nodes."""
    lines = [line for line in text.splitlines() if "GRES=" in line and "Nodes=" in line]
    if node is not None and len(lines) > 1:
        mine = [line for line in lines if re.search(rf"\bNodes={re.escape(node)}\b", line)]
        lines = mine
    found: List[int] = []
    for line in lines:
        # "GRES=" can end the line with nothing after it (an untyped GPU before its IDX is
        # known; seen with slurmd 22.05): no index there, not an error
        gres = (line.split("GRES=", 1)[1].split() or [""])[0]
        for _kind, idx in re.findall(r"(gpu[^()]*)\(IDX:([0-9,\-]+)\)", gres):
            for i in parse_gpu_list(idx)[0]:
                if i not in found:
                    found.append(i)
    return sorted(found)


def _job_comment(text: str) -> str:
    """The job's ``Comment=`` (the user's ``--comment``, spaces and all; not AdminComment)
    from ``scontrol show job`` output."""
    for line in text.splitlines():
        match = re.search(r"(?:^|\s)Comment=(.*)$", line)
        if match:
            return match.group(1).strip()
    return ""


def _scontrol_fields(text: str) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    for match in re.finditer(r"(?:^|\s)([A-Za-z]+)=(\S*)", text):
        fields.setdefault(match.group(1), match.group(2))
    return fields


def job_gpu_indices(
    environ: Mapping[str, str], scontrol_text: str = "", node: Optional[str] = None
) -> Tuple[List[int], str, List[str]]:
    """(indices, where they came from, entries skipped) for the job: the first of
    ``SLURM_JOB_GPUS``, ``CUDA_VISIBLE_DEVICES``, ``GPU_DEVICE_ORDINAL`` that is set, joined
    with what ``scontrol show job -d`` lists."""
    indices: List[int] = []
    source = ""
    skipped: List[str] = []
    for var in _GPU_VARS:
        if environ.get(var):
            indices, skipped = parse_gpu_list(environ[var])
            source = var
            break
    extra = [i for i in scontrol_gpu_indices(scontrol_text, node) if i not in indices]
    if extra:
        indices = sorted(indices + extra)
        source = (source + "+scontrol") if source else "scontrol"
    return indices, source, skipped


def _nvml_by_gres_index(
    indices: Sequence[int], numbers: Optional[Sequence[int]] = None
) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The NVML GPUs of GRES indices: GRES index i is device file ``numbers[i]``
    (``/dev/nvidiaN``; i itself without ``numbers``), matched by minor number, else by NVML
    index."""
    from governor.devices.nvml import inventory_nvml

    listed = inventory_nvml()
    gpus = [g for g in listed if not g.get("lost")]
    lost = "".join(f"; {g['lost']}" for g in listed if g.get("lost"))
    by_minor = {g["minor"]: g for g in gpus if g.get("minor") is not None}
    use_minor = len(by_minor) == len(gpus) and bool(gpus)
    found, problems = [], []
    for i in indices:
        if numbers is not None and i >= len(numbers):
            problems.append(
                f"GPU {i} of the job is beyond the {len(numbers)} GPU files gres.conf lists"
            )
            continue
        n = numbers[i] if numbers is not None else i
        gpu = by_minor.get(n) if use_minor else (gpus[n] if n < len(gpus) else None)
        if gpu is None:
            problems.append(
                f"GPU {i} of the job is not on this node ("
                + (f"gres.conf: device {n}; " if numbers is not None else "")
                + "NVML lists "
                + (
                    "minor numbers " + ",".join(str(m) for m in sorted(by_minor))
                    if use_minor
                    else f"{len(gpus)} GPUs"
                )
                + lost
                + ")"
            )
            continue
        found.append(
            dict(
                gpu,
                gres_index=i,
                device_number=n,
                uri=f"nvml:{gpu['uuid']}",
                by="minor" if use_minor else "index",
            )
        )
    return found, problems


# -- Slurm commands ----------------------------------------------------------------------------
def _slurm_cmd(settings: Settings, name: str) -> Optional[str]:
    if settings.slurm_bin:
        path = Path(settings.slurm_bin) / name
        return str(path) if path.exists() else None
    return shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/local/bin:/bin")


def _run(argv: List[str], timeout_s: float = 20.0) -> Tuple[int, str]:
    env = dict(os.environ)
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return 127, str(err)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


# -- records -----------------------------------------------------------------------------------
def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, doc: Dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(doc, out, indent=1, sort_keys=True)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(str(tmp), str(path))


def _job_id(environ: Mapping[str, str]) -> str:
    job = str(environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID") or "").strip()
    if not re.fullmatch(r"[0-9]{1,12}(_[0-9]{1,9})?", job):
        raise InvalidRequestError(f"SLURM_JOB_ID is missing or not a job id: {job!r}")
    return job


def running_record_path(settings: Settings, job: str) -> Path:
    return settings.record_dir / "running" / f"{job}.json"


def job_record_path(settings: Settings, job: str) -> Path:
    return settings.record_dir / f"{job}.json"


def _marker(job: str) -> str:
    return f"[slurm-job {job}]"


# -- deciding ----------------------------------------------------------------------------------
def _decide(settings: Settings, partition: str, comment: str) -> Tuple[str, str]:
    """(policy, why) for the job: the site's policy, or none when its partition or its
    comment opts it out."""
    choice = None
    if settings.job_choice:
        match = re.search(r"\bgovernor=(on|off)\b", comment or "", re.IGNORECASE)
        choice = match.group(1).lower() if match else None
    if choice == "off":
        return "none", "the job opted out (comment governor=off)"
    in_scope = (not settings.partitions or partition in settings.partitions) and (
        partition not in settings.skip_partitions
    )
    if not in_scope and choice != "on":
        return "none", f"partition {partition or '?'} is not governed"
    if settings.policy == "none":
        return "none", "the site policy is none"
    why = "the job opted in (comment governor=on)" if not in_scope else "the site policy"
    return settings.policy, why


def _target(
    dev: Any, settings: Settings, policy: str
) -> Tuple[Optional[float], Optional[str], Optional[float]]:
    """``(core clock, note, memory clock)`` to lock for ``policy`` (MHz; None: leave it):
    for ``ppw``, the profile's (core, memory) pair where it keeps one and the GPU can set its
    memory clock, else the core clock alone (the note says why, once)."""
    if policy == "max":
        return dev.supported_clocks_mhz()[-1], None, None
    if policy == "clock":
        return dev.snap_clock_mhz(settings.clock_mhz), None, None
    if policy == "ppw":
        from dataclasses import replace

        from governor.profiles.profile import lookup_profile_for
        from governor.runtime.model import (
            fallback_model,
            model_from_profile,
            ppw_pair_for,
            prior_reason,
        )

        clocks = dev.supported_clocks_mhz()
        path, doc, notes = lookup_profile_for(dev)
        if doc is None:
            model = fallback_model(clocks, notes[0])
            hint = f"calibrate it once with 'governor calibrate --device {dev.uri}'"
            return model.ppw_clock_mhz, f"{model.source}; {hint}", None
        model = model_from_profile(clocks, doc, source=f"profile {path}")
        if prior_reason(doc, dev) is not None:  # not this unit's calibration
            model = replace(model, prior=True)
        pair, why = ppw_pair_for(dev, model)
        if pair is not None:
            return pair[0], None, pair[1]
        return model.ppw_clock_mhz, why or None, None
    return None, None, None


def _energy_j(dev: Any) -> Tuple[Optional[float], Optional[float]]:
    """(energy counter J, power W) now; None where the device has none."""
    sample = dev.sample()
    return sample.energy_j, sample.power_w


# -- prolog ------------------------------------------------------------------------------------
def _run_script(phase, body, environ, opener, resolver) -> int:
    """The set-up a prolog and an epilog share: settings (a bad one is one logged line),
    the directories the rest of governor reads, and one line instead of a traceback."""
    env = dict(os.environ if environ is None else environ)
    job = str(env.get("SLURM_JOB_ID") or "?")
    say = _Log(None, phase, job)
    try:
        settings = load_settings(env)
    except InvalidRequestError as err:
        say(f"bad setting: {err}", error=True)
        return 1 if env.get("GOVERNOR_STRICT") == "1" else 0
    say = _Log(settings, phase, job)
    os.environ.update(dict(settings.exports))  # where the rest of governor looks
    if phase == "prolog":
        for problem in settings.problems:
            say(problem)
    try:
        return body(env, settings, say, opener, resolver)
    except Exception as err:  # never a traceback into slurmd's log: one line
        say(f"{type(err).__name__}: {err}", error=True)
        return 1 if settings.strict else 0


def prolog(
    environ: Optional[Mapping[str, str]] = None,
    *,
    opener: Optional[Callable[[str], Any]] = None,
    resolver: Optional[Callable[[Sequence[int]], Tuple[List[Dict[str, Any]], List[str]]]] = None,
) -> int:
    """Run the prolog for the job in ``environ`` (default: this process's). Returns the exit
    status: 0, or 1 on a failure when ``GOVERNOR_STRICT=1``."""
    return _run_script("prolog", _prolog, environ, opener, resolver)


def _prolog(env, settings, say, opener, resolver) -> int:
    job = _job_id(env)
    node = env.get("SLURMD_NODENAME")
    scontrol_text = ""
    scontrol = _slurm_cmd(settings, "scontrol")
    if scontrol:
        rc, out = _run([scontrol, "show", "job", "-d", job])
        if rc == 0:
            scontrol_text = out
        else:
            say(f"scontrol show job -d {job} failed (rc {rc}): {out.splitlines()[-1:]}")
    fields = _scontrol_fields(scontrol_text)
    partition = env.get("SLURM_JOB_PARTITION") or fields.get("Partition", "")
    comment = _job_comment(scontrol_text)
    indices, source, skipped = job_gpu_indices(env, scontrol_text, node)
    for entry in skipped:
        say(f"skipping GPU entry {entry!r} (not an index)")
    policy, why = _decide(settings, partition, comment)
    record: Dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "job_id": job,
        "user": env.get("SLURM_JOB_USER"),
        "partition": partition or None,
        "node": node,
        "cluster": env.get("SLURM_CLUSTER_NAME"),
        "policy": policy,
        "policy_reason": why,
        "gpu_source": source or None,
        "started_at": _now_iso(),
        "t_start_s": time.time(),
        "gpus": [],
    }
    if not indices:
        say("no GPU allocated to this job: nothing to do")
        return 0
    gpus, problems = _devices_for(indices, settings, resolver, node, say)
    for problem in problems:
        say(problem, error=True)
    opener = opener or _default_opener
    record["gpus"] = _each_gpu(
        lambda gpu: _prolog_gpu(gpu, settings, policy, job, opener, say), gpus
    )
    running = running_record_path(settings, job)
    _write_json(running, record)
    summary = ", ".join(f"{g['uuid']}: {_clock_text(g.get('clocks_mhz'))}" for g in record["gpus"])
    say(f"policy {policy} ({why}); GPUs {source} {indices}: {summary}; record {running}")
    failed = bool(problems) or any(g.get("errors") for g in record["gpus"])
    return 1 if failed and settings.strict else 0


def _clock_text(clocks: Any) -> str:
    if not clocks:
        return "unchanged"
    lo, hi = clocks
    return f"{lo:g} MHz" if lo == hi else f"{lo:g}-{hi:g} MHz"


def _default_opener(uri: str) -> Any:
    from governor.devices.registry import open_device

    return open_device(uri)


def _devices_for(
    indices, settings, resolver, node=None, say=None
) -> Tuple[List[Dict[str, Any]], List[str]]:
    if settings.template:
        rows, seen = [], set()
        for i in indices:
            uri = settings.template.replace("{gpu}", str(i))
            if uri not in seen:
                seen.add(uri)
                rows.append({"gres_index": i, "uri": uri, "uuid": None, "by": "template"})
        return rows, []
    numbers: Optional[List[int]] = None
    if settings.gres_conf is not None:
        numbers, found = gres_device_numbers(settings.gres_conf, node)
        if say is not None:
            say(
                f"GRES order from {found}"
                if numbers is not None
                else f"GRES index i taken as /dev/nvidia<i> ({found})"
            )
    try:
        return (resolver or _nvml_by_gres_index)(indices, numbers)
    except GovernorError as err:
        return [], [f"cannot list the node's GPUs: {err}"]


def _prolog_gpu(gpu, settings, policy, job, opener, say) -> Dict[str, Any]:
    row: Dict[str, Any] = {
        "gres_index": gpu["gres_index"],
        "nvml_index": gpu.get("index"),
        "minor": gpu.get("minor"),
        "matched_by": gpu.get("by"),
        "uri": gpu["uri"],
        "uuid": gpu.get("uuid"),
        "name": gpu.get("name"),
        "board": gpu.get("model"),
        "clocks_mhz": None,
        "power_limit_w": None,
        "energy_j_start": None,
        "errors": [],
        "notes": [],
    }
    try:
        dev = opener(gpu["uri"])
    except GovernorError as err:
        row["errors"].append(f"cannot open: {err}")
        say(f"{gpu['uri']}: cannot open: {err}", error=True)
        return row
    try:
        refused = _in_process_board(dev)
        if refused:
            row["errors"].append(refused)
            say(f"{gpu['uri']}: {refused}", error=True)
            return row
        row["uuid"] = row["uuid"] or dev.identity.uuid or dev.identity.key
        row["name"] = row["name"] or dev.identity.name
        row["board"] = row["board"] or dev.identity.model
        row["key"] = dev.identity.key or dev.uri
        try:
            row["energy_j_start"], _ = _energy_j(dev)
            row["t_start_s"] = time.time()
        except GovernorError as err:
            row["notes"].append(f"no energy reading: {err}")
        if settings.via == "daemon":
            row.update(_cluster_cap_reading(_daemon_uri(gpu), "start"))
        if policy == "none":
            return row
        if settings.via == "daemon":
            _through_daemon(row, gpu, settings, policy, dev, say)
            return row
        try:
            state_before = dev.state().to_dict()
            row["state_before"] = state_before
            clock, note, mem_clock = _target(dev, settings, policy)
            if note:
                row["notes"].append(note)
                say(f"{gpu['uri']}: {note}")
            dev.acquire(command=f"governor slurm prolog {_marker(job)} {policy}")
            for text in dev.ownership_notes + dev.control_notes():
                row["notes"].append(text)
                say(text)
            if clock is not None:
                row["clocks_mhz"] = list(dev.lock_gpu_clocks(clock))
            if mem_clock is not None:  # the PPW pair's: in the job's layer, as the core's
                row["mem_clock_mhz"] = dev.lock_mem_clock(mem_clock)
            if policy == "power-limit":
                row["power_limit_w"] = dev.set_power_limit(settings.power_limit_w)
            dev.release(keep=True, merge=False)
        except GovernorError as err:
            row["errors"].append(str(err))
            say(f"{gpu['uri']}: cannot apply {policy}: {err}", error=True)
    finally:
        dev.close()  # restores only what was not kept (a failure half-way)
    return row


def _in_process_board(dev: Any) -> Optional[str]:
    """Why a simulated board cannot serve a job (None for a real GPU): its clocks and energy
    counter live in one process, and the prolog and the epilog are two, so the epilog would
    find a fresh board (0 J, nothing to undo)."""
    if dev.identity.kind != "sim":
        return None
    return (
        f"{dev.uri} is a simulated board, which lives in one process: the epilog would "
        "record 0 J and undo nothing; set GOVERNOR_DEVICE_TEMPLATE to the node's GPUs "
        "(nvml:{gpu}) or leave it unset"
    )


def _daemon_uri(gpu: Dict[str, Any]) -> str:
    """The URI the node's daemon serves a GPU by: ``nvml:N`` (what ``uri = "all"`` gives),
    or the template's URI."""
    index = gpu.get("index", gpu.get("nvml_index"))
    return f"nvml:{index}" if index is not None else str(gpu["uri"])


def _through_daemon(row, gpu, settings, policy, dev, say) -> None:
    """Ask the node's governor daemon (which holds the GPUs) to apply ``policy``."""
    from governor.devices.daemon.client import request

    uri = _daemon_uri(gpu)
    row["via"] = "daemon"
    row["daemon_uri"] = uri
    try:
        from governor.runtime.policies import CLIENT_POLICIES

        if policy in CLIENT_POLICIES:
            result = request("apply", policy=policy, device=uri)
        elif policy == "clock":
            mhz = dev.snap_clock_mhz(settings.clock_mhz)
            result = request("lock", min_mhz=mhz, max_mhz=mhz, device=uri)
        else:
            raise InvalidRequestError(
                f"the daemon does not set {policy}; use GOVERNOR_VIA=direct for it"
            )
        clocks = ((result or {}).get("applied") or {}).get("gpu_clocks_mhz")
        if isinstance(clocks, (list, tuple)) and len(clocks) == 2:
            row["clocks_mhz"] = [float(clocks[0]), float(clocks[1])]
    except GovernorError as err:
        row["errors"].append(str(err))
        say(f"{uri}: the daemon did not apply {policy}: {err}", error=True)


# -- epilog ------------------------------------------------------------------------------------
def epilog(
    environ: Optional[Mapping[str, str]] = None,
    *,
    opener: Optional[Callable[[str], Any]] = None,
    resolver: Optional[Callable[[Sequence[int]], Tuple[List[Dict[str, Any]], List[str]]]] = None,
) -> int:
    """Run the epilog for the job in ``environ``. Returns 0, or 1 when a GPU could not be
    restored and ``GOVERNOR_STRICT=1``. The per-job file is always written."""
    return _run_script("epilog", _epilog, environ, opener, resolver)


def _epilog(env, settings, say, opener, resolver) -> int:
    job = _job_id(env)
    opener = opener or _default_opener
    running = running_record_path(settings, job)
    record: Optional[Dict[str, Any]] = None
    problem = None
    try:
        record = json_loads(running.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            problem = f"{running} is not a governor job record"
            record = None
    except FileNotFoundError:
        problem = "no prolog record (salloc without a step, or the prolog did not run)"
    except (OSError, ValueError) as err:
        problem = f"cannot read {running}: {err}"
    now = time.time()
    doc: Dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "job_id": job,
        "user": env.get("SLURM_JOB_USER"),
        "partition": env.get("SLURM_JOB_PARTITION"),
        "node": env.get("SLURMD_NODENAME"),
        "cluster": env.get("SLURM_CLUSTER_NAME"),
        "exit_code": env.get("SLURM_JOB_EXIT_CODE"),
        "ended_at": _now_iso(),
        "prolog_record": record is not None,
        "gpus": [],
    }
    if record is not None:
        for key in ("user", "partition", "node", "cluster", "policy", "policy_reason"):
            doc[key] = record.get(key) or doc.get(key)
        doc["started_at"] = record.get("started_at")
        doc["duration_s"] = round(now - float(record.get("t_start_s") or now), 3)
        gpus = list(record.get("gpus") or [])
    else:
        indices, source, _ = job_gpu_indices(env)
        if not indices:
            problem = "no GPU allocated to this job"
        say(problem or "no record")
        doc["note"] = problem
        doc["policy"] = None
        found, problems = _devices_for(indices, settings, resolver) if indices else ([], [])
        for text in problems:
            say(text)
        gpus = [
            {
                "gres_index": g["gres_index"],
                "uri": g["uri"],
                "uuid": g.get("uuid"),
                "name": g.get("name"),
                "board": g.get("model"),
                "clocks_mhz": None,
            }
            for g in found
        ]
    doc["gpus"] = _each_gpu(lambda gpu: _epilog_gpu(gpu, job, opener, say), gpus)
    failed = any(row.get("restore_failed") for row in doc["gpus"])
    _mean_caps(doc, gpus)
    if settings.via == "daemon":
        done = {g.get("daemon_uri") for g in gpus if g.get("via") == "daemon"}
        doc["daemon_reset"] = _undo_daemon_changes(job, done, say)
    energies = [g["energy_j"] for g in doc["gpus"] if g.get("energy_j") is not None]
    doc["energy_j"] = round(sum(energies), 3) if energies and len(energies) == len(gpus) else None
    if gpus and len(energies) < len(gpus):  # a GPU lost or unreadable: say what is missing
        doc["energy_partial_j"] = round(sum(energies), 3) if energies else None
        doc["energy_partial_why"] = [
            f"{g.get('uri')}: {'; '.join(g.get('errors') or ['no energy reading'])}"
            for g in doc["gpus"]
            if g.get("energy_j") is None
        ]
        say(
            f"energy of job {job} is partial ({len(energies)} of {len(gpus)} GPUs): "
            + " | ".join(doc["energy_partial_why"]),
            error=True,
        )
    doc["admin_comment"] = admin_comment(doc) if doc["gpus"] else None
    doc["accounting"] = _store_admin_comment(settings, job, doc, say)
    path = job_record_path(settings, job)
    _write_json(path, doc)
    if record is not None:
        try:
            running.unlink()
        except OSError:
            pass
    say(
        f"energy {doc['energy_j']} J on {len(doc['gpus'])} GPU(s); "
        f"accounting {doc['accounting']}; record {path}"
    )
    return 1 if failed and settings.strict else 0


def _cluster_cap_reading(uri: str, when: str) -> Dict[str, Any]:
    """The node daemon's integral of the GPU's cluster cap (``cap_ws`` at ``clock_s``, see
    governor.runtime.daemon.lease), as ``cap_ws_<when>``/``cap_clock_s_<when>``; {} when the
    daemon does not answer or no cluster cap was ever set on the GPU."""
    from governor.devices.daemon.client import request

    try:
        (dev,) = request("status", device=uri, timeout_s=2.0).get("devices") or [{}]
        info = dev.get("cluster") or {}
        if info.get("lease") is None:
            return {}
        return {
            f"cap_ws_{when}": float(info["cap_ws"]),
            f"cap_clock_s_{when}": float(info["clock_s"]),
        }
    except (GovernorError, KeyError, TypeError, ValueError):
        return {}


def _mean_caps(doc: Dict[str, Any], gpus: List[Dict[str, Any]]) -> None:
    """Each GPU's mean cluster cap over the job (W: the cap integral's growth over the time
    between prolog and epilog, on the daemon's clock) and the job's (their sum)."""
    means = []
    for row, gpu in zip(doc["gpus"], gpus):
        if "cap_ws_start" not in gpu:
            continue
        end = _cluster_cap_reading(_daemon_uri(gpu), "end")
        span = end.get("cap_clock_s_end", 0.0) - float(gpu["cap_clock_s_start"])
        if span > 0:
            row["mean_cap_w"] = round((end["cap_ws_end"] - float(gpu["cap_ws_start"])) / span, 3)
            means.append(row["mean_cap_w"])
    if means:
        doc["mean_cap_w"] = round(sum(means), 3)


def _each_gpu(
    work: Callable[[Dict[str, Any]], Dict[str, Any]], gpus: List[Dict[str, Any]]
) -> List[Dict[str, Any]]:
    """``work(gpu)`` for every GPU at once, each on a thread of its own; the rows in the
    GPUs' order. A wedged GPU then costs the script its own deadlines (opening, a read, the
    restore: ``$GOVERNOR_DEVICE_DEADLINES``), not those of every GPU after it, so the script
    ends well within Slurm's ``PrologEpilogTimeout`` and the job's start is not held."""
    if len(gpus) <= 1:
        return [work(gpu) for gpu in gpus]
    import threading

    rows: List[Optional[Dict[str, Any]]] = [None] * len(gpus)
    errors: List[BaseException] = []

    def one(i: int, gpu: Dict[str, Any]) -> None:
        try:
            rows[i] = work(gpu)
        except BaseException as err:  # raised again below, in the script's own thread
            errors.append(err)

    threads = [
        threading.Thread(target=one, args=(i, gpu), name=f"governor-slurm-gpu-{i}", daemon=True)
        for i, gpu in enumerate(gpus)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [row for row in rows if row is not None]


def _undo_daemon_changes(job: str, done: Any, say) -> List[str]:
    """Reset every device the node's daemon holds for a change this job's processes asked
    for (the daemon records the job, from the client's cgroup), except those in ``done``
    (already reset); returns their URIs. Nothing leaks into the next job."""
    from governor.devices.daemon.client import request

    try:
        status = request("status")
    except GovernorError as err:
        say(f"cannot ask the daemon what job {job} changed: {err}", error=True)
        return []
    undone = []
    for dev in status.get("devices") or []:
        override = dev.get("client_override") or {}
        uri = dev.get("uri")
        if str(override.get("by_job")) != job or uri in done:
            continue
        try:
            request("reset", device=uri)
        except GovernorError as err:
            say(f"{uri}: the daemon did not undo job {job}'s change: {err}", error=True)
            continue
        say(f"{uri}: undid the change job {job} made through the daemon")
        undone.append(uri)
    return undone


def _epilog_gpu(gpu: Dict[str, Any], job: str, opener, say) -> Dict[str, Any]:
    row: Dict[str, Any] = {
        "gres_index": gpu.get("gres_index"),
        "uuid": gpu.get("uuid"),
        "name": gpu.get("name"),
        "board": gpu.get("board"),
        "uri": gpu.get("uri"),
        "clocks_mhz": gpu.get("clocks_mhz"),
        "power_limit_w": gpu.get("power_limit_w"),
        "energy_j": None,
        "avg_power_w": None,
        "restored": {},
        "errors": list(gpu.get("errors") or []),
    }
    uri = (
        f"nvml:{gpu['uuid']}"
        if gpu.get("uuid", "") and gpu["uuid"].startswith("GPU-")
        else gpu["uri"]
    )
    try:
        dev = opener(uri)
    except GovernorError as err:
        row["errors"].append(f"cannot open: {err}")
        row["restore_failed"] = True
        say(f"{uri}: cannot open: {err}", error=True)
        return row
    try:
        refused = _in_process_board(dev)
        if refused:
            if refused not in row["errors"]:
                row["errors"].append(refused)
                say(f"{uri}: {refused}", error=True)
            return row
        start = gpu.get("energy_j_start")
        try:
            end, power = _energy_j(dev)
            row["power_w_end"] = power
            if start is not None and end is not None:
                if end >= start:
                    row["energy_j"] = round(end - start, 3)
                    span = time.time() - float(gpu.get("t_start_s") or time.time())
                    if span > 0:
                        row["avg_power_w"] = round(row["energy_j"] / span, 3)
                else:
                    row["errors"].append("the energy counter went back (driver reload?)")
        except GovernorError as err:
            row["errors"].append(f"no energy reading: {err}")
        from governor.devices.ownership import restore_layers_down_to

        report: Optional[Dict[str, Any]]
        try:
            if gpu.get("via") == "daemon":
                from governor.devices.daemon.client import request

                request("reset", device=gpu["daemon_uri"])
                report = {"restored": {"via": "daemon"}, "failed": {}}
            else:
                report = restore_layers_down_to(
                    dev, _marker(job), command=f"governor slurm epilog {_marker(job)}"
                )
        except GovernorError as err:
            report = {"restored": {}, "failed": {"journal": str(err)}}
        if report is not None:
            row["restored"] = report["restored"]
            for name, why in report["failed"].items():
                row["errors"].append(f"could not restore {name}: {why}")
                row["restore_failed"] = True
                say(f"{uri}: could not restore {name}: {why}", error=True)
    finally:
        dev.close()
    return row


# -- AdminComment ------------------------------------------------------------------------------
def admin_comment(doc: Mapping[str, Any]) -> str:
    """The job's summary for ``AdminComment``: lowercase, no quotes, no spaces, no commas, so
    that what ``sacct`` shows after sacctmgr lowercased it reads back the same::

        governor:energy_j=2180.4;policy=ppw;gpu-a1000000-...=1608.1j@1050mhz;gpu-7e54...=572.3j@default
    """
    parts = [
        f"governor:energy_j={_num(doc.get('energy_j'))}",
        f"policy={doc.get('policy') or 'none'}",
    ]
    if doc.get("mean_cap_w") is not None:  # a cluster budget capped the job's GPUs
        parts.append(f"cap_w={_num(doc['mean_cap_w'])}")
    for gpu in doc.get("gpus") or []:
        clocks = gpu.get("clocks_mhz")
        clock = f"{clocks[1]:g}mhz" if clocks else "default"
        parts.append(
            f"{str(gpu.get('uuid') or gpu.get('uri')).lower()}={_num(gpu.get('energy_j'))}j@{clock}"
        )
    return ";".join(parts).lower()


def _num(value: Any) -> str:
    return "na" if value is None else f"{float(value):.1f}"


def parse_admin_comment(text: str) -> Optional[Dict[str, Any]]:
    """What :func:`admin_comment` wrote, read back from ``sacct`` (any case, backticks for
    quotes): ``{"energy_j", "policy", "gpus": {uuid: {"energy_j", "clock_mhz"}}}``; None when
    the text is not governor's."""
    text = (text or "").strip().lower()
    if not text.startswith("governor:"):
        return None
    out: Dict[str, Any] = {"energy_j": None, "policy": None, "gpus": {}}
    for part in text[len("governor:") :].split(";"):
        key, _, value = part.partition("=")
        if key == "energy_j":
            out["energy_j"] = None if value == "na" else float(value)
        elif key == "policy":
            out["policy"] = value
        elif key == "cap_w":
            out["mean_cap_w"] = None if value == "na" else float(value)
        elif key:
            match = re.fullmatch(r"([0-9.]+|na)j@([0-9.]+mhz|default)", value)
            if match:
                energy, clock = match.groups()
                out["gpus"][key] = {
                    "energy_j": None if energy == "na" else float(energy),
                    "clock_mhz": None if clock == "default" else float(clock[:-3]),
                }
    return out


def _accounting_on(settings: Settings) -> Tuple[bool, str]:
    if settings.accounting == "off":
        return False, "off"
    if settings.accounting == "on":
        return True, ""
    scontrol = _slurm_cmd(settings, "scontrol")
    if not scontrol:
        return False, "no scontrol"
    rc, out = _run([scontrol, "show", "config"])
    match = re.search(r"^AccountingStorageType\s*=\s*(\S+)", out, re.MULTILINE)
    if rc != 0 or not match:
        return False, "cannot tell (scontrol show config failed)"
    if "slurmdbd" not in match.group(1):
        return False, "disabled (no slurmdbd)"
    return True, ""


def _store_admin_comment(settings: Settings, job: str, doc: Dict[str, Any], say) -> str:
    comment = doc.get("admin_comment")
    if not comment:
        return "nothing to store"
    on, why = _accounting_on(settings)
    if not on:
        return why
    sacctmgr = _slurm_cmd(settings, "sacctmgr")
    if not sacctmgr:
        say("sacctmgr not found: AdminComment not stored", error=True)
        return "failed: no sacctmgr"
    base_job = job.split("_", 1)[0]
    argv = [
        sacctmgr,
        "-i",
        "modify",
        "job",
        "where",
        f"jobid={base_job}",
        "set",
        f"AdminComment={comment}",
    ]
    out = ""
    for attempt in range(_SACCTMGR_TRIES):
        rc, out = _run(argv)
        if rc == 0 and "nothing modified" not in out.lower():
            return "stored"
        if "nothing modified" not in out.lower():
            break
        time.sleep(_SACCTMGR_WAIT_S * (attempt + 1))  # slurmdbd has not seen the job yet
    last = out.splitlines()[-1] if out else "no output"
    say(f"sacctmgr could not store AdminComment: {last}", error=True)
    return f"failed: {last}"


# -- what the exporter shows ---------------------------------------------------------------------
def running_policies(record_dir: Optional[Path] = None) -> Callable[[Any], Dict[str, Any]]:
    """A policy provider for the exporter: the policy a running job's prolog set on each GPU,
    read from the running records at each call (``{"policy", "source": "slurm job N"}``)."""

    def directory() -> Path:
        if record_dir is not None:
            return Path(record_dir)
        return Path(os.environ.get("GOVERNOR_RECORD_DIR") or SETTINGS["GOVERNOR_RECORD_DIR"][0])

    def policy_of(device: Any) -> Dict[str, Any]:
        uuid = (getattr(device.identity, "uuid", None) or "").lower()
        if not uuid:
            return {}
        for path in sorted((directory() / "running").glob("*.json")):
            try:
                doc = json_loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for gpu in doc.get("gpus") or []:
                if str(gpu.get("uuid") or "").lower() == uuid:
                    return {"policy": doc.get("policy"), "source": f"slurm job {doc.get('job_id')}"}
        return {}

    return policy_of
