"""The state one run changes as it goes, declared in one place: :class:`RunContext`, and the
counters among it, :class:`RunStats`.

The run loop (:mod:`.loop`), its collector (:mod:`.collect`), the reseed and rollback guards
(:mod:`.reseed`, :mod:`.rollback`), checkpoint resume and learner rebuild (:mod:`.state`) and the
reports (:mod:`.reporting`, round reporters such as a Tune trial) all read and change the same
books: the policy version and its weights, the actors, the counters, the return window. They do it
here, through the attributes and methods below, and never through each other's internals.

The policy version and the object-store ref of its weights always move together, through
:meth:`RunContext.publish_policy`: a worker handed ``(weights_ref, version)`` must sample exactly
those weights, and a rollout tagged ``version`` must come from them, or the gate's guarantee is void.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from rl_system.actors.learner_group import LearnerGroup
from rl_system.actors.placement import ActorScope
from rl_system.algos.selfplay import SnapshotPool
from rl_system.config import RunConfig
from rl_system.observe.metrics import ReturnWindow, RunLogger
from rl_system.observe.telemetry import Telemetry
from rl_system.rollout.gate import PolicyVersionGate
from rl_system.run.phases import PhaseClock
from rl_system.run.storage import RunStorage


@dataclass
class RunStats:
    """The run's counters; what a checkpoint's ``driver`` section keeps so a resume continues them."""

    rounds: int = 0
    env_steps: int = 0
    worker_failures: int = 0
    worker_restarts: int = 0  # Ray actor restarts of rollout workers
    learner_restarts: int = 0  # learners rebuilt from a checkpoint inside the run
    nonfinite_rounds: int = 0  # consecutive rounds with skipped (non-finite) minibatches
    elapsed_before_resume: float = 0.0
    bytes_shipped: int = 0
    bytes_raw: int = 0
    best_return: float = float("-inf")
    attempt_best_return: float = float("-inf")  # since the last reseed on stall (ReseedConfig)
    reseeds: list[dict[str, Any]] = field(default_factory=list)
    rollbacks: list[dict[str, Any]] = field(default_factory=list)  # rollbacks on collapse (RollbackConfig)
    rollback_refused_at: int | None = None  # checkpoints saved when the last rollback found none to use
    time_to_target_s: float | None = None
    steps_to_target: int | None = None
    # Seconds spent per phase, summed over rounds: where the wall time goes.
    time_sample: float = 0.0
    time_update: float = 0.0
    time_round: float = 0.0
    # CPU seconds of the work itself (workers' sample + encode, the learner's decode + update):
    # on a shared machine the steadier measure of what a run costs.
    cpu_workers: float = 0.0
    cpu_learner: float = 0.0
    # Rollouts trained on, per worker index (since this process started the run): equal under
    # `workers.wait_for: all`; with `any`, a straggler shows as a low count.
    rollouts_by_worker: dict[int, int] = field(default_factory=dict)


class RunContext:
    """One run's mutable state.

    Set at construction: ``cfg``, ``specs`` (the probed observation/action specs), ``run_dir``,
    ``log``, ``clock``, and the books: ``stats`` (:class:`RunStats`), ``window`` (the return window),
    ``gate`` (policy-version gating and its dropped count), ``pool`` (self-play snapshots).
    Set when the actors start: ``scope``, ``workers``, ``learner`` (again when a dead one is
    rebuilt), ``storage``, ``telemetry``;
    ``placement`` and ``learner_nodes`` by :meth:`place_learner`.
    """

    def __init__(self, cfg: RunConfig, specs: tuple[Any, Any], run_dir: Path, log: RunLogger, clock: PhaseClock):
        self.cfg, self.specs, self.run_dir, self.log, self.clock = cfg, specs, run_dir, log, clock
        self.stats = RunStats()
        self.window = ReturnWindow(cfg.return_window)
        self.gate = PolicyVersionGate(cfg.max_policy_lag)
        self.pool = SnapshotPool(cfg.selfplay, cfg.seed)
        self.scope = ActorScope()
        self.workers: list[Any] = []
        self.learner: LearnerGroup | None = None
        self.storage: RunStorage | None = None
        self.telemetry: Telemetry | None = None
        self.learner_nodes: list[str] = []  # per learner rank
        self.placement: list[dict[str, str]] | None = None  # per worker: node, compression
        self.last_train_metrics: dict[str, float] = {}  # the trainer's metrics of the last round
        self._version = 0
        self._weights_ref: ray.ObjectRef | None = None

    # -- the policy ---------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The policy version workers sample with next."""
        return self._version

    @property
    def weights_ref(self) -> ray.ObjectRef | None:
        """The object-store ref of version :attr:`version`'s weights (one object per version,
        shared by every worker)."""
        return self._weights_ref

    def publish_policy(self, version: int, weights_ref: ray.ObjectRef) -> None:
        """From now on workers sample ``weights_ref`` as policy version ``version``."""
        self._version, self._weights_ref = int(version), weights_ref

    # -- the learner --------------------------------------------------------------------------
    @property
    def learner_node(self) -> str | None:
        """Rank 0's node (the single learner's)."""
        return self.learner_nodes[0] if self.learner_nodes else None

    def learner_node_of(self, w: int) -> str:
        """The node of the learner that trains on worker ``w``'s rollouts."""
        return self.learner_nodes[self.learner.rank_of(w)]

    def place_learner(self) -> None:
        """Tell every worker where its learner runs (that decides ``compression: auto``)."""
        self.learner_nodes = self.learner.nodes
        self.placement = ray.get([w.set_learner_node.remote(self.learner_node_of(i))
                                  for i, w in enumerate(self.workers)])

    # -- the books ----------------------------------------------------------------------------
    def restart_window(self, returns: list[float] = (), lengths: list[int] = (), episodes: int = 0,
                       outcomes: dict[str, list[bool]] | None = None) -> None:
        """A fresh return window holding what a checkpoint recorded (nothing: an empty one)."""
        self.window = ReturnWindow(self.cfg.return_window)
        self.window.extend(list(returns), list(lengths), episodes, outcomes)

    def restart_pool(self, seed: int) -> None:
        """A new, empty self-play pool (a reseed: the old snapshots are the stalled attempt's)."""
        self.pool = SnapshotPool(self.cfg.selfplay, seed)
