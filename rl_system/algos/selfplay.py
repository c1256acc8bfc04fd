"""Self-play: a pool of frozen snapshots of earlier policy versions that drive the opponent side
of two-player envs (e.g. :class:`rl_system.envs.air_combat.AirCombatVecEnv`).

Driver side, :class:`SnapshotPool`: every ``refresh_every`` rounds the current weights (the
object-store ref the workers already share, so no copy) join a pool of the last ``pool_size``
versions, and each worker is sent an opponent: the newest snapshot with probability
``latest_prob``, the env's scripted opponent with probability ``scripted_prob``, else a
snapshot drawn uniformly from the pool. A worker call is ordered before that worker's next
``sample`` (Ray orders one caller's calls to an actor), so a rollout never mixes opponents.

Worker side, :class:`SnapshotOpponent`: a frozen copy of the policy network that the env calls
with the opponent's (mirrored) observation dict; actions are sampled, not argmax, so the
opponent keeps the stochasticity it was trained with. Both sides still step in one tensor step.
"""

from __future__ import annotations

import random
from typing import Any

import ray
import torch
from torch import nn

from rl_system.config.sections import SelfPlayConfig


class SnapshotOpponent:
    """``act(obs) -> action`` of a frozen policy copy (``[N, ...]`` in, ``[N]``/``[N, A]`` out)."""

    def __init__(self, policy: nn.Module):
        self.policy = policy.eval()
        self.version = -1

    def load(self, weights: dict[str, torch.Tensor], version: int) -> None:
        if version != self.version:
            self.policy.load_state_dict(weights)
            self.version = version

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.policy.act(obs)[0]


class SnapshotPool:
    """Driver-side pool of ``(version, weights_ref)``; picks each worker's opponent."""

    SCRIPTED = (-1, None)  # an opponent of version -1 means: the env's own scripted opponent

    def __init__(self, cfg: SelfPlayConfig, seed: int):
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.snapshots: list[tuple[int, Any]] = []
        self.assigned: dict[int, tuple[int, Any]] = {}  # worker -> its current opponent

    def due(self, rounds: int) -> bool:
        return self.cfg.enabled and rounds % self.cfg.refresh_every == 0

    def add(self, version: int, weights_ref: Any) -> None:
        self.snapshots.append((version, weights_ref))
        del self.snapshots[:-self.cfg.pool_size]

    def pick(self) -> tuple[int, Any]:
        if not self.snapshots or self.rng.random() < self.cfg.scripted_prob:
            return self.SCRIPTED
        if self.rng.random() < self.cfg.latest_prob:
            return self.snapshots[-1]
        return self.rng.choice(self.snapshots)

    def refresh(self, workers: list[Any]) -> None:
        """Send every worker a newly picked opponent (fire and forget; ordered before its next sample)."""
        for w, worker in enumerate(workers):
            self.assigned[w] = self.pick()
            self.send(w, worker)

    def send(self, w: int, worker: Any) -> None:
        """(Re)send worker ``w`` its opponent, e.g. after Ray restarted its process."""
        version, ref = self.assigned.get(w, self.SCRIPTED)
        worker.set_opponent.remote(ref, version)

    # -- checkpoint: the snapshots' weights themselves, so a resumed run keeps its pool --------
    def state(self) -> dict[str, Any]:
        weights = ray.get([ref for _, ref in self.snapshots]) if self.snapshots else []
        return {"versions": [v for v, _ in self.snapshots], "weights": weights,
                "rng": self.rng.getstate()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.snapshots = [(v, ray.put(w)) for v, w in zip(state["versions"], state["weights"])]
        rng = state["rng"]
        self.rng.setstate((rng[0], tuple(rng[1]), rng[2]))
