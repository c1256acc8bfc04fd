"""Learner: decodes a round's rollouts, re-checks their policy versions, runs one update of the
configured algorithm (PPO or HMASD, see :mod:`rl_system.algos`).

The learner is a Ray actor; its policy version starts at 0 and increments with every update.
It receives rollouts as LZ4 payloads (``bytes``) straight from the object store. In a learner
group (:mod:`rl_system.actors.learner_group`) each learner receives its share of the round and joins a
``torch.distributed`` group first (:meth:`Learner.join_group`); all hold the same weights, and
rank 0 alone returns them and checkpoints.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import ray
import torch

from rl_system import collective
from rl_system.actors.weights import PolicyWeights
from rl_system.algos import get_algorithm
from rl_system.algos.precision import update_autocast
from rl_system.checkpoint import capture_rng_state, keys, restore_rng_state
from rl_system.checkpoint.writer import to_transport
from rl_system.config import RunConfig
from rl_system.device import resolve_device, resolve_precision, resolve_threads
from rl_system.envs.base import ActionSpec, TensorSpec
from rl_system.heap import configure_malloc
from rl_system.observe.metrics import (
    BF16,
    CHECKPOINT_BLOCKED_S,
    CPU_S,
    DECODE_S,
    LEARNER_DROPPED,
    LEARNER_ENV_STEPS,
    SKIPPED_UPDATES_TOTAL,
    UPDATE_S,
)
from rl_system.rollout import codec
from rl_system.rollout import contract as rollout
from rl_system.rollout.gate import PolicyVersionGate


class StaleRolloutError(RuntimeError):
    """Raised when every rollout handed to ``update`` fails the version gate."""


@dataclass
class UpdateResult:
    """What one :meth:`Learner.update` reports; over a learner group,
    :func:`rl_system.actors.learner_group.merged_metrics` makes one of them."""

    version: int
    """The new policy version."""
    train: dict[str, float]
    """The trainer's metrics (losses, entropy, KL, ...), logged under ``train/``."""
    system: dict[str, float]
    """The learner's own figures, logged under ``system/`` (named in :mod:`rl_system.observe.metrics`):
    decode and update seconds, env steps trained on, rollouts it dropped, skipped minibatch steps
    so far, checkpoint wait, CPU seconds, bf16."""


class Learner:
    def __init__(self, cfg: dict[str, Any] | RunConfig, obs_spec: dict[str, TensorSpec],
                 action_spec: ActionSpec):
        # The driver hands over the validated model; a plain dict (a config from elsewhere) is validated here.
        self.cfg = cfg if isinstance(cfg, RunConfig) else RunConfig.model_validate(cfg)
        torch.set_num_threads(resolve_threads(self.cfg.learner.torch_threads, self.cfg.learner.num_cpus))
        configure_malloc(self.cfg.malloc)
        self.device = resolve_device(self.cfg.learner.device)
        self.precision = resolve_precision(self.cfg.learner.precision, self.device)
        self.specs = (obs_spec, action_spec)
        self.group: collective.Collective = collective.SOLO  # join_group: a learner group's
        self._build(self.cfg.seed)
        self.gate = PolicyVersionGate(self.cfg.max_policy_lag)
        self.version = 0
        self.env_steps = 0  # env steps trained on
        self._snapshot: threading.Thread | None = None
        self._save_ref: ray.ObjectRef | None = None
        self._snapshot_error: str | None = None
        self.ckpt_blocked_s = 0.0  # time the learner waited on checkpointing, last save
        self.rank = 0  # in a learner group (join_group); rank 0 returns the weights

    def _build(self, seed: int) -> None:
        """Freshly initialised policy and algorithm state (optimisers, normalisers) from ``seed``."""
        torch.manual_seed(seed)
        algo = get_algorithm(self.cfg.algo)
        self.policy = algo.make_policy(*self.specs, self.cfg).to(self.device)
        self.algo = algo.make_trainer(self.policy, self.cfg, self.group)

    def reseed(self, seed: int) -> tuple[int, dict[str, torch.Tensor]]:
        """Start learning over from ``seed`` (reseed on stall, ``ReseedConfig``); returns
        ``(version, weights)``. The version still goes up, so the fresh weights are newer than any
        copy a worker holds, and the env-step count (the budget) carries on."""
        self._join_snapshot()
        skipped = self.algo.skipped_updates  # a run-wide count, like the version
        self._build(seed)
        self.algo.skipped_updates = skipped
        self.version += 1
        return self.version, self.get_weights()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    # -- learner group -------------------------------------------------------------------------
    @staticmethod
    def rendezvous_address() -> str:
        """``tcp://<this node's IP>:<a free port>``: where rank 0 lets the group meet."""
        ip = ray.util.get_node_ip_address()
        with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET) as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        host = f"[{ip}]" if ":" in ip else ip
        return f"tcp://{host}:{port}"

    def join_group(self, rank: int, world: int, address: str, backend: str, timeout_s: float) -> int:
        """Join the learner group as ``rank`` of ``world`` (blocks until every rank has joined).
        Every rank starts from the same seed, so the weights already agree; the trainer is built
        anew around the group (it has not trained yet)."""
        self.group = collective.ProcessGroup(rank, world, address, backend, timeout_s)
        self.algo = get_algorithm(self.cfg.algo).make_trainer(self.policy, self.cfg, self.group)
        self.rank = rank
        return rank

    def get_weights(self) -> PolicyWeights:
        return PolicyWeights({k: v.detach().cpu() for k, v in self.policy.state_dict().items()})

    def update(self, *payloads: bytes) -> tuple[UpdateResult, PolicyWeights | None]:
        """Train on the given rollouts (payload bytes); returns ``(result, new_weights)`` (the
        weights from rank 0 only, None from the others)."""
        self._join_snapshot()
        t0, c0 = time.perf_counter(), time.process_time()
        rollouts, dropped = [], 0
        for payload in payloads:
            cols, header = codec.decode(payload)
            # The driver already gated on the meta it received; this re-check reads the version
            # from the checksummed payload header itself, so nothing stale can slip through.
            if self.gate.check(rollout.header_version(header), self.version):
                rollouts.append(cols)
            else:
                dropped += 1
        # The round's env steps over the group (the budget and LR annealing are global), decided
        # together: a learner left with nothing must not leave its peers in a collective.
        steps_per_rank = self.group.all_gather_ints(sum(rollout.env_steps_of(cols) for cols in rollouts))
        if min(steps_per_rank) == 0:
            raise StaleRolloutError(f"all {len(payloads)} rollouts of a learner's share are outside the "
                                    f"allowed policy lag")
        t_decode = time.perf_counter() - t0
        batch = {k: v.to(self.device, non_blocking=True) for k, v in rollout.concat(rollouts).items()}
        steps = sum(steps_per_rank)
        progress = self.env_steps / self.cfg.max_env_steps
        self.policy.train()
        with update_autocast(self.device.type, enabled=self.precision == "bf16"):
            train = self.algo.update(batch, progress)
        self.env_steps += steps
        self.version += 1
        system = {LEARNER_ENV_STEPS: self.env_steps, LEARNER_DROPPED: dropped, DECODE_S: t_decode,
                  UPDATE_S: time.perf_counter() - t0 - t_decode, SKIPPED_UPDATES_TOTAL: self.algo.skipped_updates,
                  CHECKPOINT_BLOCKED_S: self.ckpt_blocked_s, CPU_S: time.process_time() - c0,
                  BF16: float(self.precision == "bf16")}
        weights = self.get_weights() if self.rank == 0 else None  # identical on every rank
        return UpdateResult(self.version, train, system), weights

    # -- checkpointing -------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to continue training exactly: weights (incl. normaliser buffers),
        optimiser moments, counters and RNG state. The tensors are the live ones: the caller
        must be done with them before the next update."""
        return {
            keys.MODEL: self.policy.state_dict(),
            keys.OPTIMIZER: self.algo.state_dict(),
            keys.VERSION: self.version,
            keys.ENV_STEPS: self.env_steps,
            keys.SKIPPED_UPDATES: self.algo.skipped_updates,
            keys.LR_SCALE: self.algo.lr_scale,
            keys.RNG: capture_rng_state(),
        }

    def load_state(self, state: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Restore :meth:`state`; returns the weights for the workers."""
        self._join_snapshot()
        self.policy.load_state_dict(state[keys.MODEL])
        self.algo.load_state_dict(state[keys.OPTIMIZER])
        self.version = int(state[keys.VERSION])
        self.env_steps = int(state[keys.ENV_STEPS])
        self.algo.skipped_updates = int(state[keys.SKIPPED_UPDATES])
        self.algo.lr_scale = float(state.get(keys.LR_SCALE, 1.0))  # checkpoints from before rollbacks: 1
        restore_rng_state(state[keys.RNG])
        return self.get_weights()

    def restore(self, state: dict[str, Any] | None, min_version: int) -> dict[str, torch.Tensor]:
        """A rebuilt learner taking over a run: :meth:`load_state` of a checkpoint's learner
        section (or nothing: fresh weights), then a version of at least ``min_version``, so the
        weights are newer than any copy a worker holds. Returns the weights."""
        if state is not None:
            self.load_state(state)
        self.version = max(self.version, min_version)
        return self.get_weights()

    def roll_back(self, state: dict[str, Any], min_version: int, lr_scale: float) -> dict[str, torch.Tensor]:
        """Go back to a checkpoint's learner section (:meth:`restore`) and train on with the
        learning rate scaled by ``lr_scale`` (a rollback on collapse, :mod:`rl_system.run.rollback`).
        Returns the weights."""
        weights = self.restore(state, min_version)
        self.algo.lr_scale = lr_scale  # after restore, which loads the checkpoint's own scale
        return weights

    def get_version(self) -> int:
        return self.version

    def save_checkpoint(self, checkpointer: Any, extra: dict[str, Any], manifest: dict[str, Any]) -> None:
        """Hand a snapshot to the checkpointer actor and return at once.

        The copy, ``ray.put`` and hand-off run on a thread while the workers sample the next
        round; the next :meth:`update` waits for that thread only if it is still running, so
        the weights are never mutated mid-copy and the learner never waits on disk.
        """
        t0 = time.perf_counter()
        self._join_snapshot()

        def snapshot() -> None:
            try:
                # No copy here: ray.put copies into the object store, and the next update
                # waits for this thread before it touches the weights.
                ref = ray.put(to_transport({keys.LEARNER: self.state(), **extra}))
                self._save_ref = checkpointer.save.remote(
                    [ref], {"policy_version": self.version, "env_steps": self.env_steps, **manifest})
            except Exception as err:  # noqa: BLE001 - reported through metrics, training goes on
                self._snapshot_error = f"{type(err).__name__}: {err}"

        self._snapshot = threading.Thread(target=snapshot, name="checkpoint-snapshot", daemon=True)
        self._snapshot.start()
        self.ckpt_blocked_s = time.perf_counter() - t0

    def _join_snapshot(self) -> None:
        if self._snapshot is not None:
            t0 = time.perf_counter()
            self._snapshot.join()
            self._snapshot = None
            self.ckpt_blocked_s += time.perf_counter() - t0

    def flush_snapshot(self) -> str | None:
        """Wait until the last snapshot is queued on the checkpointer; returns its error line, if any."""
        self._join_snapshot()
        if self._save_ref is not None:
            # Calls from two callers to a threaded actor are unordered: make sure our save is
            # queued before the driver's flush is allowed to run.
            try:
                ray.get(self._save_ref)
            except Exception as err:  # noqa: BLE001
                self._snapshot_error = f"{type(err).__name__}: {err}"
            self._save_ref = None
        err, self._snapshot_error = self._snapshot_error, None
        return err
