"""An embedded Ray's environment: its actors wait passively in OpenMP and run at the driver's priority."""

from __future__ import annotations

import os

import ray

from rl_system import openmp, ray_env


def test_the_defaults_fill_what_the_environment_lacks_and_keep_what_it_has(monkeypatch):
    for name in (openmp.WAIT_POLICY, ray_env.WORKER_NICENESS, ray_env.TASK_EVENTS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ray_env.WORKER_NICENESS, "5")  # the user's choice
    ray_env.set_embedded_defaults()
    assert os.environ[openmp.WAIT_POLICY] == "PASSIVE" and os.environ[ray_env.TASK_EVENTS] == "10000"
    assert os.environ[ray_env.WORKER_NICENESS] == "5"


def test_the_shared_rays_workers_run_at_the_drivers_priority(ray_session):
    # tests/conftest.py sets the embedded defaults before the session starts, as a run does; Ray's
    # own default would start its workers at nice 15, behind every process at the default priority.
    @ray.remote(num_cpus=0)
    def nice() -> int:
        return os.nice(0)

    assert ray.get(nice.remote()) == os.nice(0)
