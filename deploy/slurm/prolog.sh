#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/governor/slurm/prolog.sh, with PrologFlags=Alloc):
# set the job's GPUs to the site policy and record their energy counters. Runs as root on
# the compute node before the job starts.
exec "$(dirname "$(readlink -f "$0")")/governor-slurm.sh" prolog
