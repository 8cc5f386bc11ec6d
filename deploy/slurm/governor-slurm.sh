#!/usr/bin/env bash
# governor-slurm.sh prolog|epilog: apply the site's GPU policy to a Slurm job's GPUs before
# it runs, and reset them after. Called by prolog.sh / epilog.sh (see docs/deploy.md).
#
# Settings come from the environment, then from $GOVERNOR_SLURM_CONF
# (default /etc/governor/slurm.conf, a file of VAR=value lines; see slurm.conf.example):
#   GOVERNOR_POLICY           ppw | max | none | clock=MHZ | power-limit=W   (default ppw)
#   GOVERNOR_DEVICE_TEMPLATE  device URI per GPU; {gpu} is the GPU index     (default nvml:{gpu})
#   GOVERNOR_VIA              direct (governor apply/reset, needs root) | daemon (default direct)
#   GOVERNOR_CMD              how to run governor                            (default governor)
#   GOVERNOR_STRICT           1: a failure fails the prolog (Slurm drains the node) (default 0)
#   GOVERNOR_SYSLOG           1: also log through logger(1)                  (default 0)
# The job's GPUs are SLURM_JOB_GPUS (set for prolog/epilog), else CUDA_VISIBLE_DEVICES, else
# GPU_DEVICE_ORDINAL: comma-separated indices or ranges (0,2,4-5). Other entries (UUIDs) are
# skipped with a warning. No value read here is ever evaluated by the shell.
set -u

mode="${1:-}"
case "$mode" in
  prolog|epilog) ;;
  *) echo "usage: $0 prolog|epilog" >&2; exit 2 ;;
esac

conf="${GOVERNOR_SLURM_CONF:-/etc/governor/slurm.conf}"
job="${SLURM_JOB_ID:-?}"

log() {
  echo "governor-slurm[$mode job $job]: $*" >&2
  if [ "${GOVERNOR_SYSLOG:-0}" = 1 ] && command -v logger >/dev/null 2>&1; then
    logger -t governor-slurm -- "$mode job $job: $*"
  fi
}

# Read VAR=value lines from the config without sourcing it; the environment wins.
if [ -r "$conf" ]; then
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%%#*}"
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [ -z "$line" ] && continue
    key="${line%%=*}"
    value="${line#*=}"
    value="${value#\"}"; value="${value%\"}"
    case "$key" in
      GOVERNOR_POLICY|GOVERNOR_DEVICE_TEMPLATE|GOVERNOR_VIA|GOVERNOR_CMD|GOVERNOR_STRICT|GOVERNOR_SYSLOG|GOVERNOR_STATE_DIR|GOVERNOR_DAEMON_SOCKET)
        if [ -z "${!key+x}" ]; then export "$key=$value"; fi ;;
      *) log "ignoring unknown setting '$key' in $conf" ;;
    esac
  done < "$conf"
fi

policy="${GOVERNOR_POLICY:-ppw}"
template="${GOVERNOR_DEVICE_TEMPLATE:-nvml:{gpu\}}"
via="${GOVERNOR_VIA:-direct}"
strict="${GOVERNOR_STRICT:-0}"
read -r -a cmd <<< "${GOVERNOR_CMD:-governor}"

fail() {
  log "error: $*"
  if [ "$strict" = 1 ]; then exit 1; fi
  exit 0
}

# Validate every setting before anything runs.
case "$via" in direct|daemon) ;; *) fail "GOVERNOR_VIA must be direct or daemon, not '$via'" ;; esac
[[ "$template" =~ ^[A-Za-z0-9:._/?=\&{}-]+$ ]] || fail "GOVERNOR_DEVICE_TEMPLATE has unexpected characters: '$template'"
apply_args=()
if [ "$mode" = prolog ]; then  # the epilog resets whatever the policy was
  apply_args=()
  case "$policy" in
    none) log "policy none: leaving the GPUs alone"; exit 0 ;;
    ppw|max) apply_args=("$policy") ;;
    clock=*)
      mhz="${policy#clock=}"
      [[ "$mhz" =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "bad clock in GOVERNOR_POLICY '$policy'"
      if [ "$via" = daemon ]; then apply_args=(--min-mhz "$mhz"); else apply_args=(--clock "$mhz"); fi ;;
    power-limit=*)
      watts="${policy#power-limit=}"
      [[ "$watts" =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "bad power limit in GOVERNOR_POLICY '$policy'"
      [ "$via" = daemon ] && fail "the daemon does not set power limits; use GOVERNOR_VIA=direct"
      apply_args=(--power-limit "$watts") ;;
    *) fail "GOVERNOR_POLICY must be ppw, max, none, clock=MHZ or power-limit=W, not '$policy'" ;;
  esac
fi

# The job's GPU indices.
source_var=""
for var in SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL; do
  if [ -n "${!var:-}" ]; then source_var="$var"; break; fi
done
if [ -z "$source_var" ]; then
  log "no GPUs allocated to this job (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES unset): nothing to do"
  exit 0
fi
gpus=()
IFS=',' read -r -a entries <<< "${!source_var}"
for entry in ${entries[@]+"${entries[@]}"}; do
  entry="${entry//[[:space:]]/}"
  if [[ "$entry" =~ ^[0-9]+$ ]]; then
    gpus+=("$entry")
  elif [[ "$entry" =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] \
       && [ $(( BASH_REMATCH[2] - BASH_REMATCH[1] )) -lt 1024 ]; then
    for ((i = BASH_REMATCH[1]; i <= BASH_REMATCH[2]; i++)); do gpus+=("$i"); done
  elif [ -n "$entry" ]; then
    log "skipping GPU entry '$entry' from $source_var (not an index)"
  fi
done

# One device URI per GPU (a template without {gpu}, e.g. jetson, gives one device).
uris=()
for gpu in ${gpus[@]+"${gpus[@]}"}; do
  uri="${template//\{gpu\}/$gpu}"
  seen=0
  for u in ${uris[@]+"${uris[@]}"}; do [ "$u" = "$uri" ] && seen=1; done
  [ "$seen" = 0 ] && uris+=("$uri")
done
[ "${#uris[@]}" -eq 0 ] && { log "no usable GPU index in $source_var: nothing to do"; exit 0; }

status=0
for uri in "${uris[@]}"; do
  if [ "$mode" = prolog ]; then
    if [ "$via" = daemon ]; then
      case "$policy" in clock=*) argv=(daemon lock "${apply_args[@]}") ;; *) argv=(daemon apply "${apply_args[@]}") ;; esac
    else
      argv=(apply "${apply_args[@]}")
    fi
  else
    if [ "$via" = daemon ]; then argv=(daemon reset); else argv=(reset); fi
  fi
  if out=$("${cmd[@]}" "${argv[@]}" --device "$uri" --json 2>&1); then
    log "$uri: ${argv[*]}: ok"
  else
    log "$uri: ${argv[*]} failed: $(printf '%s' "$out" | grep -m1 'error' || printf '%s' "$out" | tail -n1)"
    status=1
  fi
done

if [ "$status" -ne 0 ] && [ "$strict" = 1 ]; then exit 1; fi
exit 0
