"""The heap policy of learner and worker processes (``malloc``, :mod:`rl_system.heap`).

The thresholds themselves are measured in fresh interpreters: glibc's thresholds are
process-wide and cannot be reset, and the point is what a new actor process sees."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rl_system.config import ConfigError, RunConfig, load_config

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt thresholds are glibc's")

# Sixteen 2 MB tensors, freed together each iteration, the way an update frees a minibatch's
# activations: with glibc's dynamic thresholds the 32 MB left free at the heap's top exceeds
# twice the largest freed block and is trimmed, so the next iteration faults its pages in again.
CHURN = """
import json, resource, sys, torch
from rl_system.heap import configure_malloc
applied = configure_malloc(sys.argv[1])
def churn():
    blocks = [torch.ones(500_000) for _ in range(16)]
    return float(sum(b[-1] for b in blocks))
for _ in range(3):  # the heap grows to its working size
    churn()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    churn()
print(json.dumps({"applied": applied, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0}))
"""


def _churn(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_retain_keeps_freed_blocks_mapped():
    system, retain = _churn("system"), _churn("retain")
    assert system["applied"] is False and retain["applied"] is True
    # 10 iterations x 32 MB: ~78k faults of 4 KiB pages when each iteration maps them afresh
    assert system["faults"] > 40_000, system
    assert retain["faults"] < 500, retain


def test_a_worker_applies_the_configured_policy(monkeypatch):
    from rl_system.actors import worker as worker_module

    seen = []
    monkeypatch.setattr(worker_module, "configure_malloc", seen.append)
    cfg = RunConfig.model_validate({"env": {"name": "CartPole"}, "workers": {"num_envs": 4, "rollout_len": 2},
                                    "malloc": "system"})
    worker_module.RolloutWorker(0, cfg)
    assert seen == ["system"]


def test_retain_is_the_default_and_a_bad_value_is_one_config_error(tmp_path):
    assert RunConfig().malloc == "retain"
    path = tmp_path / "bad.yaml"
    path.write_text("malloc: jemalloc\n")
    with pytest.raises(ConfigError, match="malloc"):
        load_config(str(path))
