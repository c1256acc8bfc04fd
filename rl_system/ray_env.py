"""The environment an embedded Ray starts from: its raylet and every worker it starts inherit the
driver's, so what a run's actors need is set here before ``ray.init``. Torch-free on purpose (the
tests' conftest calls it before torch loads)."""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterator

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


@contextlib.contextmanager
def embedded_ray_params(dashboard: bool) -> Iterator[None]:
    """Within it, a Ray that ``ray.init`` starts gets what ``ray.init`` has no argument for
    (``ray start`` has flags for each):

    * its dashboard agent listens on a port the OS picks, not on Ray's fixed 52365. With a second
      Ray on the machine (two runs side by side, a run beside ``rl-system tune``, test processes)
      the fixed port is taken: the new agent retries the bind for 3.3 s while the raylet waits for
      it, then serves no HTTP at all (Ray Jobs cannot reach that node). A start took 8.8 s beside
      another Ray and 4.8 s with this (docs/lab/results.md, 2026-12-05);
    * no log monitor: it streams the workers' output to a driver that asked for it, and a run asks
      for none (``log_to_driver=False``; every actor's output stays in Ray's session logs);
    * no autoscaler monitor unless the dashboard is wanted (its cluster page shows what the monitor
      reports): one machine of fixed size has nothing to scale.

    Each is a Python process that imports Ray while the run starts; on 2 cores the two monitors
    cost about 0.9 CPU-s of it (docs/lab/results.md, 2026-12-07). Where Ray's internals differ from
    what this expects it changes nothing.
    """
    try:
        from ray._private import parameter
    except ImportError:
        yield
        return
    base = getattr(parameter, "RayParams", None)
    wanted = {"dashboard_agent_listen_port": 0,  # 0: the agent binds what the OS gives
              "include_log_monitor": False, "no_monitor": not dashboard}
    known = set(inspect.signature(base.__init__).parameters) if base is not None else set()
    if not wanted.keys() <= known:
        yield
        return

    class _Embedded(base):
        def __init__(self, *args, **kwargs):
            for key, value in wanted.items():
                kwargs.setdefault(key, value)
            super().__init__(*args, **kwargs)

    parameter.RayParams = _Embedded
    try:
        yield
    finally:
        parameter.RayParams = base
