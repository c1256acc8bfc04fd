"""Roll back on collapse (:class:`rl_system.config.RollbackConfig`): when a run loses what it had
learned, the learner goes back to the run's best checkpoint and trains on with a smaller step.

The check runs after every round, on the round loop's own figures: the full return window's mean
against the current attempt's best (``RunStats.attempt_best_return``; a reseed on stall begins a
new attempt). It reads no file until it fires, and a round where it does not fire changes
nothing, so a run in which it never fires is the run without it, step for step.

Where it goes back to is the checkpoint store's best (the highest mean return in a manifest,
what ``best.json`` names), read after the checkpoints requested so far are on storage. It must
belong to the current attempt and score at least ``drop`` above the collapsed window; else the
guard says why and waits for the next checkpoint before it looks again. The version still goes
up, so every worker loads the restored weights with its next sample. The envs are not reset:
the episodes that end in the next ``settle_rounds`` rounds stay out of the return window.
"""

from __future__ import annotations

from typing import Any

from rl_system.checkpoint import CheckpointError, CheckpointStore, keys
from rl_system.observe.metrics import ROLLBACKS, SYSTEM
from rl_system.run.collect import RolloutCollector
from rl_system.run.context import RunContext


def collapsed(ctx: RunContext) -> bool:
    """True when the full window's mean is ``rollback.drop`` or more below the attempt's best
    and a rollback is left (none while no checkpoint has been saved since the last refusal)."""
    cfg, st, window = ctx.cfg.rollback, ctx.stats, ctx.window
    if cfg.drop is None or len(st.rollbacks) >= cfg.max_rollbacks or not window.full:
        return False
    if st.rollback_refused_at is not None and ctx.storage.checkpoint_stats.get("saved", 0) == st.rollback_refused_at:
        return False
    return st.attempt_best_return - window.mean >= cfg.drop


def settling(ctx: RunContext) -> bool:
    """True in the ``rollback.settle_rounds`` rounds after the last rollback (this round counted)."""
    st = ctx.stats
    return bool(st.rollbacks) and st.rounds - st.rollbacks[-1]["round"] <= ctx.cfg.rollback.settle_rounds


def roll_back(ctx: RunContext, collector: RolloutCollector) -> bool:
    """Put the learner back on the best checkpoint with the next learning-rate scale; False (and
    a warning) when there is no checkpoint to go back to."""
    cfg, st = ctx.cfg.rollback, ctx.stats
    ctx.storage.flush(ctx.learner.lead)
    found = _best_checkpoint(ctx)
    if isinstance(found, str):
        st.rollback_refused_at = ctx.storage.checkpoint_stats.get("saved", 0)
        ctx.log.warn(f"rollback on collapse: mean return {ctx.window.mean:.3f}, "
                     f"{st.attempt_best_return - ctx.window.mean:.3f} below this attempt's best, but {found}; "
                     f"training goes on and the guard looks again after the next checkpoint")
        return False
    state, manifest, path = found
    scale = cfg.lr_scale ** (len(st.rollbacks) + 1)
    # Rollouts still in flight (max_policy_lag > 0) were sampled by the collapsed policy.
    collector.forget_in_flight()
    calls = ctx.learner.on_all("roll_back", state[keys.LEARNER], ctx.version + 1, scale)
    ctx.learner.wait(calls)
    ctx.publish_policy(ctx.learner.wait([ctx.learner.lead.get_version.remote()])[0], calls[0])
    st.rollbacks.append({"env_steps": st.env_steps, "round": st.rounds, "mean_return": ctx.window.mean,
                         "best_return": st.attempt_best_return, "to_env_steps": manifest["env_steps"],
                         "to_mean_return": manifest["mean_return"], "checkpoint": path, "lr_scale": scale})
    st.rollback_refused_at = None
    ctx.log.warn(f"rollback on collapse: mean return {ctx.window.mean:.3f} against this attempt's best "
                 f"{st.attempt_best_return:.3f} at {st.env_steps:,} env steps; back to the checkpoint of "
                 f"{manifest['env_steps']:,} env steps (mean return {manifest['mean_return']:.3f}) with the "
                 f"learning rate x{scale:g} (rollback {len(st.rollbacks)} of {cfg.max_rollbacks}; policy version "
                 f"{ctx.version}); the step budget carries on")
    ctx.log.scalars(st.env_steps, {ROLLBACKS: len(st.rollbacks)}, prefix=SYSTEM)
    ctx.window.clear()
    st.nonfinite_rounds = 0
    return True


def _best_checkpoint(ctx: RunContext) -> tuple[dict[str, Any], dict[str, Any], str] | str:
    """The store's best checkpoint ``(state, manifest, path)``, or why it cannot be gone back to."""
    cfg, st = ctx.cfg.rollback, ctx.stats
    try:
        state, manifest, path = CheckpointStore(ctx.storage.ckpt_root, clean=False).load_best()
    except CheckpointError as err:
        return f"no checkpoint to go back to ({err})"
    attempt_start = st.reseeds[-1]["env_steps"] if st.reseeds else 0
    if manifest["env_steps"] < attempt_start:
        return (f"the best checkpoint ({manifest['env_steps']:,} env steps) is from before the reseed at "
                f"{attempt_start:,}")
    if manifest["mean_return"] < ctx.window.mean + cfg.drop:
        return (f"the best checkpoint ({manifest['env_steps']:,} env steps) has mean return "
                f"{manifest['mean_return']:.3f}, not {cfg.drop} above the window")
    return state, manifest, path
