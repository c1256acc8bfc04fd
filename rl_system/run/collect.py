"""Gathering one round's rollouts: :class:`RolloutCollector`.

Every worker gets the current weights ref with its ``sample`` call; rollouts are taken with
``ray.wait`` as they finish, gated on their policy version, and their payload refs go to the
learner unopened (the driver never touches rollout bytes). With ``max_policy_lag > 0`` a worker is
re-launched as soon as its rollout is accepted, so sampling overlaps the update; the gate still
bounds how stale a trained-on rollout can be. Failed samples are re-requested; a worker that keeps
failing, or that Ray cannot bring back, ends the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import ray
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

from rl_system.envs.base import EnvContractError
from rl_system.errors import EnvBrokeContract, TrainingError, one_line
from rl_system.rollout.contract import RolloutMeta
from rl_system.run.context import RunContext


@dataclass
class _Pending:
    worker: int
    payload_ref: ray.ObjectRef
    version: int
    held: RolloutMeta | None = None
    """The rollout arrived while its worker had already delivered this round's (``wait_for: all``
    with lag): it is the worker's rollout of the next round, held here until then."""


class RolloutCollector:
    """The rollouts in flight (meta ref -> request) and the workers' failure books."""

    # How long a worker may stay "restarting" before the run gives up on it.
    RESTART_TIMEOUT_S = 300.0

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.pending: dict[ray.ObjectRef, _Pending] = {}
        self._sampled_before: set[int] = set()  # workers that delivered a rollout already
        self._restarting_since: dict[int, float] = {}

    @property
    def in_flight(self) -> int:
        return len(self.pending)

    def forget_in_flight(self) -> int:
        """Drop every rollout in flight (sampled by a policy the run has left: a reseed, a
        rollback); returns how many. Each worker runs its calls in order, so a call made after
        this comes after those samples anyway."""
        count = len(self.pending)
        self.pending.clear()
        return count

    def cancel_in_flight(self) -> None:
        """Cancel what is still sampling (the run is over)."""
        for ref in self.pending:
            ray.cancel(ref)

    def collect(self) -> tuple[list[ray.ObjectRef], list[RolloutMeta]]:
        """Sample on every idle worker, then gather one round: (payload refs, metas) in worker order."""
        busy = {p.worker for p in self.pending.values()}
        for w in range(len(self.ctx.workers)):
            if w not in busy:
                self.submit(w)
        return self.gather(len(self.ctx.workers))

    def submit(self, w: int) -> None:
        ctx = self.ctx
        meta_ref, payload_ref = ctx.workers[w].sample.options(num_returns=2).remote(ctx.weights_ref, ctx.version)
        self.pending[meta_ref] = _Pending(w, payload_ref, ctx.version)

    def gather(self, needed: int) -> tuple[list[ray.ObjectRef], list[RolloutMeta]]:
        """Wait for ``needed`` rollouts that pass the gate; re-request failed or stale ones.

        ``workers.wait_for: all`` takes exactly one rollout from every worker per round: a worker's
        next rollout that arrives while the round still waits for others (it was requested early,
        to overlap the update, ``max_policy_lag`` >= 1) is held for the next round, so every round
        trains on the same rollouts, each exactly as many versions behind, whatever the timing.
        ``any`` takes the first ``needed`` from whichever workers deliver: a slow worker never
        holds a round back, and its rollouts count while the gate lets them."""
        pending = self.pending
        accepted: list[tuple[int, ray.ObjectRef, RolloutMeta]] = []
        delivered: set[int] = set()
        consecutive_failures = [0] * len(self.ctx.workers)
        one_each = self.ctx.cfg.workers.wait_for == "all"
        for ref, job in [(r, j) for r, j in pending.items() if j.held is not None]:
            del pending[ref]
            self._take(job, job.held, accepted, delivered)
        while len(accepted) < needed:
            ready, _ = ray.wait([r for r, j in pending.items() if j.held is None], num_returns=1)
            job = pending.pop(ready[0])
            try:
                meta = ray.get(ready[0])
            except (RayActorError, RayTaskError) as err:
                self.on_worker_failure(job.worker, err, consecutive_failures)
                self.submit(job.worker)
                continue
            consecutive_failures[job.worker] = 0
            self._on_delivered(job.worker, meta)
            if one_each and job.worker in delivered:
                job.held = meta
                pending[ready[0]] = job
                continue
            self._take(job, meta, accepted, delivered)
        return in_worker_order(accepted)

    def _take(self, job: _Pending, meta: RolloutMeta, accepted: list, delivered: set[int]) -> None:
        """Accept ``meta``'s rollout into the round if the gate passes it (then, with lag, request
        the worker's next one now: it samples while the learner updates); else re-request it."""
        ctx = self.ctx
        if ctx.gate.check(meta.version, ctx.version):
            accepted.append((job.worker, job.payload_ref, meta))
            delivered.add(job.worker)
            if ctx.cfg.max_policy_lag > 0:
                self.submit(job.worker)  # overlap sampling with the coming update
        else:  # counted by the gate; re-request with the current weights
            self.submit(job.worker)

    def _on_delivered(self, w: int, meta: RolloutMeta) -> None:
        """Bookkeeping for a rollout that arrived: a (re)started worker process is set up again."""
        ctx = self.ctx
        self._restarting_since.pop(w, None)
        if meta.fresh_process:
            # A (re)started process: resolve `compression: auto` for it again.
            ctx.workers[w].set_learner_node.remote(ctx.learner_node_of(w))
            if ctx.cfg.selfplay.enabled:
                ctx.pool.send(w, ctx.workers[w])  # its opponent was lost too
            if w in self._sampled_before:
                # Ray restarted it while idle (no call failed): count the restart.
                ctx.stats.worker_restarts += 1
                ctx.log.warn(f"worker {w} was restarted")
        self._sampled_before.add(w)

    def on_worker_failure(self, w: int, err: Exception, consecutive: list[int]) -> None:
        """Count a failed call on worker ``w`` (the caller re-requests it); a worker that failed
        too often in a row, or that Ray has been restarting for too long, ends the run."""
        ctx = self.ctx
        if isinstance(err, ActorUnavailableError):
            # Ray is restarting it: not a new failure. Back off briefly, then re-request.
            since = self._restarting_since.setdefault(w, time.monotonic())
            if time.monotonic() - since > self.RESTART_TIMEOUT_S:
                raise TrainingError(f"worker {w} did not come back within {self.RESTART_TIMEOUT_S:.0f}s")
            time.sleep(0.05)
            return
        self._restarting_since.pop(w, None)
        if isinstance(err, EnvContractError):  # the env itself is wrong: a retry steps it into the same
            raise EnvBrokeContract(one_line(getattr(err, "cause", None) or err)) from None  # Ray's wrapper off
        consecutive[w] += 1
        ctx.stats.worker_failures += 1
        died = isinstance(err, RayActorError)
        if died:
            self._sampled_before.discard(w)  # its next fresh rollout is this restart, not another
            ctx.stats.worker_restarts += 1
        what = "died" if died else f"raised {one_line(err)}"
        ctx.log.warn(f"worker {w} {what}; re-requesting its rollout")
        ctx.log.detail(str(err))
        if consecutive[w] > max(3, ctx.cfg.workers.max_restarts):
            raise TrainingError(f"worker {w} failed {consecutive[w]} times in a row; last error: {one_line(err)}")

    def call_each(self, method: str, *args) -> None:
        """``method(*args)`` on every worker, through the same failure handling as sampling: a
        worker that dies (or is being restarted by Ray) is retried, up to the same limits."""
        for w in range(len(self.ctx.workers)):
            consecutive = [0] * len(self.ctx.workers)
            while True:
                try:
                    ray.get(getattr(self.ctx.workers[w], method).remote(*args))
                    break
                except (RayActorError, RayTaskError) as err:
                    self.on_worker_failure(w, err, consecutive)


def in_worker_order(accepted: list[tuple[int, ray.ObjectRef, RolloutMeta]]
                    ) -> tuple[list[ray.ObjectRef], list[RolloutMeta]]:
    """The round's ``(worker, payload ref, meta)`` sorted by worker index, as (refs, metas).

    Arrival order depends on timing. Sorting the refs makes the learner's batch, and so a seeded
    run, reproducible; sorting the metas the same way makes the return window reproducible too, and
    with it what is read off the window: steps to target, the best return, which checkpoint is best.
    """
    ordered = sorted(accepted, key=lambda item: item[0])
    return [ref for _, ref, _ in ordered], [meta for _, _, meta in ordered]
