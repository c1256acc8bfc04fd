"""Will the run's actors fit, and are they up? Checked before the first round so that a run
never waits in silence.

* :func:`check_placement`, before any actor is created: what the workers and the learner request
  (``workers.num_cpus`` / ``num_gpus`` / ``resources`` each, ``learner.*`` likewise; the
  checkpointer, archiver and status actor request nothing) against what the cluster has now and,
  on an autoscaling cluster, the most its node types let it grow to. A run that can never fit is
  one :class:`PlacementError` line naming the resource and the amounts (exit 2).
* :func:`wait_for_actors`: the start-up wait. It says every few seconds which actors are still
  pending and why, gives up after ``startup_timeout_s`` with one line, and turns an actor that
  failed in its constructor (an env error, out of memory, an import error on a node) into one
  :class:`ActorStartError` line naming the actor, its node and the root cause; the full text
  goes to the run's log file only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup, get_current_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rl_system.config import ConfigError, RunConfig
from rl_system.errors import one_line

Resources = dict[str, float]
_EPS = 1e-6


class PlacementError(ConfigError):
    """The run's actors can never be placed on this cluster (one line)."""


class StartupError(RuntimeError):
    """The actors did not come up; the message is one line, ``detail`` the full text."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class ActorStartError(StartupError):
    """An actor failed while starting (its constructor raised, or its process died)."""


def actor_requests(cfg: RunConfig) -> list[tuple[str, Resources]]:
    """``(actor name, resources)`` for every actor that requests resources."""
    wc, lc = cfg.workers, cfg.learner
    worker = {"CPU": wc.num_cpus, "GPU": wc.num_gpus, **wc.resources}
    learner = {"CPU": lc.num_cpus, "GPU": lc.num_gpus, **lc.resources}
    learners = [("learner", learner)] if lc.num_learners == 1 else [
        (f"learner-{r}", learner) for r in range(lc.num_learners)]
    out = [(f"rollout-worker-{i}", worker) for i in range(wc.num_workers)] + learners
    return [(name, {k: v for k, v in req.items() if v > 0}) for name, req in out]


def _bundle(num_cpus: float, num_gpus: float, resources: Resources) -> Resources:
    return {k: v for k, v in {"CPU": num_cpus, "GPU": num_gpus, **resources}.items() if v > 0}


def run_bundles(cfg: RunConfig, head_cpus: float) -> list[Resources]:
    """The placement-group bundles that hold one whole run (a Tune trial's reservation): the run
    loop itself (``head_cpus``), then one bundle per worker and one per learner, in the order
    :class:`ActorScope` reads them. A role whose actors request nothing gets no bundles."""
    wc, lc = cfg.workers, cfg.learner
    worker, learner = _bundle(wc.num_cpus, wc.num_gpus, wc.resources), _bundle(lc.num_cpus, lc.num_gpus, lc.resources)
    return ([{"CPU": head_cpus}] + [worker] * (wc.num_workers if worker else 0)
            + [learner] * (lc.num_learners if learner else 0))


@dataclass
class ActorScope:
    """Where a run's actors are created and under which names.

    A plain run (``pg`` None) names its actors in the job's namespace and lets Ray place them
    (workers spread). A run that lives inside a placement group reserved by :func:`run_bundles`
    (a Tune trial) puts every worker and learner in its own bundle of that group and every named
    actor in the run's own ``namespace``, so the trials of one sweep, all in one Ray job, can each
    have a ``learner``."""

    pg: PlacementGroup | None = None
    namespace: str | None = None
    num_workers: int = 0
    worker_bundles: bool = False
    learner_bundles: bool = False

    @classmethod
    def current(cls, cfg: RunConfig, namespace: str | None = None) -> ActorScope:
        """The scope of a run started here: inside the caller's placement group when the caller
        runs in one that captures its children (a Tune trial), else a plain run."""
        pg = get_current_placement_group()
        if pg is None:
            return cls(namespace=namespace)
        wc, lc = cfg.workers, cfg.learner
        expected = len(run_bundles(cfg, 1.0))
        if len(pg.bundle_specs) != expected:
            raise PlacementError(f"the run's placement group has {len(pg.bundle_specs)} bundles, its config needs "
                                 f"{expected} (placement.run_bundles): reserve the run with the config it runs")
        return cls(pg, namespace, wc.num_workers, bool(_bundle(wc.num_cpus, wc.num_gpus, wc.resources)),
                   bool(_bundle(lc.num_cpus, lc.num_gpus, lc.resources)))

    def named(self, name: str) -> dict[str, Any]:
        """Options that name an actor in this scope."""
        return {"name": name, "namespace": self.namespace} if self.namespace else {"name": name}

    def _in_bundle(self, index: int) -> dict[str, Any]:
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
            self.pg, placement_group_bundle_index=index, placement_group_capture_child_tasks=False)}

    def worker(self, i: int) -> dict[str, Any]:
        """Placement options of worker ``i`` (empty: the caller's own choice)."""
        return self._in_bundle(1 + i) if self.pg is not None and self.worker_bundles else {}

    def learner(self, rank: int) -> dict[str, Any] | None:
        """Placement options of learner ``rank``; None outside a reserved group (the learner
        group then places itself)."""
        if self.pg is None:
            return None
        if not self.learner_bundles:  # learners that request nothing: anywhere, not captured
            return {"scheduling_strategy": "DEFAULT"}
        return self._in_bundle(1 + (self.num_workers if self.worker_bundles else 0) + rank)


def _autoscaler_shapes() -> tuple[Resources, list[Resources]] | None:
    """``(most of each resource the cluster may grow to, resources of each node type)`` from the
    autoscaler's config, or None where the cluster does not autoscale."""
    try:
        from ray._private.state import state

        config = state.get_cluster_config()
        limits = state.get_max_resources_from_cluster_config()
    except Exception:  # noqa: BLE001 - a private API: no answer means "no autoscaler known"
        return None
    if config is None or not limits:
        return None
    shapes = [dict(group.resources) for group in config.node_group_configs]
    return {k: float(v) for k, v in limits.items()}, shapes


def _fits(request: Resources, node: Resources) -> bool:
    return all(node.get(k, 0.0) + _EPS >= v for k, v in request.items())


def _amount(x: float) -> str:
    return f"{x:g}"


def check_placement(cfg: RunConfig, nodes: list[Resources] | None = None) -> bool:
    """Raise :class:`PlacementError` if the actors can never be placed; return True when they
    fit only once an autoscaling cluster has grown (the start-up wait then says so).

    ``nodes``: the resources of each node of a cluster that is not running yet (the embedded Ray
    a local run is about to start, which does not autoscale); default: the running cluster's."""
    requests = actor_requests(cfg)
    planned = nodes is not None
    if nodes is None:
        nodes = [{k: float(v) for k, v in n["Resources"].items()} for n in ray.nodes() if n.get("Alive")]
    totals: Resources = {}
    for node in nodes:
        for k, v in node.items():
            totals[k] = totals.get(k, 0.0) + v
    grown = None if planned else _autoscaler_shapes()
    limits, shapes = grown if grown else ({}, [])
    need: Resources = {}
    for _, req in requests:
        for k, v in req.items():
            need[k] = need.get(k, 0.0) + v
    for key, amount in sorted(need.items()):
        ceiling = max(totals.get(key, 0.0), limits.get(key, 0.0))
        if amount > ceiling + _EPS:
            raise PlacementError(_shortfall(cfg, key, amount, totals.get(key, 0.0), limits.get(key) if grown else None))
    for name, req in requests:
        if not any(_fits(req, shape) for shape in nodes + shapes):
            biggest = ", ".join(f"{k} {_amount(max((s.get(k, 0.0) for s in nodes + shapes), default=0))}"
                                for k in sorted(req))
            raise PlacementError(f"{name} needs {_describe(req)} on one node, but no node offers that "
                                 f"(the most any node has: {biggest})")
    return any(amount > totals.get(key, 0.0) + _EPS for key, amount in need.items())


def _describe(req: Resources) -> str:
    return ", ".join(f"{_amount(v)} {k}" for k, v in sorted(req.items())) or "nothing"


def _shortfall(cfg: RunConfig, key: str, amount: float, have: float, limit: float | None) -> str:
    """One line: which resource, how much the actors need and how it adds up, what there is."""
    wc, lc = cfg.workers, cfg.learner
    per_worker = {"CPU": wc.num_cpus, "GPU": wc.num_gpus}.get(key, wc.resources.get(key, 0.0))
    per_learner = {"CPU": lc.num_cpus, "GPU": lc.num_gpus}.get(key, lc.resources.get(key, 0.0))
    grows = f", and its autoscaler can add up to {_amount(limit)}" if limit is not None else " and does not autoscale"
    knob = {"CPU": "num_cpus", "GPU": "num_gpus"}.get(key, f"resources.{key}")
    learners = (f"learner {_amount(per_learner)}" if lc.num_learners == 1
                else f"{lc.num_learners} learners × {_amount(per_learner)}")
    fewer = "workers.num_workers" + (" or learner.num_learners" if lc.num_learners > 1 else "")
    return (f"the run needs {_amount(amount)} {key} ({wc.num_workers} workers × {_amount(per_worker)} + {learners}) "
            f"but the cluster has {_amount(have)} {key}{grows}; lower workers.{knob} / learner.{knob} or {fewer}")


def _node_of(text: str) -> str | None:
    """The node address Ray names in an actor's death message (``ip=10.0.0.5``), if any."""
    m = re.search(r"\bip=([0-9a-fA-F.:]+)", text)
    return m.group(1) if m else None


def actor_failure(name: str, err: BaseException) -> ActorStartError:
    """``err`` (from an actor that died or raised) as one line naming the actor and node."""
    text = str(err)
    node = _node_of(text)
    where = f" on node {node}" if node else ""
    return ActorStartError(f"{name} failed to start{where}: {one_line(err)}", detail=text)


def wait_for_actors(refs: dict[Any, str], timeout_s: float, say: Callable[[str], None],
                    every_s: float = 5.0) -> list[Any]:
    """``ray.get`` every ref in ``refs`` (ref -> the actor it comes from, e.g. a ping), in the
    order given; while some are pending, say which ones every ``every_s`` seconds. Raises
    :class:`ActorStartError` for a failed actor, :class:`StartupError` after ``timeout_s``."""
    pending = dict(refs)
    t0 = time.monotonic()
    last_said = t0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=min(every_s, 1.0))
        for ref in ready:
            name = pending.pop(ref)
            try:
                ray.get(ref, timeout=0)
            except (RayActorError, RayTaskError) as err:
                raise actor_failure(name, err) from None
            except GetTimeoutError:  # ready means done; keep it pending if Ray disagrees
                pending[ref] = name
        now = time.monotonic()
        if pending and now - t0 > timeout_s:
            raise StartupError(f"{_names(pending)} not started after {timeout_s:.0f}s (startup_timeout_s): "
                               f"{_free_resources()}")
        if pending and now - last_said >= every_s:
            last_said = now
            say(f"[yellow]waiting {now - t0:.0f}s of {timeout_s:.0f}s for {_names(pending)} to be placed "
                f"and started; {_free_resources()}[/yellow]")
    return ray.get(list(refs))


def _names(pending: dict[Any, str]) -> str:
    names = sorted(set(pending.values()))
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _free_resources() -> str:
    try:
        free, total = ray.available_resources(), ray.cluster_resources()
    except Exception:  # noqa: BLE001 - only for the message
        return "cluster state unknown"
    keys = [k for k in ("CPU", "GPU") if k in total]
    return "free: " + ", ".join(f"{_amount(free.get(k, 0.0))} of {_amount(total[k])} {k}" for k in keys)
