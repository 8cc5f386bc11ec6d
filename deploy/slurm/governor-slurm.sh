#!/usr/bin/env bash
# governor-slurm.sh prolog|epilog: run `governor slurm prolog|epilog` for the job slurmd
# describes in the environment. Called by prolog.sh / epilog.sh (see docs/deploy.md); all
# the logic (which GPUs, policy, energy record, AdminComment) is in governor.fleet.slurm.
#
# slurmd runs this as root with a cleared environment (no PATH), so governor is named by an
# absolute path: $GOVERNOR_BIN, else the GOVERNOR_BIN= line of $GOVERNOR_SLURM_CONF
# (default /etc/governor/slurm.conf), else /usr/local/bin/governor. The file is read, never
# sourced. A governor that cannot be run is logged (stderr and syslog) and, unless
# GOVERNOR_STRICT=1, the job runs anyway: a failing prolog drains the node.
set -u

mode="${1:-}"
case "$mode" in
  prolog|epilog) ;;
  *) echo "usage: $0 prolog|epilog" >&2; exit 2 ;;
esac
conf="${GOVERNOR_SLURM_CONF:-/etc/governor/slurm.conf}"

setting() {  # the value of "$1=" in the conf file, without running anything in it
  [ -r "$conf" ] || return 0
  sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\"\{0,1\}\([^\"#]*\)\"\{0,1\}[[:space:]]*\(#.*\)\{0,1\}$/\1/p" "$conf" | tail -n 1
}

gov="${GOVERNOR_BIN:-$(setting GOVERNOR_BIN)}"
gov="${gov:-/usr/local/bin/governor}"
if [ ! -x "$gov" ]; then
  msg="governor-slurm[$mode job ${SLURM_JOB_ID:-?}]: error: $gov is not an executable; set GOVERNOR_BIN in $conf"
  echo "$msg" >&2
  logger -t governor-slurm -- "$msg" 2>/dev/null || true
  strict="${GOVERNOR_STRICT:-$(setting GOVERNOR_STRICT)}"
  [ "$strict" = 1 ] && exit 1
  exit 0
fi
exec "$gov" slurm "$mode"
