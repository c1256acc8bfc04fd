"""``ray up`` / ``ray exec`` / ``ray submit`` / ``ray down`` end to end, with Ray's ``local`` node
provider over SSH to this machine (launch/local_cluster.sh, launch/cluster.local.yaml): its own
sshd in its own PID namespace, a key and an auth token made on the fly, the token propagated by
the cluster YAML, a short CartPole run submitted with ``launch/train.py``.

Needs root, Debian's openssh-server and rsync (CI installs them: .ci/run). Where they are missing
the test is skipped, unless ``RL_SYSTEM_REQUIRE_SSHD=1`` (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a Ray head / cluster of its own: the slow set

REPO = Path(__file__).resolve().parents[2]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    for tool in ("/usr/sbin/sshd", "rsync", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} missing (apt-get install -y openssh-server rsync)"
    return None


def test_ray_up_exec_submit_down_over_ssh_to_this_machine():
    why = _missing()
    if why:
        if os.environ.get("RL_SYSTEM_REQUIRE_SSHD") == "1":
            pytest.fail(f"launch/local_cluster.sh cannot run: {why}")
        pytest.skip(why)
    proc = subprocess.run(["bash", "launch/local_cluster.sh", "launch/configs/cartpole_ppo.yaml",
                           "--set", "max_env_steps=20000", "--set", "target_return=null"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "== ray up" in out and "Starting the Ray runtime" in out
    assert "0.0/4.0 CPU" in out  # `ray exec ... ray status` on the head, with the token
    assert "InvalidAuthToken" in out  # the same request with a wrong token is refused
    assert "summary.json: completed, 20,480 env steps" in out  # the submitted run, read back
    assert "Stopped all" in out and "No nodes remaining" in out  # ray down
