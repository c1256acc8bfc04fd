"""The driver: :class:`RunLoop`, a thin loop of synchronous rounds (what is reported each round
is :mod:`rl_system.run.reporting`).

Per round: the learner's new weights are already one object in the object store (the second
return of ``Learner.update``); every worker gets that ref with its ``sample`` call; rollouts are
gathered with ``ray.wait`` as they finish, gated on their policy version, and their payload refs
go to the learner unopened (the driver never touches rollout bytes).

With ``max_policy_lag > 0`` a worker is re-launched as soon as its rollout arrives, so sampling
overlaps the update; the gate still bounds how stale a trained-on rollout can be.
"""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import ray
import yaml
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

from rl_system.actors.learner_group import LearnerGroup, merged_metrics
from rl_system.actors.placement import (
    ActorScope,
    StartupError,
    check_placement,
    wait_for_actors,
)
from rl_system.actors.worker import RolloutWorker
from rl_system.algos.selfplay import SnapshotPool
from rl_system.config import ConfigError, RunConfig, attempt_seed
from rl_system.errors import TrainingError, one_line
from rl_system.filesystems import write_json
from rl_system.observe import grafana
from rl_system.observe.metrics import ReturnWindow, RunLogger
from rl_system.observe.telemetry import Telemetry
from rl_system.observe.trackers import open_trackers
from rl_system.rollout.contract import RolloutMeta
from rl_system.rollout.gate import PolicyVersionGate
from rl_system.run import reporting, rollback
from rl_system.run import state as run_state
from rl_system.run.phases import PhaseClock
from rl_system.run.reporting import RunStats
from rl_system.run.startup import default_run_dir, init_ray, probe_specs
from rl_system.run.storage import RunStorage


class RoundReporter(Protocol):
    """Told of every round by the run loop (e.g. :class:`rl_system.tuning.trial.TuneReporter`)."""

    def checkpoint_due(self, steps_before: int, steps_now: int) -> bool:
        """True to checkpoint after the round that took the run from ``steps_before`` to
        ``steps_now`` env steps, besides ``checkpoint.every_rounds``."""

    stop_requested: bool
    """Set by :meth:`after_round` to end the run after this round (state ``stopped``)."""

    def after_round(self, run: RunLoop, checkpointed: bool, last: bool = False) -> None:
        """After the round's records (``checkpointed``: a checkpoint of it was requested); the
        ``last`` round's once the run has flushed its checkpoints and written its summary."""


@dataclass
class _Pending:
    worker: int
    payload_ref: ray.ObjectRef
    version: int
    held: RolloutMeta | None = None
    """The rollout arrived while its worker had already delivered this round's (``wait_for: all``
    with lag): it is the worker's rollout of the next round, held here until then."""


class RunLoop:
    """Builds the actors for ``cfg`` and runs rounds until a stop condition holds. (The
    learner-side algorithm is a *trainer*, :class:`rl_system.algos.Trainer`; this is the loop
    around it.)"""

    def __init__(self, cfg: RunConfig, run_dir: Path | None = None, quiet: bool = False,
                 resume_state: dict[str, Any] | None = None, specs: tuple[Any, Any] | None = None,
                 log_level: str = "info", namespace: str | None = None, reporter: RoundReporter | None = None,
                 clock: PhaseClock | None = None):
        """``specs``: what :func:`probe_specs` returned for ``cfg``, where the caller already probed.
        ``quiet`` is ``log_level="warning"``: no progress lines, only what went wrong.
        ``namespace``: the Ray namespace of the run's named actors (default: the job's).
        ``reporter``: told of every round (a Tune trial reports through it).
        ``clock``: where the run's phases are timed (the CLI's, which also holds the process's)."""
        self.cfg = cfg
        self.clock = clock or PhaseClock()
        self.namespace, self.reporter = namespace, reporter
        self.scope = ActorScope()
        self.resume_state = resume_state
        self.specs = specs or probe_specs(cfg)
        self.run_dir = Path(run_dir) if run_dir else default_run_dir(cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(), sort_keys=False))
        self.log = RunLogger(self.run_dir, tensorboard=cfg.tensorboard, level="warning" if quiet else log_level,
                             trackers=open_trackers(cfg, self.run_dir))
        self._says_phases = self.clock.say is None  # then each phase is a debug line of this run's log
        if self._says_phases:
            self.clock.say = lambda text: self.log.line(text, "debug")
        self.gate = PolicyVersionGate(cfg.max_policy_lag)
        self.window = ReturnWindow(cfg.return_window)
        self.pool = SnapshotPool(cfg.selfplay, cfg.seed)
        self.stats = RunStats()
        self.version = 0
        self.workers: list[Any] = []
        self.learner: LearnerGroup | None = None
        self.learner_nodes: list[str] = []  # per learner rank
        self.placement: list[dict[str, str]] | None = None  # per worker: node, compression
        self._sampled_before: set[int] = set()  # workers that delivered a rollout already
        self._restarting_since: dict[int, float] = {}
        self.storage: RunStorage | None = None
        self.telemetry: Telemetry | None = None
        self.last_train_metrics: dict[str, float] = {}  # the trainer's metrics of the last round

    # -- actors ------------------------------------------------------------------------------
    def _start_actors(self) -> None:
        cfg, wc = self.cfg, self.cfg.workers
        if check_placement(cfg):
            self.log.warn("the actors fit only once the cluster has grown: waiting for the autoscaler")
        cfg_dict = cfg.model_dump()
        worker_cls = ray.remote(RolloutWorker)
        scope = self.scope = ActorScope.current(cfg, self.namespace)
        self.workers = [
            # SPREAD: on a cluster, workers go to different nodes (more env throughput, and one
            # lost node takes fewer workers with it); in a reserved placement group, their bundles.
            worker_cls.options(**scope.named(f"rollout-worker-{i}"), num_cpus=wc.num_cpus, num_gpus=wc.num_gpus,
                               max_restarts=wc.max_restarts, max_task_retries=0, resources=wc.resources,
                               **{"scheduling_strategy": "SPREAD", **scope.worker(i)}).remote(i, cfg_dict)
            for i in range(wc.num_workers)
        ]
        self.storage = RunStorage(cfg, self.run_dir, self.log, scope)
        self.learner = LearnerGroup(cfg, self.specs, "learner", scope)
        pings = {w.ping.remote(): f"rollout-worker-{i}" for i, w in enumerate(self.workers)}
        wait_for_actors({**pings, **self.learner.start_refs()}, cfg.startup_timeout_s, self.log.line)
        self.learner.form()
        self.weights_ref = self.learner.lead.get_weights.remote()
        self._place_learner()

    @property
    def learner_node(self) -> str | None:
        """Rank 0's node (the single learner's)."""
        return self.learner_nodes[0] if self.learner_nodes else None

    def _learner_node_of(self, w: int) -> str:
        """The node of the learner that trains on worker ``w``'s rollouts."""
        return self.learner_nodes[self.learner.rank_of(w)]

    def _place_learner(self) -> None:
        """Where each worker's learner runs decides ``compression: auto`` for that worker."""
        self.learner_nodes = self.learner.nodes
        self.placement = ray.get([w.set_learner_node.remote(self._learner_node_of(i))
                                  for i, w in enumerate(self.workers)])

    def _stop_actors(self) -> None:
        for actor in self.workers:
            ray.kill(actor, no_restart=True)
        if self.learner is not None:
            self.learner.kill()
        if self.storage is not None:
            self.storage.stop()
        self.workers, self.learner = [], None

    # -- checkpoints -------------------------------------------------------------------------
    def _checkpoint(self, elapsed: float, pending: dict) -> None:
        """Ask the learner to snapshot itself to the checkpointer (it returns at once)."""
        workers = None
        if not pending:  # workers idle (lag 0): their env/RNG state makes the resume bit-exact
            try:
                workers = ray.get([w.get_state.remote() for w in self.workers], timeout=30)
            except (RayActorError, RayTaskError, ray.exceptions.GetTimeoutError):
                workers = None
            if workers is not None and any(s is None for s in workers):
                workers = None
        extra = {"driver": run_state.snapshot(self, elapsed), "workers": workers, "config": self.cfg.model_dump()}
        if self.cfg.selfplay.enabled:
            extra["selfplay"] = self.pool.state()
        manifest = {"round": self.stats.rounds, "mean_return": self.window.mean if self.window.returns else None}
        self.storage.request_checkpoint(self.learner.lead, extra, manifest)

    def _poll_checkpointer(self) -> None:
        stats = self.storage.poll()
        if stats is not None:
            self.log.scalars(self.stats.env_steps, {"checkpoints_saved": stats["saved"],
                                                    "checkpoints_failed": stats["failed"],
                                                    "checkpoints_skipped": stats["skipped"]}, prefix="system/")

    def _flush_checkpoints(self) -> None:
        if self.storage is not None:
            self.storage.flush(self.learner.lead if self.learner is not None else None)

    # -- one round ----------------------------------------------------------------------------
    def _submit(self, pending: dict, w: int) -> None:
        meta_ref, payload_ref = self.workers[w].sample.options(num_returns=2).remote(self.weights_ref, self.version)
        pending[meta_ref] = _Pending(w, payload_ref, self.version)

    def _gather(self, pending: dict, needed: int) -> tuple[list[ray.ObjectRef], list[RolloutMeta]]:
        """Wait for ``needed`` rollouts that pass the gate; re-request failed or stale ones.

        ``workers.wait_for: all`` takes exactly one rollout from every worker per round: a worker's
        next rollout that arrives while the round still waits for others (it was requested early,
        to overlap the update, ``max_policy_lag`` >= 1) is held for the next round, so every round
        trains on the same rollouts, each exactly as many versions behind, whatever the timing.
        ``any`` takes the first ``needed`` from whichever workers deliver: a slow worker never
        holds a round back, and its rollouts count while the gate lets them."""
        accepted: list[tuple[int, ray.ObjectRef, RolloutMeta]] = []
        delivered: set[int] = set()
        consecutive_failures = [0] * len(self.workers)
        one_each = self.cfg.workers.wait_for == "all"
        for ref, job in [(r, j) for r, j in pending.items() if j.held is not None]:
            del pending[ref]
            self._take(pending, job, job.held, accepted, delivered)
        while len(accepted) < needed:
            ready, _ = ray.wait([r for r, j in pending.items() if j.held is None], num_returns=1)
            job = pending.pop(ready[0])
            try:
                meta = ray.get(ready[0])
            except (RayActorError, RayTaskError) as err:
                self._on_worker_failure(job.worker, err, consecutive_failures)
                self._submit(pending, job.worker)
                continue
            consecutive_failures[job.worker] = 0
            self._on_delivered(job.worker, meta)
            if one_each and job.worker in delivered:
                job.held = meta
                pending[ready[0]] = job
                continue
            self._take(pending, job, meta, accepted, delivered)
        return in_worker_order(accepted)

    def _take(self, pending: dict, job: _Pending, meta: RolloutMeta, accepted: list, delivered: set[int]) -> None:
        """Accept ``meta``'s rollout into the round if the gate passes it (then, with lag, request
        the worker's next one now: it samples while the learner updates); else re-request it."""
        if self.gate.check(meta.version, self.version):
            accepted.append((job.worker, job.payload_ref, meta))
            delivered.add(job.worker)
            if self.cfg.max_policy_lag > 0:
                self._submit(pending, job.worker)  # overlap sampling with the coming update
        else:  # counted by the gate; re-request with the current weights
            self._submit(pending, job.worker)

    def _on_delivered(self, w: int, meta: RolloutMeta) -> None:
        """Bookkeeping for a rollout that arrived: a (re)started worker process is set up again."""
        self._restarting_since.pop(w, None)
        if meta.fresh_process:
            # A (re)started process: resolve `compression: auto` for it again.
            self.workers[w].set_learner_node.remote(self._learner_node_of(w))
            if self.cfg.selfplay.enabled:
                self.pool.send(w, self.workers[w])  # its opponent was lost too
            if w in self._sampled_before:
                # Ray restarted it while idle (no call failed): count the restart.
                self.stats.worker_restarts += 1
                self.log.warn(f"worker {w} was restarted")
        self._sampled_before.add(w)

    # How long a worker may stay "restarting" before the run gives up on it.
    RESTART_TIMEOUT_S = 300.0

    def _on_worker_failure(self, w: int, err: Exception, consecutive: list[int]) -> None:
        if isinstance(err, ActorUnavailableError):
            # Ray is restarting it: not a new failure. Back off briefly, then re-request.
            since = self._restarting_since.setdefault(w, time.monotonic())
            if time.monotonic() - since > self.RESTART_TIMEOUT_S:
                raise TrainingError(f"worker {w} did not come back within {self.RESTART_TIMEOUT_S:.0f}s")
            time.sleep(0.05)
            return
        self._restarting_since.pop(w, None)
        consecutive[w] += 1
        self.stats.worker_failures += 1
        died = isinstance(err, RayActorError)
        if died:
            self._sampled_before.discard(w)  # its next fresh rollout is this restart, not another
            self.stats.worker_restarts += 1
        what = "died" if died else f"raised {one_line(err)}"
        self.log.warn(f"worker {w} {what}; re-requesting its rollout")
        self.log.detail(str(err))
        if consecutive[w] > max(3, self.cfg.workers.max_restarts):
            raise TrainingError(f"worker {w} failed {consecutive[w]} times in a row; last error: {one_line(err)}")

    def _update(self, payload_refs: list[ray.ObjectRef]) -> dict[str, Any] | None:
        """One learner update; None when the learner died and was rebuilt instead (the round's
        rollouts are then dropped: they belong to policy versions the rebuilt learner never had)."""
        metrics_refs, weights_ref = self.learner.update(payload_refs)
        try:
            metrics = merged_metrics(self.learner.wait(metrics_refs))
        except RayActorError as err:
            run_state.rebuild_learner(self, err)
            self.gate.dropped += len(payload_refs)
            return None
        except RayTaskError as err:
            raise TrainingError(f"the learner failed: {one_line(err)}") from None
        self.weights_ref = weights_ref  # one object per policy version, shared by all workers
        self.version = metrics["version"]
        return metrics

    # -- the loop -----------------------------------------------------------------------------
    def run(self, address: str | None = None) -> dict[str, Any]:
        t_start = time.perf_counter()
        clock, status = self.clock, "failed"
        if not ray.is_initialized():
            with clock.phase("ray_init"):
                init_ray(self.cfg, address)
        try:
            try:
                with clock.phase("actors"):
                    self._start_actors()
            except StartupError as err:
                self.log.detail(err.detail or str(err))
                raise TrainingError(str(err)) from None
            self.telemetry = Telemetry(self.run_dir.name)
            grafana.install_on_this_node()
            if self.resume_state is not None:
                run_state.resume(self, self.resume_state)
                self.resume_state = None
            startup_s = time.perf_counter() - t_start
            self.log.line(f"run dir {self.run_dir} | {len(self.workers)} workers × "
                          f"{self.cfg.workers.num_envs} envs × {self.cfg.workers.rollout_len} steps | "
                          f"actors ready in {startup_s:.1f}s")
            summary = self._loop(startup_s)
            status = summary["status"]
        except (TrainingError, ConfigError, KeyboardInterrupt) as err:  # already meant for the user
            status = _status_of(err)
            self._flush_checkpoints()
            self._write_summary(reporting.summary(self, 0.0, 0.0, state=_status_of(err), error=err))
            raise
        except Exception as err:  # noqa: BLE001 - anything else: one line, the traceback to console.log
            self.log.detail(traceback.format_exc())
            self._flush_checkpoints()
            self._write_summary(reporting.summary(self, 0.0, 0.0, state="failed", error=err))
            raise TrainingError(f"{type(err).__name__}: {one_line(err)} (full text in "
                                f"{self.run_dir / 'console.log'})") from None
        finally:
            with clock.phase("stop_actors"):
                self._stop_actors()
            if self._says_phases:
                clock.say = None
            self.log.close(status)
        return summary

    def _loop(self, startup_s: float) -> dict[str, Any]:
        cfg, st = self.cfg, self.stats
        pending: dict = {}  # meta ref -> _Pending: rollouts in flight
        t0 = last_log = time.perf_counter() - st.elapsed_before_resume
        t_train = time.perf_counter()
        while True:
            metrics, metas = self._round(pending)
            if metrics is None:  # the learner was rebuilt from a checkpoint: this round is void
                continue
            steps_before = st.env_steps
            self._account(metas)
            elapsed = time.perf_counter() - t0
            self._record(metrics, metas, elapsed)
            if self._stalled(steps_before) and not self._should_stop(elapsed):  # never end on fresh weights
                self._reseed(pending)
            elif rollback.collapsed(self) and not self._should_stop(elapsed):
                rollback.roll_back(self, pending)
            if time.perf_counter() - last_log >= cfg.log_every_s:
                last_log = time.perf_counter()
                self._poll_checkpointer()
                self._publish("running", elapsed)
                self._progress_line(elapsed)
            stop = self._should_stop(elapsed)
            every = cfg.checkpoint.every_rounds
            due = self.reporter is not None and self.reporter.checkpoint_due(steps_before, st.env_steps)
            checkpointed = stop or bool(every and st.rounds % every == 0) or due
            if checkpointed:
                self._checkpoint(elapsed, pending)
            if self.reporter is not None and not stop:  # the last round is reported by _finish
                self.reporter.after_round(self, checkpointed)
                stop = self.reporter.stop_requested
                if stop and not checkpointed:  # a run stopped from outside ends on a checkpoint too
                    self._checkpoint(elapsed, pending)
            if stop:
                break
        self.clock.record("train", time.perf_counter() - t_train)
        with self.clock.phase("finish"):
            return self._finish(pending, t0, startup_s)

    def _round(self, pending: dict) -> tuple[dict[str, Any] | None, list[RolloutMeta]]:
        """Sample on every idle worker, gather what passes the gate, update the learner once
        (metrics None: the learner died and was rebuilt; nothing of this round counts)."""
        st = self.stats
        busy = {p.worker for p in pending.values()}
        for w in range(len(self.workers)):
            if w not in busy:
                self._submit(pending, w)
        t_round = time.perf_counter()
        refs, metas = self._gather(pending, len(self.workers))
        t_gathered = time.perf_counter()
        if self.cfg.archive_every and st.rounds % self.cfg.archive_every == 0:
            self.storage.archive(st.rounds, refs)
        metrics = self._update(refs)
        if metrics is None:
            return None, metas
        self._check_finite(metrics, pending)
        st.time_sample += t_gathered - t_round
        st.time_update += time.perf_counter() - t_gathered
        st.time_round += time.perf_counter() - t_round
        st.cpu_learner += metrics["system"].get("cpu_s", 0.0)
        st.rounds += 1
        if self.pool.due(st.rounds):
            self.pool.add(self.version, self.weights_ref)
            self.pool.refresh(self.workers)
        return metrics, metas

    def _account(self, metas: list[RolloutMeta]) -> None:
        """Count the round's env steps and bytes; its finished episodes enter the return window
        (only counted while a rollback settles: they began under the collapsed policy)."""
        st = self.stats
        settling = rollback.settling(self)
        for meta in metas:
            st.rollouts_by_worker[meta.worker_id] = st.rollouts_by_worker.get(meta.worker_id, 0) + 1
            st.env_steps += meta.env_steps
            st.bytes_shipped += meta.payload_bytes
            st.bytes_raw += meta.raw_bytes
            st.cpu_workers += meta.cpu_s
            if settling:
                self.window.extend([], [], meta.num_episodes)
            else:
                self.window.extend(meta.episode_returns, meta.episode_lengths, meta.num_episodes,
                                   meta.episode_outcomes)

    def _progress_line(self, elapsed: float) -> None:
        st = self.stats
        self.log.progress(st.rounds, st.env_steps, st.env_steps / max(elapsed, 1e-9), self.window,
                          st.best_return, self.version, self.gate.dropped)

    def _finish(self, pending: dict, t0: float, startup_s: float) -> dict[str, Any]:
        """After the last round: cancel what is in flight, flush storage, write the summary (the
        wall time includes the flush: a run is done when its checkpoints are on storage)."""
        for ref in pending:  # rollouts still in flight (lag > 0) are not needed any more
            ray.cancel(ref)
        self.storage.collect_archive(timeout=60)
        self._flush_checkpoints()
        wall = time.perf_counter() - t0
        self._progress_line(wall)
        state = "stopped" if self.reporter is not None and self.reporter.stop_requested else "completed"
        summary = reporting.summary(self, wall, startup_s, state=state)
        self._write_summary(summary)
        self._publish(state, wall)
        if state == "completed" and self.reporter is not None:
            self.reporter.after_round(self, checkpointed=True, last=True)  # with the run's outputs complete
        return summary

    # -- reseed on stall ----------------------------------------------------------------------
    def _stalled(self, steps_before: int) -> bool:
        """True when this round (from ``steps_before`` env steps to now) passed a
        ``reseed.at_env_steps`` entry and the current attempt's best full-window mean return is
        still under ``reseed.below_return`` (and no target was reached). Only the round that
        passes an entry checks it, so a resumed run never fires a check it had already passed."""
        st = self.stats
        due = any(steps_before < s <= st.env_steps for s in self.cfg.reseed.at_env_steps)
        return due and st.steps_to_target is None and st.attempt_best_return < self.cfg.reseed.below_return

    def _reseed(self, pending: dict) -> None:
        """Rebuild learner and workers from the next attempt's seed; the budget carries on."""
        st = self.stats
        seed = attempt_seed(self.cfg.seed, len(st.reseeds) + 1)
        # Rollouts still in flight (max_policy_lag > 0) belong to the stalled attempt: forget them
        # (never trained on, so not counted as env steps). Each worker runs its calls in order, so
        # its reseed comes after that sample anyway.
        in_flight = len(pending)
        pending.clear()
        calls = [a.reseed.options(num_returns=2).remote(seed) for a in self.learner.actors]
        self.weights_ref = calls[0][1]
        for w in range(len(self.workers)):
            self._reseed_worker(w, seed)
        self.version = self.learner.wait([version for version, _ in calls])[0]
        if self.cfg.selfplay.enabled:  # the pool's snapshots are the stalled attempt's policies
            self.pool = SnapshotPool(self.cfg.selfplay, seed)
            self.pool.refresh(self.workers)
        best = st.attempt_best_return if math.isfinite(st.attempt_best_return) else None
        st.reseeds.append({"env_steps": st.env_steps, "round": st.rounds, "best_return": best, "seed": seed})
        shown = "none (no full window)" if best is None else f"{best:.3f}"
        self.log.warn(f"reseed on stall: best mean return {shown} < {self.cfg.reseed.below_return} "
                      f"at {st.env_steps:,} env steps; starting over from seed {seed} "
                      f"(policy version {self.version}; {in_flight} in-flight rollouts dropped); the step budget "
                      f"carries on")
        self.log.scalars(st.env_steps, {"reseeds": len(st.reseeds)}, prefix="system/")
        self.window.clear()
        st.attempt_best_return = float("-inf")
        st.nonfinite_rounds = 0

    def _reseed_worker(self, w: int, seed: int) -> None:
        """``reseed(seed)`` on worker ``w``, through the same failure handling as sampling: a
        worker that dies (or is being restarted by Ray) is retried, up to the same limits."""
        consecutive = [0] * len(self.workers)
        while True:
            try:
                ray.get(self.workers[w].reseed.remote(seed))
                return
            except (RayActorError, RayTaskError) as err:
                self._on_worker_failure(w, err, consecutive)

    def _publish(self, state: str, elapsed: float) -> None:
        if self.telemetry is None:
            return
        try:
            self.telemetry.publish(reporting.status(self, state, elapsed))
        except Exception:  # noqa: BLE001 - monitoring must never stop training
            pass

    def _record(self, metrics: dict[str, Any], metas: list[RolloutMeta], elapsed: float) -> None:
        cfg, st = self.cfg, self.stats
        mean_ret = self.window.mean
        if self.window.returns:
            st.best_return = max(st.best_return, mean_ret)
        if self.window.full:
            st.attempt_best_return = max(st.attempt_best_return, mean_ret)
        if (cfg.target_return is not None and st.time_to_target_s is None and self.window.full
                and mean_ret >= cfg.target_return):
            st.time_to_target_s, st.steps_to_target = elapsed, st.env_steps
        self.last_train_metrics = metrics["train"]
        for group, scalars in reporting.round_scalars(self, metrics, metas, elapsed).items():
            self.log.scalars(st.env_steps, scalars, prefix=f"{group}/")

    def _check_finite(self, metrics: dict[str, Any], pending: dict) -> None:
        st = self.stats
        skipped = metrics["train"].get("skipped_minibatches", 0)
        if skipped == 0:
            st.nonfinite_rounds = 0
            return
        st.nonfinite_rounds += 1
        self.log.warn(f"round {st.rounds + 1}: {skipped} minibatch steps skipped "
                      f"(non-finite loss or gradients); weights untouched by them")
        if st.nonfinite_rounds >= self.cfg.checkpoint.max_nonfinite_rounds:
            self._checkpoint(0.0, pending)
            raise TrainingError(f"non-finite loss or gradients in {st.nonfinite_rounds} rounds in a row; "
                                f"stopped with a checkpoint of the last good weights")

    def _should_stop(self, elapsed: float) -> bool:
        cfg, st = self.cfg, self.stats
        if cfg.target_return is not None and cfg.stop_at_target and st.time_to_target_s is not None:
            return True
        if st.env_steps >= cfg.max_env_steps:
            return True
        return cfg.max_wall_s is not None and elapsed >= cfg.max_wall_s

    def _write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.run_dir / "summary.json", summary)


def in_worker_order(accepted: list[tuple[int, ray.ObjectRef, RolloutMeta]]
                    ) -> tuple[list[ray.ObjectRef], list[RolloutMeta]]:
    """The round's ``(worker, payload ref, meta)`` sorted by worker index, as (refs, metas).

    Arrival order depends on timing. Sorting the refs makes the learner's batch, and so a seeded
    run, reproducible; sorting the metas the same way makes the return window reproducible too, and
    with it what is read off the window: steps to target, the best return, which checkpoint is best.
    """
    ordered = sorted(accepted, key=lambda item: item[0])
    return [ref for _, ref, _ in ordered], [meta for _, _, meta in ordered]


def _status_of(err: BaseException) -> str:
    return "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"


def train(cfg: RunConfig, run_dir: Path | None = None, address: str | None = None,
          quiet: bool = False) -> dict[str, Any]:
    """Train with ``cfg``; returns the summary also written to ``<run_dir>/summary.json``."""
    return RunLoop(cfg, run_dir, quiet=quiet).run(address)
