"""The keys of a training checkpoint's state dict. Every checkpoint on disk holds these strings:
changing one makes every earlier checkpoint unreadable.

A training checkpoint (the learner's snapshot, :meth:`rl_system.actors.learner.Learner.save_checkpoint`, with
the run loop's sections) is::

    {LEARNER: {MODEL, OPTIMIZER, VERSION, ENV_STEPS, SKIPPED_UPDATES, LR_SCALE, RNG},
     DRIVER: {..., ENV_STEPS, ...},  # the run loop's counters (rl_system.run.state.snapshot)
     WORKERS: [per worker env/RNG state] or None, CONFIG: the resolved config tree,
     SELFPLAY: the self-play pool (only when self-play is on)}
"""

from __future__ import annotations

# -- top-level sections ------------------------------------------------------------------------
LEARNER = "learner"
"""The learner's state (:meth:`rl_system.actors.learner.Learner.state`)."""
DRIVER = "driver"
"""The run loop's counters, return window, reseeds and rollbacks (:func:`rl_system.run.state.snapshot`)."""
WORKERS = "workers"
"""Each rollout worker's env and RNG state (None when not captured: the resume starts episodes afresh)."""
CONFIG = "config"
"""The run's resolved config as a plain tree (``RunConfig.model_dump()``)."""
SELFPLAY = "selfplay"
"""The self-play snapshot pool; absent in runs without self-play."""

# -- the learner section -----------------------------------------------------------------------
MODEL = "model"
"""The policy's ``state_dict`` (weights and normaliser buffers)."""
OPTIMIZER = "optimizer"
"""The trainer's ``state_dict`` (optimiser moments, its own normalisers)."""
VERSION = "version"
"""The policy version the learner had reached."""
ENV_STEPS = "env_steps"
"""Env steps trained on (the learner section) or collected (the driver section)."""
SKIPPED_UPDATES = "skipped_updates"
"""Minibatch steps skipped for non-finite losses or gradients, over the run."""
LR_SCALE = "lr_scale"
"""The learning-rate scale left by rollbacks on collapse (absent in older checkpoints: 1)."""
RNG = "rng"
"""torch, Python and NumPy RNG states (:func:`rl_system.checkpoint.format.capture_rng_state`)."""
