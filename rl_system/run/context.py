"""The state one run changes as it goes, declared in one place: :class:`RunContext`.

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
from rl_system.run.reporting import RunStats
from rl_system.run.storage import RunStorage


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
