"""Shared fixtures: one real local Ray session reused by the tests (starting Ray costs seconds).

``ray_session`` (re)starts it only when needed, so a module that runs its own multi-node
``ray.cluster_utils.Cluster`` can shut it down and later tests still get a session.
"""

from __future__ import annotations

from rl_system import ray_env

# As an embedded run's processes do (rl_system/ray_env.py): OpenMP reads its wait policy when
# torch loads it, and the shared Ray's actors inherit this process's environment (their priority too).
ray_env.set_embedded_defaults()

import pytest
import ray
import torch


def start_ray() -> None:
    """The shared local session, started if it is not up (a module-scoped fixture calls this)."""
    if not ray.is_initialized():
        # 4 logical CPUs on a 2-core box: rounds are synchronous, so a learner and two workers
        # never compete for long; the same choice the embedded mode of the CLI makes.
        from rl_system.run.startup import start_embedded_ray

        start_embedded_ray(num_cpus=4, dashboard=False)  # as `rl-system train` starts its own


@pytest.fixture
def ray_session():
    start_ray()
    from ray.experimental.internal_kv import _internal_kv_initialized

    # A connected driver without its GCS client (``ray.cluster_utils.Cluster.shutdown()`` clears it
    # while another Ray is up) stores nothing in Ray's internal KV, Tune's registry included.
    assert _internal_kv_initialized(), "Ray is up but this process lost its GCS client (a Cluster shut down under it)"
    yield


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Actors built in-process (a ``Learner`` or ``RolloutWorker`` in a test) set this process's
    torch thread count from their config; the next test starts from the count the session had."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def _shutdown_ray_at_exit():
    yield
    if ray.is_initialized():
        ray.shutdown()
