"""Every failure a user can cause or meet ends in one clear line or a recovery: bad input at the
command line, a cluster the actors cannot fit, an unreachable address, actors that fail to
start, and a learner or checkpointer killed mid-run (real Ray, real processes)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import ray
from killing import train_killing
from ray.cluster_utils import Cluster

from rl_system.checkpoint import find_resume
from rl_system.cli.main import main
from rl_system.config import load_config
from rl_system.run.loop import train

FAST = ["tensorboard=false", "log_every_s=30"]


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl_system", "train", "launch/configs/cartpole_ppo.yaml", *args],
                          capture_output=True, text=True, timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The run's single ``rl-system:`` line; no traceback anywhere on the console."""
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("rl-system:")]
    assert len(ours) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr + proc.stdout
    return ours[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


# -- bad input, one line each --------------------------------------------------------------------

def test_unknown_env_name_is_one_config_error_line():
    proc = cli("--set", "env.name=NoSuchEnv")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "env.name" in line and "NoSuchEnv" in line and "CartPole" in line  # names what exists


def test_unreachable_address_is_one_line_within_seconds():
    t0 = time.monotonic()
    proc = cli("--address", f"127.0.0.1:{closed_port()}")
    assert proc.returncode == 1
    assert "no Ray cluster reachable" in one_error_line(proc)
    assert time.monotonic() - t0 < 60  # Ray alone retries for minutes; the check answers in seconds


def test_status_of_an_unreachable_address_is_one_line_within_seconds():
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rl_system", "status", "--address", f"127.0.0.1:{closed_port()}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "no Ray cluster reachable" in one_error_line(proc)
    assert time.monotonic() - t0 < 60


def test_ray_that_fails_to_start_is_one_line(monkeypatch, capsys):
    """On an overloaded machine Ray's node can time out starting; Ray raises a bare Exception."""
    import ray

    from rl_system.cli.main import main

    def timed_out(*args, **kwargs):
        raise Exception("The current node timed out during startup. This could happen because some of the raylet "
                        "failed to startup or the GCS has become overloaded.")

    monkeypatch.setattr(ray, "init", timed_out)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    assert main(["train", "launch/configs/cartpole_ppo.yaml", "--set", "tensorboard=false"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("rl-system: cannot start or join Ray (local): The current node timed out")


def test_a_gpu_the_machine_does_not_have_is_refused_before_waiting(tmp_path):
    proc = cli("--set", "workers.num_gpus=1", "--run-dir", str(tmp_path))
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "needs 2 GPU" in line and "has 0 GPU" in line


def test_worker_that_cannot_allocate_its_envs_is_one_line_naming_actor_and_cause(ray_session, capsys, tmp_path):
    # In-process on the shared Ray (a fresh process per test only re-measures start-up): the same
    # command line, the same single line on stderr and exit code. One worker: one actor to fail is
    # enough, and one start less.
    code = main(["train", "launch/configs/cartpole_ppo.yaml", "--set", "workers.num_envs=100000000000",
                 "--set", "tensorboard=false", "--set", "workers.num_workers=1", "--run-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 1
    line = one_error_line(subprocess.CompletedProcess([], code, out.out, out.err))
    assert "rollout-worker-" in line and "failed to start" in line and "allocate" in line
    # The full text the console held back is in the run's log file.
    log = (tmp_path / "console.log").read_text()
    assert "Traceback" in log or "RolloutWorker.__init__" in log


# -- a cluster the actors cannot fit ---------------------------------------------------------------

@pytest.fixture(scope="module")
def two_cpu_head():
    """One 2-CPU head for the module's two tests (a cluster costs seconds to start); each test
    leaves it as it found it: nothing joined, nothing placed."""
    if ray.is_initialized():
        ray.shutdown()  # the shared local session; the `ray_session` fixture restarts it later
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    yield cluster
    # Cluster.shutdown() clears this process's GCS client (Ray's internal KV) whichever Ray it
    # serves: the shared session that this module's later tests started would stay connected
    # without one, and a later module's Tune registry would store nothing (RLlib's env runners then
    # miss a registered env). So that session goes first; `ray_session` restarts it.
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


@pytest.mark.slow  # a Ray head of its own
def test_actors_that_can_never_fit_the_cluster_exit_2_naming_the_amounts(two_cpu_head, tmp_path):
    # Two workers and the learner at 1 CPU each on a 2-CPU head: they would wait forever.
    proc = cli("--address", two_cpu_head.address, "--run-dir", str(tmp_path))
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "needs 3 CPU" in line and "2 workers × 1 + learner 1" in line and "has 2 CPU" in line


@pytest.mark.slow  # a Ray head of its own
def test_actors_that_fit_but_stay_pending_give_up_after_startup_timeout(two_cpu_head, tmp_path):
    from rl_system.run.loop import TrainingError

    ray.init(address=two_cpu_head.address, log_to_driver=False, configure_logging=False)
    try:
        @ray.remote(num_cpus=2)
        class Blocker:
            def ready(self) -> bool:
                return True

        blocker = Blocker.remote()
        ray.get(blocker.ready.remote())  # holds both CPUs: the run fits the cluster, not what is free
        cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
            "workers.num_workers=1", "workers.num_cpus=0.5", "learner.num_cpus=0.5", "startup_timeout_s=3"])
        with pytest.raises(TrainingError, match=r"not started after 3s \(startup_timeout_s\): free: 0 of 2 CPU"):
            train(cfg, run_dir=tmp_path, quiet=True)
        assert "not started after 3s" in (tmp_path / "console.log").read_text()
    finally:
        ray.shutdown()


# -- recovery ------------------------------------------------------------------------------------

def test_a_killed_checkpointer_is_restarted_and_no_written_checkpoint_is_lost(ray_session, tmp_path):
    # One worker of 128 envs: the 10 rounds of 4,096 env steps two workers of 64 gave, one actor start less.
    cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
        "target_return=null", "max_env_steps=40960", "workers.num_workers=1", "workers.num_envs=128",
        "checkpoint.every_rounds=2", "log_every_s=0"])
    summary = train_killing(cfg, tmp_path, tmp_path / "checkpoints" / "latest.json", "checkpointer")
    assert summary.status == "completed" and summary.checkpointer_restarts == 1, summary
    assert summary.checkpoints.saved >= 2
    found = find_resume(str(tmp_path), cfg, None)
    assert found.state["learner"]["version"] == summary.policy_version  # the final save landed


@pytest.mark.slow
def test_a_killed_archiver_is_restarted_and_archives_go_on(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
        "target_return=null", "max_env_steps=163840", "workers.num_envs=64", "archive_every=1",
        "checkpoint.every_rounds=0"])
    summary = train_killing(cfg, tmp_path, tmp_path / "rollouts" / "rollouts-r000002.arrow", "rollout-archiver")
    assert summary.status == "completed" and summary.archiver_restarts == 1, summary
    # Every round was archived or, with 4 writes already in flight, skipped and counted; the restart
    # was seen on a write that landed after it (the new process answered).
    assert summary.archives_written + summary.archives_skipped == summary.rounds
    assert len(list((tmp_path / "rollouts").glob("rollouts-r*.arrow"))) == summary.archives_written
