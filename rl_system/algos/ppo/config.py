"""PPO's settings: the ``ppo:`` section (:class:`PPOConfig`) and the actor-critic network's
``model:`` section (:class:`ModelConfig`, with per-key :class:`EncoderConfig`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from rl_system.config.base import Strict


class PPOConfig(Strict):
    lr: float = Field(2.5e-3, gt=0)
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 at ``max_env_steps``."""
    gamma: float = Field(0.99, gt=0, le=1)
    """Discount."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE λ."""
    num_epochs: int = Field(4, gt=0)
    """Passes over each round's batch."""
    num_minibatches: int = Field(4, gt=0)
    """Minibatches per epoch (slices of one shuffled batch)."""
    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range (and value clip range with ``clip_vloss``)."""
    clip_vloss: bool = True
    """Clip the value loss around the old value."""
    ent_coef: float = Field(0.0, ge=0)
    """Entropy bonus weight."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss weight."""
    max_grad_norm: float = Field(0.5, gt=0)
    """Global gradient-norm clip."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    target_kl: float | None = Field(None, gt=0)
    """Stop the epochs early when a minibatch's approximate KL exceeds this."""
    normalize_reward: bool = False
    """Divide rewards by the running std of the discounted return (SB3 ``VecNormalize`` reward scaling); the statistics
    are the learner's and are saved in its checkpoints."""
    reward_clip: float = Field(10.0, gt=0)
    """With ``normalize_reward``: scaled rewards are clipped to ``[-reward_clip, reward_clip]``."""
    burn_in: int = Field(0, ge=0)
    """Recurrent models: the first ``burn_in`` steps of every rollout only warm the recurrent
    state (no loss on them); must be below ``workers.rollout_len``."""
    value_target: Literal["gae", "vtrace"] = "gae"
    """What the critic regresses on. ``gae``: advantage + value (CleanRL's). ``vtrace``: V-trace's
    importance-weighted targets (Espeholt et al. 2018, IMPALA), for rollouts sampled by an older
    policy version (``max_policy_lag >= 1``): the TD errors are weighted by
    ``min(vtrace_rho_bar, pi/mu)`` and traced back with ``gae_lambda * min(vtrace_c_bar, pi/mu)``,
    ``pi`` the learner's policy at the start of the update and ``mu`` the one that sampled. The
    policy's advantages stay GAE's; its ratio is taken against ``ratio_anchor``'s log-probabilities.
    ``train/vtrace_rho_mean`` and ``train/vtrace_rho_clipped`` report the weights. PPO only."""
    vtrace_rho_bar: float = Field(1.0, gt=0)
    """V-trace's truncation of the importance weights on the TD errors."""
    vtrace_c_bar: float = Field(1.0, gt=0)
    """V-trace's truncation of the importance weights on the traces."""
    ratio_anchor: Literal["behaviour", "proximal"] = "behaviour"
    """What the clipped ratio is taken against. ``behaviour``: the policy that sampled the rollout
    (``mu``; CleanRL's PPO). ``proximal``: the learner's policy at the start of the update (``pi``),
    the decoupled objective of Hilton et al. 2022 ("Batch size-invariance for policy
    optimization"): each row's clipped surrogate of ``pi_theta / pi`` is weighted by the importance
    weight ``pi / mu``, truncated at ``proximal_rho_bar``. With ``max_policy_lag >= 1`` the
    rollouts are one version old; this keeps every update's trust region around the policy it
    starts from, so a lagged round moves the policy as far as an on-policy one.
    ``train/proximal_rho_mean`` and ``train/proximal_rho_clipped`` report the weights. PPO only."""
    proximal_rho_bar: float | None = Field(2.0, gt=0)
    """With ``ratio_anchor: proximal``: the importance weights ``pi / mu`` are truncated at this
    (``null``: not truncated)."""


class EncoderConfig(Strict):
    """How one observation key is encoded (:mod:`rl_system.algos.ppo.encoders`)."""

    type: Literal["auto", "flat", "onehot", "nature", "impala", "conv", "scan"] = "auto"
    layout: Literal["auto", "chw", "hwc"] = "auto"
    """Axis order of an image/scan entry; ``auto`` guesses channels-last when the last axis is the
    shortest."""
    channels: list[int] | None = Field(None, min_length=1)
    """Conv channels per layer (per IMPALA stage); default per type."""
    kernels: list[int | list[int]] | None = Field(None, min_length=1)
    strides: list[int | list[int]] | None = Field(None, min_length=1)
    features: int | None = Field(None, gt=0)
    """Width of the encoder's output (its last linear layer)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"type": data} if isinstance(data, str) else data


class ModelConfig(Strict):
    network: str | None = None
    """A user-defined network ``"package.module:Class"`` (``algo: ppo``) implementing
    :class:`rl_system.algos.protocols.ActorCriticNetwork`, built as
    ``Class(obs_spec, action_spec, model_cfg)`` ([byo_env.md](byo_env.md#a-network-of-your-own));
    ``null``: the built-in MLP actor-critic, configured by the keys below."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Free-form settings for a user-defined network (it reads ``model_cfg.kwargs``)."""
    hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    """The actor's and the critic's MLP layers after the encoders (and the recurrent core); ``[]``
    gives linear heads (CleanRL's Atari agent on the Nature CNN)."""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    """``tanh``, ``relu`` or ``elu``."""
    normalize_obs: bool = False
    """Running mean/std normalisation of observations, updated by the learner and shipped with the weights."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian head (continuous actions)."""
    ortho_init: bool = True
    """Orthogonal init (gain √2, 0.01 on the actor head, 1 on the critic head); false keeps torch's default init (SB3's
    ``ortho_init=False``)."""
    encoders: dict[str, EncoderConfig] = Field(default_factory=dict)
    """Per observation key, its encoder: ``flat``, ``onehot``, ``nature``, ``impala``, ``conv`` or ``scan``, or a
    mapping ``{type, layout, channels, kernels, strides, features}``; keys not named get the default for their spec
    ([ppo.md](ppo.md#encoders))."""
    share_encoder: bool = True
    """Actor and critic share the conv encoders (and the recurrent core); false gives the critic
    its own."""
    recurrent: Literal["none", "gru", "lstm"] = "none"
    """``gru`` or ``lstm``: recurrent PPO, a core between the encoders and the heads (single-agent
    envs; multi-agent: ``mappo.recurrent``): the worker carries each env's state across rollouts,
    the learner replays whole rollouts (BPTT) ([ppo.md](ppo.md#recurrent-ppo))."""
    recurrent_size: int = Field(128, gt=0)
    """Hidden units of the recurrent core."""

    @model_validator(mode="after")
    def _positive_sizes(self) -> "ModelConfig":
        if any(h <= 0 for h in self.hidden_sizes):
            raise ValueError("hidden_sizes must be a list of positive ints ([] for linear heads)")
        return self
