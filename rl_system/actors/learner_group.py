"""The learner group, seen from the driver: ``learner.num_learners`` learner actors that train as
one (data parallel).

* **Placement.** One learner is a plain actor (today's single learner). N learners are placed
  together in a placement group of N bundles, ``pack``ed or ``spread`` by ``learner.placement``.
* **Rendezvous through Ray.** Rank 0 names a free port on its node; every rank joins one
  ``torch.distributed`` group there (NCCL for learners with a whole GPU each, else gloo).
* **Data.** Each round's rollouts (in worker order) are split into N contiguous shares; each
  learner gets its share as object refs straight from the workers, so the driver never opens
  rollout bytes and no learner fetches another's share. Worker ``w`` always feeds the same
  learner (:meth:`LearnerGroup.rank_of`), so ``compression: auto`` is decided against that
  learner's node.
* **Weights and checkpoints.** All learners hold the same weights, optimiser state and RNG state
  after every update (:mod:`rl_system.collective`), so rank 0 alone returns the weights and
  snapshots to the checkpointer, and any checkpoint resumes on any number of learners.
* **Failures.** A learner that dies takes the group with it: :meth:`LearnerGroup.wait` raises
  the death (not the peers' broken collectives), and the run loop rebuilds the whole group from
  the newest checkpoint (:func:`rl_system.run.state.rebuild_learner`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rl_system.actors.learner import Learner, UpdateResult
from rl_system.actors.placement import ActorScope
from rl_system.config import RunConfig
from rl_system.observe.metrics import CHECKPOINT_BLOCKED_S, CPU_S, DECODE_S, LEARNER_DROPPED, UPDATE_S

# How long to wait for the other learners' outcome once one has failed: a death and its peers'
# broken collectives arrive close together, and the death is the cause worth reporting.
_SETTLE_S = 30.0


def backend_of(cfg: RunConfig) -> str:
    """The ``torch.distributed`` backend of the group: as configured, or NCCL for learners with a
    whole GPU each (learners with GPU shares may share a device, which NCCL refuses: gloo)."""
    lc = cfg.learner
    if lc.backend != "auto":
        return lc.backend
    return "nccl" if lc.num_gpus >= 1 and lc.device != "cpu" else "gloo"


def shares(n_items: int, n_learners: int) -> list[range]:
    """Contiguous, near-equal shares of ``n_items`` rollouts, one per learner (the first ones
    one larger where it does not divide)."""
    base, extra = divmod(n_items, n_learners)
    out, start = [], 0
    for r in range(n_learners):
        size = base + (r < extra)
        out.append(range(start, start + size))
        start += size
    return out


class LearnerGroup:
    """``cfg.learner.num_learners`` learner actors named ``<name>`` (one) or ``<name>-<rank>``."""

    def __init__(self, cfg: RunConfig, specs: tuple[Any, Any], name: str = "learner", scope: ActorScope | None = None):
        """``scope``: where the run's actors go (:class:`ActorScope`); inside a reserved placement
        group the learners take its learner bundles instead of a group of their own."""
        self.cfg, lc = cfg, cfg.learner
        scope = scope or ActorScope()
        self.size = lc.num_learners
        self.pg: PlacementGroup | None = None
        options: dict[str, Any] = {"num_cpus": lc.num_cpus, "num_gpus": lc.num_gpus, "resources": lc.resources,
                                   # Ray does not restart a learner (max_restarts=0): the run loop
                                   # rebuilds the group from the newest checkpoint, which a plain
                                   # actor restart could not do.
                                   "max_restarts": 0}
        bundle = {k: v for k, v in {"CPU": lc.num_cpus, "GPU": lc.num_gpus, **lc.resources}.items() if v > 0}
        if scope.pg is not None:
            pass  # the enclosing reservation already holds a bundle per learner
        elif self.size > 1 and bundle:
            self.pg = placement_group([bundle] * self.size, strategy="PACK" if lc.placement == "pack" else "SPREAD",
                                      name=f"{name}-group")
        elif self.size > 1 and lc.placement == "spread":  # learners that request nothing: no bundles
            options["scheduling_strategy"] = "SPREAD"
        self.names = [name] if self.size == 1 else [f"{name}-{r}" for r in range(self.size)]
        cls = ray.remote(Learner)
        self.actors = []
        for rank, actor_name in enumerate(self.names):
            opts = dict(options, **scope.named(actor_name))
            if scope.pg is not None:
                opts.update(scope.learner(rank))
            elif self.pg is not None:
                opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=rank)
            self.actors.append(cls.options(**opts).remote(cfg, *specs))  # the validated model itself
        self.nodes: list[str] = []

    @property
    def lead(self) -> Any:
        """Rank 0: the learner that returns the weights and checkpoints."""
        return self.actors[0]

    def start_refs(self) -> dict[ray.ObjectRef, str]:
        """One ref per learner that resolves once it is up (for the start-up wait)."""
        return {a.node_id.remote(): n for a, n in zip(self.actors, self.names)}

    def form(self) -> list[str]:
        """Join the learners into one ``torch.distributed`` group (after :meth:`start_refs`
        resolved); returns each learner's node id."""
        self.nodes = ray.get([a.node_id.remote() for a in self.actors])
        if self.size > 1:
            address = ray.get(self.lead.rendezvous_address.remote())
            lc = self.cfg.learner
            self.wait([a.join_group.remote(r, self.size, address, backend_of(self.cfg), lc.collective_timeout_s)
                       for r, a in enumerate(self.actors)])
        return self.nodes

    def rank_of(self, worker: int) -> int:
        """The learner that trains on worker ``worker``'s rollouts."""
        for rank, share in enumerate(shares(self.cfg.workers.num_workers, self.size)):
            if worker in share:
                return rank
        raise IndexError(worker)

    # -- calls on every learner ----------------------------------------------------------------
    def update(self, payload_refs: list[ray.ObjectRef]) -> tuple[list[ray.ObjectRef], ray.ObjectRef]:
        """Start one update; ``payload_refs`` in worker order. Returns every learner's
        :class:`UpdateResult` ref (rank order; resolve them with :meth:`wait`) and rank 0's weights ref."""
        calls = [a.update.options(num_returns=2).remote(*(payload_refs[i] for i in share))
                 for a, share in zip(self.actors, shares(len(payload_refs), self.size))]
        return [m for m, _ in calls], calls[0][1]

    def on_all(self, method: str, *args: Any) -> list[ray.ObjectRef]:
        """Call ``method(*args)`` on every learner (a large argument is put once and shared)."""
        args = tuple(ray.put(a) if isinstance(a, dict) else a for a in args)
        return [getattr(a, method).remote(*args) for a in self.actors]

    def wait(self, refs: list[ray.ObjectRef]) -> list[Any]:
        """Every ref's value. A learner that died raises its :class:`RayActorError` even where a
        peer's error (its collective broken by the death) arrived first."""
        pending, failure = list(refs), None
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=None if failure is None else _SETTLE_S)
            if not ready:
                break
            try:
                ray.get(ready[0])
            except RayActorError:
                raise
            except RayTaskError as err:
                failure = failure or err
        if failure is not None:
            raise failure
        return ray.get(refs)

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        if self.pg is not None:
            remove_placement_group(self.pg)
        self.actors, self.pg = [], None


def merged_metrics(per_rank: list[UpdateResult]) -> UpdateResult:
    """One update's result: rank 0's (its train metrics are already global), with the system
    figures made group-wide (dropped rollouts and CPU seconds summed, times the slowest)."""
    first = per_rank[0]
    if len(per_rank) == 1:
        return first
    system = dict(first.system)
    for key in (LEARNER_DROPPED, CPU_S):
        system[key] = sum(r.system.get(key, 0) for r in per_rank)
    for key in (DECODE_S, UPDATE_S, CHECKPOINT_BLOCKED_S):
        system[key] = max(r.system.get(key, 0.0) for r in per_rank)
    return replace(first, system=system)
