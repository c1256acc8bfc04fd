"""The driver: :class:`RunLoop`, a thin loop of synchronous rounds over one :class:`RunContext`.

Per round: the collector (:mod:`.collect`) gathers one gated rollout per worker; the learner
updates on their payload refs and returns the next version's weights as one object-store ref;
the round is recorded (:mod:`.reporting`), the stall and collapse guards look at it
(:mod:`.reseed`, :mod:`.rollback`), and a checkpoint is requested when one is due (written by the
checkpointer actor while the next round runs). A stop condition ends the loop.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any, Protocol

import ray
import yaml
from ray.exceptions import RayActorError, RayTaskError

from rl_system import openmp
from rl_system.actors.learner import UpdateResult
from rl_system.actors.learner_group import LearnerGroup, merged_metrics
from rl_system.actors.placement import ActorScope, StartupError, check_placement, wait_for_actors
from rl_system.actors.worker import RolloutWorker
from rl_system.algos import SKIPPED_MINIBATCHES
from rl_system.checkpoint import keys
from rl_system.config import ConfigError, RunConfig
from rl_system.errors import TrainingError, one_line
from rl_system.filesystems import write_json
from rl_system.observe import grafana
from rl_system.observe.metrics import CPU_S, SYSTEM, RunLogger, console_level
from rl_system.observe.telemetry import Telemetry
from rl_system.observe.trackers import open_trackers
from rl_system.rollout.contract import RolloutMeta
from rl_system.run import reporting, reseed, rollback
from rl_system.run import state as run_state
from rl_system.run.collect import RolloutCollector
from rl_system.run.context import RunContext
from rl_system.run.phases import PhaseClock
from rl_system.run.startup import default_run_dir, init_ray, probe_specs
from rl_system.run.storage import RunStorage
from rl_system.run.summary import RunSummary


class RoundReporter(Protocol):
    """Told of every round by the run loop (e.g. :class:`rl_system.tuning.trial.TuneReporter`)."""

    def checkpoint_due(self, steps_before: int, steps_now: int) -> bool:
        """True to checkpoint after the round that took the run from ``steps_before`` to
        ``steps_now`` env steps, besides ``checkpoint.every_rounds``."""

    stop_requested: bool
    """Set by :meth:`after_round` to end the run after this round (state ``stopped``)."""

    def after_round(self, ctx: RunContext, checkpointed: bool, last: bool = False) -> None:
        """After the round's records (read them off ``ctx``; change nothing there) (``checkpointed``: a checkpoint of it was requested); the
        ``last`` round's once the run has flushed its checkpoints and written its summary."""


class RunLoop:
    """Builds the actors for ``cfg`` and runs rounds until a stop condition holds. (The
    learner-side algorithm is a *trainer*, :class:`rl_system.algos.Trainer`; this is the loop
    around it.) What the run changes as it goes is :attr:`ctx`, a :class:`RunContext`."""

    def __init__(self, cfg: RunConfig, run_dir: Path | None = None,
                 resume_state: dict[str, Any] | None = None, specs: tuple[Any, Any] | None = None,
                 log_level: str = "info", namespace: str | None = None, reporter: RoundReporter | None = None,
                 clock: PhaseClock | None = None):
        """``specs``: what :func:`probe_specs` returned for ``cfg``, where the caller already probed.
        ``log_level``: what the console shows (``warning``: no progress lines, only what went wrong).
        ``namespace``: the Ray namespace of the run's named actors (default: the job's).
        ``reporter``: told of every round (a Tune trial reports through it).
        ``clock``: where the run's phases are timed (the CLI's, which also holds the process's)."""
        self.cfg = cfg
        self.namespace, self.reporter, self.resume_state = namespace, reporter, resume_state
        clock = clock or PhaseClock()
        run_dir = Path(run_dir) if run_dir else default_run_dir(cfg)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(), sort_keys=False))
        log = RunLogger(run_dir, tensorboard=cfg.tensorboard, level=log_level,
                        trackers=open_trackers(cfg, run_dir))
        self.ctx = RunContext(cfg, specs or probe_specs(cfg), run_dir, log, clock)
        self.collector = RolloutCollector(self.ctx)
        self._says_phases = clock.say is None  # then each phase is a debug line of this run's log
        if self._says_phases:
            clock.say = lambda text: log.line(text, "debug")
        log.line(openmp.describe(), "debug")

    # -- actors ------------------------------------------------------------------------------
    def _start_actors(self) -> None:
        ctx, cfg, wc = self.ctx, self.cfg, self.cfg.workers
        if check_placement(cfg):
            ctx.log.warn("the actors fit only once the cluster has grown: waiting for the autoscaler")
        # The validated model itself crosses (pickled inline with the actor's constructor, so a
        # restart has it): actors do not validate it again.
        worker_cls = ray.remote(RolloutWorker)
        scope = ctx.scope = ActorScope.current(cfg, self.namespace)
        ctx.workers = [
            # SPREAD: on a cluster, workers go to different nodes (more env throughput, and one
            # lost node takes fewer workers with it); in a reserved placement group, their bundles.
            worker_cls.options(**scope.named(f"rollout-worker-{i}"), num_cpus=wc.num_cpus, num_gpus=wc.num_gpus,
                               max_restarts=wc.max_restarts, max_task_retries=0, resources=wc.resources,
                               **{"scheduling_strategy": "SPREAD", **scope.worker(i)}).remote(i, cfg)
            for i in range(wc.num_workers)
        ]
        ctx.storage = RunStorage(cfg, ctx.run_dir, ctx.log, scope)
        ctx.learner = LearnerGroup(cfg, ctx.specs, "learner", scope)
        pings = {w.ping.remote(): f"rollout-worker-{i}" for i, w in enumerate(ctx.workers)}
        wait_for_actors({**pings, **ctx.learner.start_refs(), **ctx.storage.start_refs()}, cfg.startup_timeout_s,
                        ctx.log.line)
        ctx.learner.form()
        ctx.publish_policy(0, ctx.learner.lead.get_weights.remote())
        ctx.place_learner()

    def _stop_actors(self) -> None:
        ctx = self.ctx
        for actor in ctx.workers:
            ray.kill(actor, no_restart=True)
        if ctx.learner is not None:
            ctx.learner.kill()
        if ctx.storage is not None:
            ctx.storage.stop()
        ctx.workers, ctx.learner = [], None

    # -- checkpoints -------------------------------------------------------------------------
    def _checkpoint(self, elapsed: float) -> None:
        """Ask the learner to snapshot itself to the checkpointer (it returns at once)."""
        ctx, workers = self.ctx, None
        if not self.collector.in_flight:  # workers idle (lag 0): their env/RNG state makes the resume bit-exact
            try:
                workers = ray.get([w.get_state.remote() for w in ctx.workers], timeout=30)
            except (RayActorError, RayTaskError, ray.exceptions.GetTimeoutError):
                workers = None
            if workers is not None and any(s is None for s in workers):
                workers = None
        extra = {keys.DRIVER: run_state.snapshot(ctx, elapsed), keys.WORKERS: workers,
                 keys.CONFIG: self.cfg.model_dump()}
        if self.cfg.selfplay.enabled:
            extra[keys.SELFPLAY] = ctx.pool.state()
        manifest = {"round": ctx.stats.rounds, "mean_return": ctx.window.mean if ctx.window.returns else None}
        ctx.storage.request_checkpoint(ctx.learner.lead, extra, manifest)

    def _poll_checkpointer(self) -> None:
        ctx = self.ctx
        stats = ctx.storage.poll()
        if stats is not None:
            ctx.log.scalars(ctx.stats.env_steps, {"checkpoints_saved": stats["saved"],
                                                  "checkpoints_failed": stats["failed"],
                                                  "checkpoints_skipped": stats["skipped"]}, prefix=SYSTEM)

    def _flush_checkpoints(self) -> None:
        ctx = self.ctx
        if ctx.storage is not None:
            ctx.storage.flush(ctx.learner.lead if ctx.learner is not None else None)

    # -- the loop -----------------------------------------------------------------------------
    def run(self, address: str | None = None) -> RunSummary:
        t_start = time.perf_counter()
        ctx, status = self.ctx, "failed"
        if not ray.is_initialized():
            with ctx.clock.phase("ray_init"):
                init_ray(self.cfg, address)
        try:
            try:
                with ctx.clock.phase("actors"):
                    self._start_actors()
            except StartupError as err:
                ctx.log.detail(err.detail or str(err))
                raise TrainingError(str(err)) from None
            ctx.telemetry = Telemetry(ctx.run_dir.name)
            grafana.install_on_this_node()
            if self.resume_state is not None:
                run_state.resume(ctx, self.resume_state)
                self.resume_state = None
            startup_s = time.perf_counter() - t_start
            ctx.log.line(f"run dir {ctx.run_dir} | {len(ctx.workers)} workers × "
                         f"{self.cfg.workers.num_envs} envs × {self.cfg.workers.rollout_len} steps | "
                         f"actors ready in {startup_s:.1f}s")
            summary = self._loop(startup_s)
            status = summary.status
        except (TrainingError, ConfigError, KeyboardInterrupt) as err:  # already meant for the user
            status = _status_of(err)
            self._flush_checkpoints()
            self._write_summary(reporting.summary(ctx, 0.0, 0.0, state=_status_of(err), error=err))
            raise
        except Exception as err:  # noqa: BLE001 - anything else: one line, the traceback to console.log
            ctx.log.detail(traceback.format_exc())
            self._flush_checkpoints()
            self._write_summary(reporting.summary(ctx, 0.0, 0.0, state="failed", error=err))
            raise TrainingError(f"{type(err).__name__}: {one_line(err)} (full text in "
                                f"{ctx.run_dir / 'console.log'})") from None
        finally:
            with ctx.clock.phase("stop_actors"):
                self._stop_actors()
            if self._says_phases:
                ctx.clock.say = None
            ctx.log.close(status)
        return summary

    def _loop(self, startup_s: float) -> RunSummary:
        ctx, cfg, st = self.ctx, self.cfg, self.ctx.stats
        t0 = last_log = time.perf_counter() - st.elapsed_before_resume
        t_train = time.perf_counter()
        while True:
            result, metas = self._round()
            if result is None:  # the learner was rebuilt from a checkpoint: this round is void
                continue
            steps_before = st.env_steps
            self._account(metas)
            elapsed = time.perf_counter() - t0
            self._record(result, metas, elapsed)
            if reseed.stalled(ctx, steps_before) and not self._should_stop(elapsed):  # never end on fresh weights
                reseed.reseed(ctx, self.collector)
            elif rollback.collapsed(ctx) and not self._should_stop(elapsed):
                rollback.roll_back(ctx, self.collector)
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
                self._checkpoint(elapsed)
            if self.reporter is not None and not stop:  # the last round is reported by _finish
                self.reporter.after_round(ctx, checkpointed)
                stop = self.reporter.stop_requested
                if stop and not checkpointed:  # a run stopped from outside ends on a checkpoint too
                    self._checkpoint(elapsed)
            if stop:
                break
        ctx.clock.record("train", time.perf_counter() - t_train)
        with ctx.clock.phase("finish"):
            return self._finish(t0, startup_s)

    def _round(self) -> tuple[UpdateResult | None, list[RolloutMeta]]:
        """Gather one round, update the learner once (result None: the learner died and was
        rebuilt; nothing of this round counts)."""
        ctx, st = self.ctx, self.ctx.stats
        t_round = time.perf_counter()
        refs, metas = self.collector.collect()
        t_gathered = time.perf_counter()
        if self.cfg.archive_every and st.rounds % self.cfg.archive_every == 0:
            ctx.storage.archive(st.rounds, refs)
        result = self._update(refs)
        if result is None:
            return None, metas
        self._check_finite(result)
        st.time_sample += t_gathered - t_round
        st.time_update += time.perf_counter() - t_gathered
        st.time_round += time.perf_counter() - t_round
        st.cpu_learner += result.system.get(CPU_S, 0.0)
        st.rounds += 1
        if ctx.pool.due(st.rounds):
            ctx.pool.add(ctx.version, ctx.weights_ref)
            ctx.pool.refresh(ctx.workers)
        return result, metas

    def _update(self, payload_refs: list[ray.ObjectRef]) -> UpdateResult | None:
        """One learner update; None when the learner died and was rebuilt instead (the round's
        rollouts are then dropped: they belong to policy versions the rebuilt learner never had)."""
        ctx = self.ctx
        result_refs, weights_ref = ctx.learner.update(payload_refs)
        ctx.log.write_held()  # the last round's scalars, while the learner computes
        try:
            result = merged_metrics(ctx.learner.wait(result_refs))
        except RayActorError as err:
            run_state.rebuild_learner(ctx, err)
            ctx.gate.dropped += len(payload_refs)
            return None
        except RayTaskError as err:
            raise TrainingError(f"the learner failed: {one_line(err)}") from None
        ctx.publish_policy(result.version, weights_ref)  # one object per version, shared by all workers
        return result

    def _account(self, metas: list[RolloutMeta]) -> None:
        """Count the round's env steps and bytes; its finished episodes enter the return window
        (only counted while a rollback settles: they began under the collapsed policy)."""
        ctx, st = self.ctx, self.ctx.stats
        settling = rollback.settling(ctx)
        for meta in metas:
            st.rollouts_by_worker[meta.worker_id] = st.rollouts_by_worker.get(meta.worker_id, 0) + 1
            st.env_steps += meta.env_steps
            st.bytes_shipped += meta.payload_bytes
            st.bytes_raw += meta.raw_bytes
            st.cpu_workers += meta.cpu_s
            if settling:
                ctx.window.extend([], [], meta.num_episodes)
            else:
                ctx.window.extend(meta.episode_returns, meta.episode_lengths, meta.num_episodes,
                                  meta.episode_outcomes)

    def _record(self, result: UpdateResult, metas: list[RolloutMeta], elapsed: float) -> None:
        ctx, cfg, st = self.ctx, self.cfg, self.ctx.stats
        mean_ret = ctx.window.mean
        if ctx.window.returns:
            st.best_return = max(st.best_return, mean_ret)
        if ctx.window.full:
            st.attempt_best_return = max(st.attempt_best_return, mean_ret)
        if (cfg.target_return is not None and st.time_to_target_s is None and ctx.window.full
                and mean_ret >= cfg.target_return):
            st.time_to_target_s, st.steps_to_target = elapsed, st.env_steps
        ctx.last_train_metrics = result.train
        for group, scalars in reporting.round_scalars(ctx, result, metas, elapsed).items():
            ctx.log.scalars(st.env_steps, scalars, prefix=group, hold=True)  # written during the next update

    def _check_finite(self, result: UpdateResult) -> None:
        ctx, st = self.ctx, self.ctx.stats
        skipped = result.train.get(SKIPPED_MINIBATCHES, 0)
        if skipped == 0:
            st.nonfinite_rounds = 0
            return
        st.nonfinite_rounds += 1
        ctx.log.warn(f"round {st.rounds + 1}: {skipped} minibatch steps skipped "
                     f"(non-finite loss or gradients); weights untouched by them")
        if st.nonfinite_rounds >= self.cfg.checkpoint.max_nonfinite_rounds:
            self._checkpoint(0.0)
            raise TrainingError(f"non-finite loss or gradients in {st.nonfinite_rounds} rounds in a row; "
                                f"stopped with a checkpoint of the last good weights")

    def _should_stop(self, elapsed: float) -> bool:
        cfg, st = self.cfg, self.ctx.stats
        if cfg.target_return is not None and cfg.stop_at_target and st.time_to_target_s is not None:
            return True
        if st.env_steps >= cfg.max_env_steps:
            return True
        return cfg.max_wall_s is not None and elapsed >= cfg.max_wall_s

    # -- reports ------------------------------------------------------------------------------
    def _progress_line(self, elapsed: float) -> None:
        ctx, st = self.ctx, self.ctx.stats
        ctx.log.progress(st.rounds, st.env_steps, st.env_steps / max(elapsed, 1e-9), ctx.window,
                         st.best_return, ctx.version, ctx.gate.dropped)

    def _publish(self, state: str, elapsed: float) -> None:
        if self.ctx.telemetry is None:
            return
        try:
            self.ctx.telemetry.publish(reporting.status(self.ctx, state, elapsed))
        except Exception:  # noqa: BLE001 - monitoring must never stop training
            pass

    def _finish(self, t0: float, startup_s: float) -> RunSummary:
        """After the last round: cancel what is in flight, flush storage, write the summary (the
        wall time includes the flush: a run is done when its checkpoints are on storage)."""
        ctx = self.ctx
        self.collector.cancel_in_flight()  # rollouts still in flight (lag > 0) are not needed any more
        ctx.storage.collect_archive(timeout=60)
        ctx.log.write_held()
        self._flush_checkpoints()
        wall = time.perf_counter() - t0
        self._progress_line(wall)
        state = "stopped" if self.reporter is not None and self.reporter.stop_requested else "completed"
        summary = reporting.summary(ctx, wall, startup_s, state=state)
        self._write_summary(summary)
        self._publish(state, wall)
        if state == "completed" and self.reporter is not None:
            self.reporter.after_round(ctx, checkpointed=True, last=True)  # with the run's outputs complete
        return summary

    def _write_summary(self, summary: RunSummary) -> None:
        write_json(self.ctx.run_dir / "summary.json", summary.to_json())


def _status_of(err: BaseException) -> str:
    return "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"


def train(cfg: RunConfig, run_dir: Path | None = None, address: str | None = None,
          quiet: bool = False) -> RunSummary:
    """Train with ``cfg``; returns the summary also written to ``<run_dir>/summary.json``.
    ``quiet``: no progress lines (the console's level ``warning``)."""
    return RunLoop(cfg, run_dir, log_level=console_level("info", quiet)).run(address)
