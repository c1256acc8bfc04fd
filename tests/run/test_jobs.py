"""The Ray Jobs launch path end to end (docs/cluster.md, "Ray Jobs API"): a real head started with
``ray start --head`` on loopback (its own temp dir, ports and auth token), then ``ray job submit
--working-dir . -- rl-system train ... --address auto`` with token authentication on, as a user
of Ray >= 2.59 meets it; while it trains, the run's ``rl_system_*`` series must be on the node's
Prometheus endpoint; the job must end SUCCEEDED and its run must have written its summary.

The head runs in its own process session and is torn down by signalling that session only, so
other Ray instances on the machine (the suite's shared local session, a benchmark) are left alone
(``ray stop`` would stop every Ray on the machine).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from child_env import own_ray_env

pytestmark = pytest.mark.slow  # a Ray head / cluster of its own: the slow set

REPO = Path(__file__).resolve().parents[2]
# The `ray` command of this Python's installation (beside the interpreter), else the one on PATH.
RAY = str(Path(sys.executable).with_name("ray")) if Path(sys.executable).with_name("ray").exists() \
    else (shutil.which("ray") or "ray")


def _free_ports(k: int, worker_span: int = 200) -> list[int]:
    """``k`` free ports between Ray's default worker ports (10002-19999, which other Rays on the
    machine use) and the kernel's ephemeral range (a port inside it can be taken by any outgoing
    connection before ``ray start`` binds it), as launch/local_cluster.sh picks its own; the last
    starts the workers' range
    ``[last, last + worker_span]``, which none of the others may fall in (Ray refuses a port used
    twice)."""
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    while True:
        ports = [rng.randrange(20000, ephemeral - worker_span) for _ in range(k)]
        low = ports[-1]
        if len(set(ports)) == k and not any(low <= p <= low + worker_span for p in ports[:-1]) \
                and all(_bindable(p) for p in ports):
            return ports


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A Ray head on 127.0.0.1 with token auth; yields (dashboard URL, env for the ray CLI,
    the node's Prometheus metrics URL, its temp dir)."""
    if shutil.which(RAY) is None:
        pytest.fail("no `ray` command: Ray's CLI comes with `pip install ray` (rl-system depends on it)")
    root = tmp_path_factory.mktemp("head")
    # Ray's sockets live under --temp-dir and a Unix socket's path may not pass 107 bytes: pytest's
    # tmp path (longer under pytest-xdist, popen-gw0/) would not leave room for Ray's session name.
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs-jobs-", dir="/tmp"))
    token = root / "auth_token"
    token.write_text(secrets.token_hex(32))
    # Metrics reach the node's Prometheus endpoint once per report interval (default 10 s).
    env = own_ray_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token), RAY_metrics_report_interval_ms="1000")
    gcs, dash, nm, om, agent, agent_grpc, metrics, rt_env, client, low = _free_ports(10)
    log = open(root / "head.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--node-manager-port={nm}",
         f"--object-manager-port={om}", f"--dashboard-agent-listen-port={agent}",
         f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
         f"--runtime-env-agent-port={rt_env}", f"--ray-client-server-port={client}",
         f"--min-worker-port={low}", f"--max-worker-port={low + 200}", "--num-cpus=4",
         f"--temp-dir={ray_tmp}", "--include-dashboard=true"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.monotonic() + 120
        while True:
            ok = subprocess.run([RAY, "job", "list", "--address", url], env=env, capture_output=True, timeout=60)
            if ok.returncode == 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not come up: {(root / 'head.log').read_text()[-2000:]}")
            time.sleep(1.0)
        yield url, env, f"http://127.0.0.1:{metrics}/metrics", ray_tmp
    finally:
        _stop_session(proc)
        log.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _stop_session(proc: subprocess.Popen) -> None:
    """SIGTERM to the head's whole session (GCS, raylet, dashboard, workers), SIGKILL after 3 s."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def _job_status(url: str, env: dict, job_id: str) -> str:
    out = subprocess.run([sys.executable, "-c", "import sys; from ray.job_submission import JobSubmissionClient; "
                          "print(JobSubmissionClient(sys.argv[1]).get_job_status(sys.argv[2]))", url, job_id],
                         env=env, capture_output=True, text=True, timeout=60)
    return out.stdout.strip().rsplit(".", 1)[-1]


def test_ray_job_submit_without_the_token_is_refused(head):
    url, env, _, _ = head
    no_token = {k: v for k, v in env.items() if k not in ("RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")}
    no_token["RAY_AUTH_TOKEN"] = "not-the-token"
    refused = subprocess.run([RAY, "job", "list", "--address", url], env=no_token, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0 and "auth" in (refused.stdout + refused.stderr).lower()


def test_ray_job_submit_trains_exports_metrics_and_succeeds(head, tmp_path):
    """``ray job submit --working-dir . -- rl-system train ... --address auto``: while the job
    trains, the ``rl_system_*`` series tagged with its run's name are on the node's Prometheus
    endpoint (``--metrics-export-port``); it ends SUCCEEDED (its ``max_wall_s``), the driver's
    closing line is in the job's logs and the run's summary is on disk."""
    url, env, metrics_url, ray_dir = head
    job_id = f"rl-system-test-{uuid.uuid4().hex[:8]}"
    run = f"job-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [RAY, "job", "submit", "--no-wait", "--address", url, "--submission-id", job_id, "--working-dir", ".", "--",
         "rl-system", "train", "launch/configs/cartpole_ppo.yaml", "--address", "auto", "--run-dir",
         str(tmp_path / run), "--quiet", "--set", "max_env_steps=1000000000", "--set", "max_wall_s=10",
         "--set", "tensorboard=false", "--set", "target_return=null", "--set", "checkpoint.every_rounds=0"],
        cwd=REPO, env=env, check=True, capture_output=True, timeout=120)
    wanted = {"ray_rl_system_env_steps", "ray_rl_system_policy_version", "ray_rl_system_bytes_shipped_total"}
    found: dict[str, float] = {}
    # The endpoint is read every half second while the job lives; its status (a Python process
    # importing Ray, seconds on a busy machine) only every few seconds, so the read is not starved.
    deadline = time.monotonic() + 240
    next_status = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if set(found) != wanted:
            found.update(_series(metrics_url, wanted, run))
        if set(found) == wanted or time.monotonic() > next_status:
            if _job_status(url, env, job_id) in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
            next_status = time.monotonic() + 5.0
    logs = subprocess.run([RAY, "job", "logs", "--address", url, job_id], env=env, capture_output=True, text=True,
                          timeout=60).stdout
    assert _job_status(url, env, job_id) == "SUCCEEDED", logs[-3000:]
    assert set(found) == wanted, found
    assert found["ray_rl_system_env_steps"] > 0 and found["ray_rl_system_bytes_shipped_total"] > 0
    assert "done: " in logs and "env steps" in logs                 # the CLI's closing line, from the job's driver
    summary = json.loads((tmp_path / run / "summary.json").read_text())
    assert summary["env_steps"] > 0 and summary["policy_version"] >= 1
    # The driver ran on the head: the rl_system dashboard sits beside Ray's provisioned ones.
    board = ray_dir / "session_latest" / "metrics" / "grafana" / "dashboards" / "rl_system_grafana_dashboard.json"
    assert json.loads(board.read_text())["uid"] == "rlSystemDashboard"
    assert (board.parent / "default_grafana_dashboard.json").exists()


def _series(metrics_url: str, names: set[str], run: str) -> dict[str, float]:
    """The values of ``names`` tagged ``run="<run>"`` on a Prometheus text page ({} if unreachable)."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=10) as page:
            text = page.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name in names and f'run="{run}"' in line:
            out[name] = float(line.rsplit(" ", 1)[-1])
    return out
