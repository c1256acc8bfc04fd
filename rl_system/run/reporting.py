"""What a run reports, and where: the per-round TensorBoard scalars, the live status (Ray metrics
and ``rl-system status``) and ``summary.json``. The books they are read from (:class:`RunStats`,
the return window, the gate) are the run's context, :mod:`.context`.

TensorBoard tags are grouped the way people scan them:

* ``rollout/`` -- what the policy achieves: 100-episode mean return and length, the rate of each
  boolean episode outcome the env reports (``rollout/success_rate``, ``rollout/win_rate``);
* ``train/`` -- the trainer's own metrics (losses, entropy, KL, clip fraction, learning rate,
  explained variance; HMASD's per-level and discriminator metrics);
* ``system/`` -- throughput and health: steps/s, sample/decode/update seconds, payload bytes,
  policy lag, dropped rollouts, worker failures and restarts, checkpoints, reseeds on stall,
  self-play pool.
"""

from __future__ import annotations

import math
from typing import Any

from rl_system.actors.learner import UpdateResult
from rl_system.errors import one_line
from rl_system.observe.metrics import (
    ARCHIVER_RESTARTS,
    BYTES_SHIPPED,
    CHECKPOINT_SAVE_S,
    CHECKPOINTER_RESTARTS,
    COMPRESSION_RATIO,
    ENV_STEPS,
    LEARNER_RESTARTS,
    NUM_WORKERS,
    POLICY_LAG_MEAN,
    POLICY_VERSION,
    RESEEDS,
    RETURN_MEAN,
    ROLLBACKS,
    ROLLOUT,
    ROLLOUTS_DROPPED,
    ROUND,
    RUN_STATE,
    STEPS_PER_S,
    SYSTEM,
    TRAIN,
    WORKER_RESTARTS,
    WORKERS_ALIVE,
)
from rl_system.rollout.contract import RolloutMeta
from rl_system.run.context import RunContext
from rl_system.run.summary import CheckpointTally, CpuSeconds, RunPlacement, RunSummary, TimeBreakdown


def round_scalars(ctx: RunContext, result: UpdateResult, metas: list[RolloutMeta],
                  elapsed: float) -> dict[str, dict[str, float]]:
    """One round's scalars by TensorBoard group (:data:`ROLLOUT`, :data:`TRAIN`, :data:`SYSTEM`: the
    tag prefixes)."""
    st, window = ctx.stats, ctx.window
    rollout = {RETURN_MEAN: window.mean, "episode_length_mean": window.mean_length,
               **window.outcome_scalars}
    system = {STEPS_PER_S: st.env_steps / max(elapsed, 1e-9), "dropped_rollouts": ctx.gate.dropped,
              "worker_failures": st.worker_failures, WORKER_RESTARTS: st.worker_restarts,
              LEARNER_RESTARTS: st.learner_restarts, **_storage_restarts(ctx),
              POLICY_LAG_MEAN: ctx.gate.mean_lag, POLICY_VERSION: result.version,
              "sample_s": max(m.sample_s for m in metas), "payload_bytes": sum(m.payload_bytes for m in metas),
              **result.system}
    if ctx.cfg.selfplay.enabled:
        system["selfplay_opponent_version_mean"] = sum(m.opponent_version for m in metas) / len(metas)
        system["selfplay_pool_size"] = len(ctx.pool.snapshots)
    return {ROLLOUT: rollout, TRAIN: result.train, SYSTEM: system}


def status(ctx: RunContext, state: str, elapsed: float) -> dict[str, Any]:
    """The live status published to Ray metrics and the status actor (``rl-system status``)."""
    st = ctx.stats
    return {
        RUN_STATE: state, ROUND: st.rounds, ENV_STEPS: st.env_steps,
        STEPS_PER_S: st.env_steps / max(elapsed, 1e-9), POLICY_VERSION: ctx.version,
        RETURN_MEAN: ctx.window.mean, POLICY_LAG_MEAN: ctx.gate.mean_lag,
        WORKERS_ALIVE: len(ctx.workers), NUM_WORKERS: ctx.cfg.workers.num_workers,
        ROLLOUTS_DROPPED: ctx.gate.dropped, WORKER_RESTARTS: st.worker_restarts,
        LEARNER_RESTARTS: st.learner_restarts, **_storage_restarts(ctx),
        RESEEDS: len(st.reseeds), ROLLBACKS: len(st.rollbacks), BYTES_SHIPPED: st.bytes_shipped,
        COMPRESSION_RATIO: st.bytes_raw / st.bytes_shipped if st.bytes_shipped else None,
        CHECKPOINT_SAVE_S: ctx.storage.checkpoint_stats.get("last_save_s") if ctx.storage else None,
    }


def summary(ctx: RunContext, wall: float, startup_s: float, state: str,
            error: BaseException | None = None) -> RunSummary:
    """``summary.json``: the run's outcome and where its time went."""
    cfg, st, window, storage = ctx.cfg, ctx.stats, ctx.window, ctx.storage
    placement = ctx.placement or []
    return RunSummary(
        status=state,
        error=one_line(error) if error is not None else None,
        checkpoints=_checkpoint_tally(ctx),
        env=cfg.env.name,
        algo=cfg.algo,
        seed=cfg.seed,
        env_steps=st.env_steps,
        rounds=st.rounds,
        policy_version=ctx.version,
        wall_time_s=wall,
        startup_s=startup_s,
        steps_per_s=st.env_steps / wall if wall > 0 else 0.0,
        target_return=cfg.target_return,
        reached_target=st.time_to_target_s is not None,
        time_to_target_s=st.time_to_target_s,
        steps_to_target=st.steps_to_target,
        final_mean_return=window.mean if window.returns else None,
        best_mean_return=st.best_return if math.isfinite(st.best_return) else None,
        episodes=window.episodes,
        final_rates=window.rates,
        final_means=window.means,
        dropped_rollouts=ctx.gate.dropped,
        rollouts_per_worker=[st.rollouts_by_worker.get(w, 0) for w in range(cfg.workers.num_workers)],
        max_policy_lag_used=ctx.gate.max_lag_used,
        worker_failures=st.worker_failures,
        worker_restarts=st.worker_restarts,
        learner_restarts=st.learner_restarts,
        checkpointer_restarts=storage.checkpointer_restarts if storage else 0,
        archiver_restarts=storage.archiver_restarts if storage else 0,
        reseeds=st.reseeds,
        rollbacks=st.rollbacks,
        bytes_shipped=st.bytes_shipped,
        compression_ratio=st.bytes_raw / st.bytes_shipped if st.bytes_shipped else None,
        compression=sorted({p["compression"] for p in placement}),
        placement=RunPlacement(ctx.learner_node, ctx.learner_nodes, [p["node_id"] for p in placement]),
        num_learners=cfg.learner.num_learners,
        selfplay_pool_versions=[v for v, _ in ctx.pool.snapshots] if cfg.selfplay.enabled else None,
        archives_written=storage.archives_written if storage else 0,
        archives_skipped=storage.archives_skipped if storage else 0,
        time_breakdown_s=TimeBreakdown(gather=st.time_sample, update=st.time_update, rounds=st.time_round),
        phases_s=dict(ctx.clock.seconds),
        run_dir=str(ctx.run_dir),
        cpu_s=CpuSeconds(workers=st.cpu_workers, learner=st.cpu_learner, total=st.cpu_workers + st.cpu_learner),
    )


def _checkpoint_tally(ctx: RunContext) -> CheckpointTally:
    """The checkpointer's counts as far as seen (none before the storage actors started)."""
    ck = ctx.storage.checkpoint_stats if ctx.storage else {}
    return CheckpointTally(saved=ck.get("saved", 0), skipped=ck.get("skipped", 0), failed=ck.get("failed", 0),
                           last_error=ck.get("last_error"), last_path=ck.get("last_path"))


def _storage_restarts(ctx: RunContext) -> dict[str, int]:
    """Ray restarts of the checkpointer and the rollout archiver, as far as seen so far."""
    storage = ctx.storage
    return {CHECKPOINTER_RESTARTS: storage.checkpointer_restarts if storage else 0,
            ARCHIVER_RESTARTS: storage.archiver_restarts if storage else 0}
