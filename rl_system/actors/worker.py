"""Rollout worker: an env batch, a policy copy and a preallocated buffer in one Ray actor.

``sample(weights, version)`` loads the weights only when ``version`` is newer than the copy it
holds, steps all N envs T times, and returns ``(meta, payload)``: a small
:class:`~rl_system.rollout.contract.RolloutMeta` the driver gates on and the rollout's columns encoded by
:mod:`rl_system.rollout.codec` (columnar, LZ4, checksummed).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from rl_system.algos import get_algorithm
from rl_system.algos.selfplay import SnapshotOpponent
from rl_system.config import RunConfig
from rl_system.device import resolve_device, resolve_threads
from rl_system.envs import make_env
from rl_system.heap import configure_malloc
from rl_system.rollout import codec
from rl_system.rollout.contract import RolloutMeta
from rl_system.rollout.staging import HostStaging


class RolloutWorker:
    def __init__(self, worker_id: int, cfg: dict[str, Any] | RunConfig):
        # The driver hands over the validated model; a plain dict (a config from elsewhere) is validated here.
        self.cfg = cfg if isinstance(cfg, RunConfig) else RunConfig.model_validate(cfg)
        wc = self.cfg.workers
        torch.set_num_threads(resolve_threads(wc.torch_threads, wc.num_cpus))
        configure_malloc(self.cfg.malloc)
        self.worker_id = worker_id
        self.device = resolve_device(wc.device)
        # "auto" means: compress only across nodes; the driver calls set_learner_node once the
        # learner is placed. Until then (and when used in-process) nothing is compressed.
        self.compression = "none" if self.cfg.compression == "auto" else self.cfg.compression
        self.samples = 0  # since this process started: 0 after a restart by Ray
        self.staging = HostStaging()  # a CUDA rollout goes to host in one synchronised batch of copies
        self._build(self.cfg.seed)

    def _build(self, run_seed: int) -> None:
        """Env batch, policy copy and sampler, seeded from ``run_seed`` and this worker's index."""
        seed = run_seed * 10_007 + self.worker_id
        torch.manual_seed(seed)
        wc = self.cfg.workers
        self.env = make_env(self.cfg.env.name, wc.num_envs, self.device, seed=seed, **self.cfg.env.kwargs)
        algo = get_algorithm(self.cfg.algo)
        self.policy = algo.make_policy(self.env.observation_spec, self.env.action_spec, self.cfg).to(self.device)
        self.policy.eval()
        self.sampler = algo.make_sampler(self.env, self.policy, self.cfg, self.device)
        self.version = -1
        self.opponent: SnapshotOpponent | None = None  # self-play: built on first use
        self.opponent_version = -1  # -1: the env's own (scripted) opponent
        self.sampler.reset(seed)

    def reseed(self, run_seed: int) -> None:
        """Start over from scratch with ``run_seed`` (reseed on stall, ``ReseedConfig``): fresh
        envs (episode counters too), policy copy and sampler state. Process-level counters stay,
        so the driver does not mistake this for a process restart by Ray."""
        self.env.close()  # e.g. a Gymnasium async vector env's subprocesses
        self._build(run_seed)

    def set_weights(self, weights: dict[str, torch.Tensor], version: int) -> None:
        if version > self.version:
            self.policy.load_state_dict(weights)
            self.version = version

    def set_opponent(self, weights: dict[str, torch.Tensor] | None, version: int) -> None:
        """Self-play: drive the env's opponent side with a frozen snapshot of policy ``version``
        (``weights``), or with the env's scripted opponent when ``version < 0``."""
        self.opponent_version = version
        if version < 0:
            self.env.set_opponent(None)
            return
        if self.opponent is None:
            algo = get_algorithm(self.cfg.algo)
            net = algo.make_policy(self.env.observation_spec, self.env.action_spec, self.cfg).to(self.device)
            self.opponent = SnapshotOpponent(net)
        self.opponent.load(weights, version)
        self.env.set_opponent(self.opponent)

    def sample(self, weights: dict[str, torch.Tensor], version: int) -> tuple[RolloutMeta, bytes]:
        """Collect one rollout with policy ``version``; returns ``(meta, payload)`` (see
        :mod:`rl_system.rollout.contract`)."""
        t0, c0 = time.perf_counter(), time.process_time()
        self.set_weights(weights, version)
        try:
            columns, episodes = self.sampler.collect()
        except Exception:
            # Leave the worker usable for the re-request: start every env afresh.
            self.sampler.reset()
            raise
        sample_s = time.perf_counter() - t0
        meta = RolloutMeta.of(episodes, self.cfg.return_window, version=self.version, worker_id=self.worker_id,
                              env_steps=self.cfg.workers.rollout_len * self.env.num_envs, sample_s=sample_s,
                              fresh_process=self.samples == 0, opponent_version=self.opponent_version)
        self.samples += 1
        columns = self.staging.to_host(columns)
        payload = codec.encode(columns, meta.header(), compression=self.compression,
                               level=self.cfg.compression_level, filters=self.cfg.codec_filters)
        meta.raw_bytes = sum(t.numel() * t.element_size() for t in columns.values())
        meta.encode_s = time.perf_counter() - t0 - sample_s
        meta.payload_bytes = len(payload)
        meta.cpu_s = time.process_time() - c0
        return meta, payload

    def set_learner_node(self, learner_node_id: str) -> dict[str, str]:
        """Resolve ``compression: auto`` against where the learner runs; returns the choice and
        this worker's node."""
        import ray

        here = ray.get_runtime_context().get_node_id()
        if self.cfg.compression == "auto":
            self.compression = "lz4" if here != learner_node_id else "none"
        return {"compression": self.compression, "node_id": here}

    def get_state(self) -> dict[str, Any] | None:
        """What a bit-exact resume needs of this worker (env, RNG, current obs, episode
        counters), or None when the env cannot capture its state."""
        try:
            env_state = self.env.state_dict()
        except NotImplementedError:
            return None
        return {"env": env_state, "torch_rng": torch.get_rng_state(), **self.sampler.state_dict()}

    @torch.inference_mode()  # the env's tensors may be inference tensors (the sampler's mode)
    def set_state(self, state: dict[str, Any]) -> None:
        self.env.load_state_dict(state["env"])
        torch.set_rng_state(state["torch_rng"])
        self.sampler.load_state_dict(state)

    def ping(self) -> int:
        return self.worker_id

    def specs(self):
        """``(observation_spec, action_spec)`` of this worker's env, for building the learner."""
        return self.env.observation_spec, self.env.action_spec
