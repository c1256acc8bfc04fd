"""A2C's settings, the ``a2c:`` section. The defaults are Stable-Baselines3's ``A2C``'s."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rl_system.config.base import Strict


class A2CConfig(Strict):
    lr: float = Field(7e-4, gt=0)
    """Learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 at ``max_env_steps`` (SB3's ``lin_<lr>`` schedules)."""
    gamma: float = Field(0.99, gt=0, le=1)
    """Discount."""
    gae_lambda: float = Field(1.0, ge=0, le=1)
    """1: n-step returns over the rollout, bootstrapped from the value after it; below 1, GAE."""
    ent_coef: float = Field(0.0, ge=0)
    """Entropy bonus."""
    vf_coef: float = Field(0.5, ge=0)
    """Weight of the value loss, the mean squared error."""
    max_grad_norm: float = Field(0.5, gt=0)
    """Global gradient-norm clip."""
    normalize_advantage: bool = False
    """Normalise the round's advantages (over a learner group's whole batch)."""
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """``rmsprop`` (torch's, ``alpha`` below) or ``adam``."""
    rms_prop_alpha: float = Field(0.99, gt=0, lt=1)
    """RMSprop's smoothing constant (torch's ``alpha``)."""
    eps: float = Field(1e-5, gt=0)
    """The optimiser's epsilon (SB3's ``rms_prop_eps``)."""
