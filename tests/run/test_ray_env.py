"""An embedded Ray's environment: its actors get OpenMP's wait policy (rl_system/openmp.py) and run at
the driver's priority; its dashboard agent listens on a port the OS picks."""

from __future__ import annotations

import os

import pytest
import ray

from rl_system import openmp, ray_env


def test_the_defaults_fill_what_the_environment_lacks_and_keep_what_it_has(monkeypatch):
    for name in (openmp.WAIT_POLICY, openmp.SPIN_COUNT, ray_env.WORKER_NICENESS, ray_env.TASK_EVENTS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ray_env.WORKER_NICENESS, "5")  # the user's choice
    ray_env.set_embedded_defaults()
    assert openmp.WAIT_POLICY in os.environ or openmp.SPIN_COUNT in os.environ  # openmp's choice (tests/run/test_openmp.py)
    assert os.environ[ray_env.TASK_EVENTS] == "10000"
    assert os.environ[ray_env.WORKER_NICENESS] == "5"


def test_the_shared_rays_workers_run_at_the_drivers_priority(ray_session):
    # tests/conftest.py sets the embedded defaults before the session starts, as a run does; Ray's
    # own default would start its workers at nice 15, behind every process at the default priority.
    @ray.remote(num_cpus=0)
    def nice() -> int:
        return os.nice(0)

    assert ray.get(nice.remote()) == os.nice(0)


@pytest.mark.parametrize("dashboard", [False, True])
def test_within_embedded_ray_params_the_agent_port_is_the_oss_choice_and_no_idle_monitor_starts(dashboard):
    from ray._private import parameter

    base = parameter.RayParams
    with ray_env.embedded_ray_params(dashboard):
        params = parameter.RayParams()
        assert params.dashboard_agent_listen_port == 0  # 0: bind what the OS gives
        assert params.include_log_monitor is False and params.no_monitor is (not dashboard)
        assert parameter.RayParams(dashboard_agent_listen_port=7).dashboard_agent_listen_port == 7
    assert parameter.RayParams is base
    assert base().dashboard_agent_listen_port == ray._private.ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT
    assert base().no_monitor is False


def test_the_shared_rays_agent_serves_on_a_port_of_its_own(ray_session):
    # Started as an embedded run starts (tests/conftest.py), beside the other test process's Ray:
    # on Ray's fixed port one of the two agents would serve nothing (port -1).
    port = next(n["DashboardAgentListenPort"] for n in ray.nodes() if n["Alive"])
    assert port > 0 and port != ray._private.ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT
