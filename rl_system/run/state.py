"""What a checkpoint keeps of the run loop, and the two ways a run comes back from one:
``--resume`` of a stopped run (:func:`resume`) and the rebuild of a learner that died inside a
running one (:func:`rebuild_learner`)."""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from rl_system.actors.learner_group import LearnerGroup
from rl_system.actors.placement import StartupError, wait_for_actors
from rl_system.checkpoint import keys
from rl_system.errors import TrainingError, one_line
from rl_system.run.context import RunContext


def snapshot(ctx: RunContext, elapsed: float) -> dict[str, Any]:
    """The run loop's part of a checkpoint (its ``driver`` section): counters, the return window,
    reseeds and rollbacks, the clock. Of its keys only the env steps are read elsewhere (Tune
    trials, bench), hence that one constant (:mod:`rl_system.checkpoint.keys`)."""
    st = ctx.stats
    return {"rounds": st.rounds, keys.ENV_STEPS: st.env_steps, "dropped": ctx.gate.dropped,
            "worker_failures": st.worker_failures, "worker_restarts": st.worker_restarts,
            "learner_restarts": st.learner_restarts, "best_return": st.best_return,
            "time_to_target_s": st.time_to_target_s, "steps_to_target": st.steps_to_target, "elapsed_s": elapsed,
            "attempt_best_return": st.attempt_best_return, "reseeds": st.reseeds, "rollbacks": st.rollbacks,
            "returns": list(ctx.window.returns), "lengths": list(ctx.window.lengths),
            "episodes": ctx.window.episodes,
            "outcomes": {k: list(v) for k, v in ctx.window.outcomes.items()}}


def resume(ctx: RunContext, state: dict[str, Any]) -> None:
    """Continue from a checkpoint (``--resume``): learner weights/optimizer/RNG, counters, workers."""
    loads = ctx.learner.on_all("load_state", state[keys.LEARNER])
    ctx.learner.wait(loads)
    ctx.publish_policy(int(state[keys.LEARNER][keys.VERSION]), loads[0])
    d, st = state[keys.DRIVER], ctx.stats
    ctx.gate.dropped = d["dropped"]
    st.worker_failures, st.worker_restarts = d["worker_failures"], d["worker_restarts"]
    st.learner_restarts = d.get("learner_restarts", 0)
    st.elapsed_before_resume = d["elapsed_s"]
    restore_progress(ctx, d)
    if state.get(keys.SELFPLAY) is not None:
        ctx.pool.load_state(state[keys.SELFPLAY])
        ctx.pool.refresh(ctx.workers)
    workers = state.get(keys.WORKERS)
    if workers and len(workers) == len(ctx.workers):
        ray.get([w.set_state.remote(s) for w, s in zip(ctx.workers, workers)])
    else:
        ctx.log.warn("resume: worker/env state not in the checkpoint; episodes start afresh")
    ctx.log.line(f"resumed at round {st.rounds}, policy version {ctx.version}, {st.env_steps:,} env steps")


def restore_progress(ctx: RunContext, d: dict[str, Any] | None) -> None:
    """The run's progress as a checkpoint's ``driver`` section recorded it (None: a run that
    has not started): rounds, env steps, best and target figures, reseeds, the return window.
    Failure counters and the clock are not progress and stay as they are."""
    st, d = ctx.stats, d or {}
    st.rounds, st.env_steps = d.get("rounds", 0), d.get(keys.ENV_STEPS, 0)
    st.best_return = d.get("best_return", float("-inf"))
    st.time_to_target_s, st.steps_to_target = d.get("time_to_target_s"), d.get("steps_to_target")
    # (checkpoints from before reseeds existed: one attempt so far, its best is the run's;
    # "restarts" is the key older checkpoints used for reseeds)
    st.attempt_best_return = d.get("attempt_best_return", st.best_return)
    st.reseeds = d.get("reseeds", d.get("restarts", []))
    st.rollbacks = list(d.get("rollbacks", []))
    ctx.restart_window(d.get("returns", []), d.get("lengths", []), d.get("episodes", 0), d.get("outcomes"))


def rebuild_learner(ctx: RunContext, err: Exception) -> None:
    """Rebuild a dead learner from the newest valid checkpoint (or from scratch if none was
    written yet), up to ``learner.max_restarts`` times. The run's counters, return window and
    policy go back to that checkpoint, so at most ``checkpoint.every_rounds`` rounds of work
    are lost; the version still goes up, so every worker loads the restored weights."""
    st, limit = ctx.stats, ctx.cfg.learner.max_restarts
    if st.learner_restarts >= limit:
        raise TrainingError(f"the learner died ({one_line(err)}); learner.max_restarts ({limit}) used up") from None
    st.learner_restarts += 1
    ctx.log.warn(f"the learner died ({one_line(err)}); rebuilding it from the newest checkpoint "
                  f"(learner restart {st.learner_restarts} of {limit})")
    ctx.log.detail(str(err))
    ctx.learner.kill()  # a learner group goes as a whole: its peers' collectives are broken
    ctx.storage.flush(None)  # what the checkpointer still holds of the dead learner's saves
    state = ctx.storage.newest_checkpoint()
    ctx.learner = LearnerGroup(ctx.cfg, ctx.specs, f"learner-r{st.learner_restarts}", ctx.scope)
    try:
        wait_for_actors(ctx.learner.start_refs(), ctx.cfg.startup_timeout_s, ctx.log.line)
        ctx.learner.form()
        restores = ctx.learner.on_all("restore", state[keys.LEARNER] if state else None, ctx.version + 1)
        ctx.learner.wait(restores)
    except (StartupError, RayActorError, RayTaskError) as start_err:
        ctx.log.detail(getattr(start_err, "detail", "") or str(start_err))
        raise TrainingError(f"the learner could not be rebuilt: {one_line(start_err)}") from None
    ctx.publish_policy(ray.get(ctx.learner.lead.get_version.remote()), restores[0])
    ctx.place_learner()
    if state is not None:
        restore_progress(ctx, state[keys.DRIVER])
        where = f"its checkpoint of round {st.rounds}"
    else:
        restore_progress(ctx, None)
        where = "scratch (no checkpoint yet)"
    ctx.log.warn(f"learner rebuilt from {where}; policy version {ctx.version}, {st.env_steps:,} env steps")
