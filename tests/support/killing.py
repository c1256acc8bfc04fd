"""Killing a run's actor mid-run, as the OOM killer would: for the recovery tests of
tests/run/test_hardening.py and tests/run/test_learner_group.py (imported as ``killing``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import ray

from rl_system.run.loop import train
from rl_system.run.summary import RunSummary


def kill_when(path: Path, name_prefix: str, stop: threading.Event) -> threading.Thread:
    """Once ``path`` exists (a checkpoint was written), kill the actor whose name starts with
    ``name_prefix`` outright, as the OOM killer would (Ray may restart it, as after a crash)."""
    def run():
        while not stop.is_set() and not path.exists():
            time.sleep(0.1)
        if stop.is_set():
            return
        for actor in ray.util.list_named_actors(all_namespaces=True):
            if actor["name"].startswith(name_prefix):
                ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=False)
                return
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def train_killing(cfg, run_dir: Path, when: Path, name_prefix: str) -> RunSummary:
    """Train ``cfg`` while :func:`kill_when` kills ``name_prefix`` once ``when`` exists."""
    stop = threading.Event()
    killer = kill_when(when, name_prefix, stop)
    try:
        return train(cfg, run_dir=run_dir, quiet=True)
    finally:
        stop.set()
        killer.join()
