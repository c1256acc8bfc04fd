"""OpenMP's wait policy for a run's processes: passive unless the environment says otherwise.

Torch's CPU builds run their intra-op parallelism (and MKL's) on GNU OpenMP. By default a thread
that reaches a parallel region's barrier first spins before it sleeps; where another process
holds one of the cores, the spinning thread burns the time slice its partner needs, and a
learner on two threads updated 1.6× slower than on one (``python -m bench.bench_threads``,
docs/lab/results.md, 2026-12-05). ``PASSIVE`` makes waiting threads sleep at once: on an idle
machine the update ran as fast (within the run-to-run spread), on a shared one two threads
stopped losing to one.

OpenMP reads the variable once, when torch loads it, so it must be in a process's environment
before torch is imported: the CLI sets it before any command imports torch, and a run hands it to
its Ray actors (an embedded Ray inherits it; on a cluster, :func:`joined_ray_init`). A value the
user set (``OMP_WAIT_POLICY=ACTIVE`` for a dedicated box) is left alone. Torch-free on purpose.
"""

from __future__ import annotations

import os

WAIT_POLICY = "OMP_WAIT_POLICY"
DEFAULT = "PASSIVE"


def set_default() -> None:
    """This process's (and the processes it starts') wait policy, where the environment has none."""
    os.environ.setdefault(WAIT_POLICY, DEFAULT)


def joined_ray_init() -> dict[str, object]:
    """``ray.init`` keywords for joining a cluster, whose processes did not start from this
    environment: the wait policy as the job's runtime environment, unless this process's
    environment already has one (a job submitted with a runtime environment runs its driver with
    those variables, and Ray refuses a second value for one)."""
    return {} if WAIT_POLICY in os.environ else {"runtime_env": {"env_vars": {WAIT_POLICY: DEFAULT}}}
