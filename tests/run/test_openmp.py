"""OpenMP's wait policy: chosen from the load other processes put on the machine at start (libgomp's
spin where the cores are free, passive where they are not), reaching every process of a run; the
user's value kept; a job joining a cluster waits passively."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from rl_system import openmp

# An embedded run's Ray started the way `rl-system train` starts it, and one of its worker
# processes asked what it got. A process of its own: the tests' shared Ray predates the setting.
PROBE = """
import json, os, ray
from rl_system.config import load_config
from rl_system.run.startup import init_ray, shutdown_ray
init_ray(load_config("launch/configs/cartpole_ppo.yaml", ["workers.num_workers=1"]), None)
probe = ray.remote(num_cpus=0)(lambda: (os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"), os.nice(0)))
policy, spin, nice = ray.get(probe.remote())
print(json.dumps({"driver": [os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")],
                  "actor": [policy, spin], "nice": nice - os.nice(0)}))
shutdown_ray()
"""
HOG = "while True: pass"


def probe(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (openmp.WAIT_POLICY, openmp.SPIN_COUNT)}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def without_policy(monkeypatch) -> None:
    for var in (openmp.WAIT_POLICY, openmp.SPIN_COUNT):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("busy, chosen", [(0.0, ("GOMP_SPINCOUNT", "300000")), (0.49, ("GOMP_SPINCOUNT", "300000")),
                                          (0.5, ("OMP_WAIT_POLICY", "PASSIVE")), (1.7, ("OMP_WAIT_POLICY", "PASSIVE")),
                                          (None, ("OMP_WAIT_POLICY", "PASSIVE"))])  # None: no /proc/stat
def test_the_policy_follows_the_cores_other_processes_keep_busy(monkeypatch, busy, chosen):
    without_policy(monkeypatch)
    monkeypatch.setattr(openmp, "other_busy_cores", lambda: busy)
    said = openmp.set_default()
    assert os.environ[chosen[0]] == chosen[1] and sum(v in os.environ for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")) == 1
    assert said.startswith(f"OpenMP waits: {chosen[0]}={chosen[1]} (chosen: other processes kept ")
    assert not openmp.user_set()  # its own choice: a job joining a cluster still hands the nodes a passive wait
    assert openmp.joined_ray_init() == {"runtime_env": {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}}}


def test_a_process_spinning_beside_this_one_counts_as_busy():
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        time.sleep(0.3)  # the hog is up
        openmp.begin_sample()
        time.sleep(0.4)
        busy = openmp.other_busy_cores()
    finally:
        hog.kill()
        hog.wait()
    assert busy is not None and busy >= 0.6, busy  # the hog's core (shared with whatever else runs)


def test_this_processs_own_work_is_not_counted():
    # Over one window: the machine's busy cores, this process's share, and what openmp says of the
    # others; whatever else the machine runs (a second test process), the others are the difference.
    openmp.begin_sample()
    ticks0, own0, t0 = openmp._busy_ticks(), os.times(), time.monotonic()
    while time.monotonic() - t0 < 1.0:  # this process keeps a core busy, as far as it gets one
        pass
    ticks1, own1, t1 = openmp._busy_ticks(), os.times(), time.monotonic()
    others = openmp.other_busy_cores()
    total = (ticks1 - ticks0) / os.sysconf("SC_CLK_TCK") / (t1 - t0)
    own = (own1.user + own1.system - own0.user - own0.system) / (t1 - t0)
    assert own >= 0.3, own  # it ran
    assert others == pytest.approx(max(0.0, total - own), abs=0.25), (others, total, own)


def test_the_users_value_is_kept(monkeypatch):
    without_policy(monkeypatch)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert openmp.set_default() == "OpenMP waits: OMP_WAIT_POLICY=ACTIVE (from the environment)"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and "GOMP_SPINCOUNT" not in os.environ
    assert openmp.user_set() and openmp.joined_ray_init() == {}  # a submitted job's own variables: Ray refuses a second value
    without_policy(monkeypatch)
    monkeypatch.setenv("GOMP_SPINCOUNT", "10000")
    openmp.set_default()
    assert os.environ["GOMP_SPINCOUNT"] == "10000" and "OMP_WAIT_POLICY" not in os.environ


@pytest.mark.slow  # a Ray of its own in a process of its own
def test_an_embedded_runs_processes_inherit_the_choice():
    hog = subprocess.Popen([sys.executable, "-c", HOG])  # one core taken: passive, whatever else runs
    try:
        time.sleep(0.3)
        got = probe(None)
    finally:
        hog.kill()
        hog.wait()
    # and at the driver's priority, where Ray's default is nice 15 (rl_system/ray_env.py)
    assert got == {"driver": ["PASSIVE", None], "actor": ["PASSIVE", None], "nice": 0}
    assert probe("ACTIVE") == {"driver": ["ACTIVE", None], "actor": ["ACTIVE", None], "nice": 0}
