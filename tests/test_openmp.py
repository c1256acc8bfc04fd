"""OpenMP's wait policy reaches every process of a run: passive by default, the user's value kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rl_system import openmp

# An embedded run's Ray started the way `rl-system train` starts it, and one of its worker
# processes asked what it got. A process of its own: the tests' shared Ray predates the setting.
PROBE = """
import json, os, ray
from rl_system.config import load_config
from rl_system.run.startup import init_ray, shutdown_ray
init_ray(load_config("launch/configs/cartpole_ppo.yaml", ["workers.num_workers=1"]), None)
probe = ray.remote(num_cpus=0)(lambda: (os.environ.get("OMP_WAIT_POLICY"), os.nice(0)))
policy, nice = ray.get(probe.remote())
print(json.dumps({"driver": os.environ.get("OMP_WAIT_POLICY"), "actor": policy, "nice": nice - os.nice(0)}))
shutdown_ray()
"""


def probe(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a Ray of its own in a process of its own
def test_an_embedded_runs_processes_wait_passively():
    # (a value the user set is kept: the test below; its actors inherit it as they inherit this)
    # and at the driver's priority, where Ray's default is nice 15 (rl_system/ray_env.py)
    assert probe(None) == {"driver": "PASSIVE", "actor": "PASSIVE", "nice": 0}


def test_joining_a_cluster_hands_the_policy_to_the_job_unless_the_environment_has_one(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert openmp.joined_ray_init() == {"runtime_env": {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}}}
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert openmp.joined_ray_init() == {}  # a submitted job's own variables: Ray refuses a second value
    openmp.set_default()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
