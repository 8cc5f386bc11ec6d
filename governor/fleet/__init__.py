"""Fleet integration: running governor around batch jobs on clusters (Slurm prolog/epilog).

This layer sits above :mod:`governor.runtime` and below the CLI: it decides, for one job on
one node, which GPUs are the job's, sets their clocks, and records what the job used.
"""

__all__: list = []
