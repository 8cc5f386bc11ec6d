#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/governor/slurm/epilog.sh): record the job's GPU
# energy, restore the GPUs, write the per-job JSON (and AdminComment with accounting). Runs
# as root on the compute node after the job ends.
exec "$(dirname "$(readlink -f "$0")")/governor-slurm.sh" epilog
