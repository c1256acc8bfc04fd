"""The environment an embedded Ray starts from: its raylet and every worker it starts inherit the
driver's, so what a run's actors need is set here before ``ray.init``. Torch-free on purpose (the
tests' conftest calls it before torch loads)."""

from __future__ import annotations

import os

from rl_system import openmp

WORKER_NICENESS = "RAY_worker_niceness"
TASK_EVENTS = "RAY_task_events_max_num_task_in_gcs"


def set_embedded_defaults() -> None:
    """Every default below, where the environment has no value of its own (the user's wins).

    * OpenMP waits passively (:mod:`rl_system.openmp`).
    * The actors run at the driver's priority (Ray adds 0 to its niceness). By default Ray starts
      its workers at a niceness 15 higher, to keep its own daemons responsive; a run's actors do
      all its work, and on a machine shared with any process at the default priority they got a
      few percent of a core: an MPE run made 44 env steps/s beside two BenchMARL runs, about 1,500
      alone (docs/lab/results.md, 2026-12-05).
    * Ray records every actor call in the GCS's task-event table, up to 100,000 of them by default:
      a long run of small rounds grew the GCS by ~11 MB per 1,000 rounds (bench/soak.py). The last
      10,000 are plenty for the dashboard.
    """
    openmp.set_default()
    os.environ.setdefault(WORKER_NICENESS, "0")
    os.environ.setdefault(TASK_EVENTS, "10000")
