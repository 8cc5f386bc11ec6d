#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/governor/slurm/epilog.sh): reset the job's GPUs to
# what they were before the prolog. Runs as root on the compute node after the job ends.
exec "$(dirname "$(readlink -f "$0")")/governor-slurm.sh" epilog
