#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/governor/slurm/prolog.sh): apply the site policy
# to the job's GPUs. Runs as root on the compute node before the job starts.
exec "$(dirname "$(readlink -f "$0")")/governor-slurm.sh" prolog
