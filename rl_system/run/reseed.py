"""Reseed on stall (:class:`rl_system.config.ReseedConfig`): a run whose best full-window mean
return is still under ``reseed.below_return`` when it passes an ``at_env_steps`` entry starts over
from the next attempt's seed — learner and workers rebuilt, the step budget carried on."""

from __future__ import annotations

import math

from rl_system.config import attempt_seed
from rl_system.observe.metrics import RESEEDS, SYSTEM
from rl_system.run.collect import RolloutCollector
from rl_system.run.context import RunContext


def stalled(ctx: RunContext, steps_before: int) -> bool:
    """True when this round (from ``steps_before`` env steps to now) passed a
    ``reseed.at_env_steps`` entry and the current attempt's best full-window mean return is
    still under ``reseed.below_return`` (and no target was reached). Only the round that
    passes an entry checks it, so a resumed run never fires a check it had already passed."""
    st = ctx.stats
    due = any(steps_before < s <= st.env_steps for s in ctx.cfg.reseed.at_env_steps)
    return due and st.steps_to_target is None and st.attempt_best_return < ctx.cfg.reseed.below_return


def reseed(ctx: RunContext, collector: RolloutCollector) -> None:
    """Rebuild learner and workers from the next attempt's seed; the budget carries on."""
    st, cfg = ctx.stats, ctx.cfg
    seed = attempt_seed(cfg.seed, len(st.reseeds) + 1)
    # Rollouts still in flight (max_policy_lag > 0) belong to the stalled attempt: forget them
    # (never trained on, so not counted as env steps).
    in_flight = collector.forget_in_flight()
    calls = [a.reseed.options(num_returns=2).remote(seed) for a in ctx.learner.actors]
    collector.call_each("reseed", seed)
    ctx.publish_policy(ctx.learner.wait([version for version, _ in calls])[0], calls[0][1])
    if cfg.selfplay.enabled:  # the pool's snapshots are the stalled attempt's policies
        ctx.restart_pool(seed)
        ctx.pool.refresh(ctx.workers)
    best = st.attempt_best_return if math.isfinite(st.attempt_best_return) else None
    st.reseeds.append({"env_steps": st.env_steps, "round": st.rounds, "best_return": best, "seed": seed})
    shown = "none (no full window)" if best is None else f"{best:.3f}"
    ctx.log.warn(f"reseed on stall: best mean return {shown} < {cfg.reseed.below_return} "
                 f"at {st.env_steps:,} env steps; starting over from seed {seed} "
                 f"(policy version {ctx.version}; {in_flight} in-flight rollouts dropped); the step budget "
                 f"carries on")
    ctx.log.scalars(st.env_steps, {RESEEDS: len(st.reseeds)}, prefix=SYSTEM)
    ctx.window.clear()
    st.attempt_best_return = float("-inf")
    st.nonfinite_rounds = 0
