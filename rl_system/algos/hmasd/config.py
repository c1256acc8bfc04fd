"""HMASD's settings: the ``hmasd:`` config section (:class:`HMASDConfig`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rl_system.config.base import Strict


class HMASDConfig(Strict):
    """HMASD hyperparameters (``algo: hmasd``). Names follow the paper (Yang et al., NeurIPS 2023,
    §3.2 and Appendix E); per-scenario values (its Table 3) live in the launch configs, e.g.
    ``launch/configs/alice_bob_hmasd.yaml``. See :mod:`rl_system.algos.hmasd`."""

    hierarchy: bool = True
    """False: flat recurrent MAPPO (no coordinator, no skills, no intrinsic rewards; ``lambda_e`` = 1), same code
    path."""
    skill_interval: int = Field(25, gt=0)
    """k: the coordinator assigns new skills every k env steps (keep ``rollout_len`` a multiple of it)."""
    n_team_skills: int = Field(3, ge=1)
    """n_Z: number of discrete team skills Z."""
    n_agent_skills: int = Field(3, ge=1)
    """n_z: number of discrete individual skills z_i."""

    # -- rewards -----------------------------------------------------------------------------
    lambda_e: float = Field(1.0, ge=0)
    """Weight of the team (extrinsic) reward in the low-level reward (1 when hierarchy is off)."""
    lambda_D: float = Field(0.1, ge=0)
    """Weight of log q_D(Z | s_{t+1}) in the low-level reward."""
    lambda_d: float = Field(0.5, ge=0)
    """Weight of log q_d(z_i | o_{i,t+1}, Z) in the low-level reward."""
    logq_floor: bool = False
    """Clamp log q_D and log q_d in the low-level reward from below at chance, log(1/n_Z) and
    log(1/n_z) (not in the paper): a skill entering a view its siblings own is then paid as
    where no skill can be told apart, not punished. The discriminators' losses are unchanged."""
    novelty_coef: float = Field(0.0, ge=0)
    """Weight of a random-network-distillation novelty bonus on o_{i,t+1} in the low-level reward
    (not in the paper; 0 = off): the predictor's error, scaled by ``novelty_norm``
    (:mod:`rl_system.algos.hmasd.novelty`). Works with ``hierarchy: false`` too."""
    novelty_norm: Literal["round", "initial"] = "round"
    """What the novelty error is divided by: ``round``, the round's mean error (the bonus keeps mean
    1), or ``initial``, the first round's (the bonus fades as the map becomes familiar)."""
    novelty_gate: Literal["none", "success"] = "none"
    """``success``: the bonus's weight is ``novelty_coef * (1 - p)``, ``p`` the share of the round's
    finished episodes that terminated on a positive team reward: explore until the task is solved."""
    lambda_h: float = Field(0.001, ge=0)
    """Entropy bonus of the skill coordinator (high level)."""
    lambda_h_gate: Literal["none", "success"] = "none"
    """``success``: the coordinator's entropy bonus is ``lambda_h * (1 - p)``, ``p`` the round's
    success share as for ``novelty_gate`` (not in the paper). The bonus helps the plan form while
    the task is unsolved; once every window succeeds, the high-level advantages are noise and the
    bonus alone carries the team-skill choice to uniform (docs/hmasd.md, "Why solved runs hold")."""
    lambda_l: float = Field(0.01, ge=0)
    """Entropy bonus of the skill discoverer's actor (low level)."""
    lambda_l_gate: Literal["none", "success"] = "none"
    """``success``: the actor's entropy bonus is ``lambda_l * (1 - p)``, ``p`` the round's success
    share as for ``lambda_h_gate`` (not in the paper): once the task is solved the bonus no longer
    pulls the agents' actions back toward uniform; it returns as soon as episodes fail."""
    gate_floor: float = Field(0.0, ge=0, le=1)
    """The share of ``lambda_h`` / ``lambda_l`` a gate keeps once every episode succeeds: the
    gated bonus is ``lambda * max(1 - p, gate_floor)``. At 0 a solved run's entropies fall toward 0
    and one update can flip the near-deterministic policies (docs/hmasd.md, "Why solved runs hold")."""

    # -- PPO, shared by both levels ------------------------------------------------------------
    lr: float = Field(5e-4, gt=0)
    """Adam learning rate (one optimiser for all networks)."""
    anneal_lr: bool = False
    """Anneal it linearly to 0 at ``max_env_steps``."""
    gamma: float = Field(0.99, gt=0, le=1)
    """Low-level discount per env step."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    """Low-level GAE λ."""
    high_gamma: float = Field(0.99, gt=0, le=1)
    """High-level discount per skill window (one high-level step = one window)."""
    high_gae_lambda: float = Field(0.95, ge=0, le=1)
    """High-level GAE λ."""
    num_epochs: int = Field(5, gt=0)
    """Passes over each round's batch."""
    num_minibatches: int = Field(1, gt=0)
    """Minibatches of chunks (low level, discriminators) and of skill windows (high level)."""
    chunk_len: int = Field(10, gt=0)
    """Recurrent training (MAPPO-style): rollouts are cut into chunks of this many steps, each
    trained by BPTT from the hidden state entering it (recomputed by the learner from the shipped
    initial hiddens with the same weights that sampled). Rounded down to a divisor of rollout_len."""
    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range (both levels)."""
    high_target_kl: float | None = Field(None, gt=0)
    """A hard bound on the coordinator's approximate KL to the policy that sampled the round (not
    in the paper; ``null``: off): a step that takes it past the bound is shrunk along its direction
    (halved up to 6 times) until it is inside; only a step no shrink brings back is undone, and the
    coordinator then sits out the rest of the round's epochs; the low level and discriminators go
    on (:mod:`rl_system.algos.hmasd.trust`). Logged as ``train/high_steps_kept``,
    ``train/high_step_halvings`` and ``train/high_kl_reverted``."""
    value_clip: float | None = Field(0.2, gt=0)
    """Clip range of the value loss (in normalised units with ``value_norm``); ``null``: unclipped."""
    huber_delta: float | None = Field(None, gt=0)
    """The value loss as a Huber loss with this delta (the HMASD and MAPPO papers: 10); ``null``: half the squared
    error."""
    vf_coef: float = Field(1.0, ge=0)
    """Value loss weight."""
    disc_coef: float = Field(1.0, ge=0)
    """Weight of the discriminators' cross-entropy losses in the total loss."""
    max_grad_norm: float = Field(10.0, gt=0)
    """Gradient-norm clip, applied to each network group separately (coordinator, actor,
    critic, discriminators)."""
    norm_adv: bool = True
    """Normalise the low level's advantages over the batch."""
    high_norm_adv: bool = False
    """Normalise the coordinator's advantages too. Off by default: while no team reward has been
    seen, the high-level advantages are pure value noise, and scaling them to unit variance makes
    the coordinator random-walk into a few skills (entropy collapse) before any reward exists."""
    value_norm: bool = True
    """MAPPO-style running normalisation of value targets (one normaliser per level)."""

    # -- networks ------------------------------------------------------------------------------
    disc_ignore: list[list[int]] = Field(default_factory=list)
    """Feature ranges ``[start, end)`` of the per-agent observation that ``q_d(z_i | o_i, Z)`` does
    not see (the actor and critics still do). Empty (the paper): q_d sees all of ``o_i``. A
    *discriminator prior* in the sense of DIAYN's x-y prior: skills can then only be told apart by
    the features left, e.g. the objects in view rather than the wall pattern (docs/hmasd.md). Each
    entry ``[start, end]`` with 0 <= start < end."""
    hidden: int = Field(64, gt=0)
    """Width of the skill discoverer (MLP -> GRU -> MLP) and of the discriminators."""
    coord_dim: int = Field(64, gt=0)
    """Embedding width of the coordinator's transformer (divisible by ``coord_heads``)."""
    coord_heads: int = Field(2, gt=0)
    """Attention heads of the coordinator."""
    coord_layers: int = Field(1, gt=0)
    """Blocks in the coordinator's encoder and in its decoder."""

    @model_validator(mode="after")
    def _check(self) -> "HMASDConfig":
        for rng in self.disc_ignore:  # lists, not tuples: the run's config.yaml is a safe_dump
            if len(rng) != 2 or not 0 <= rng[0] < rng[1]:
                raise ValueError(f"disc_ignore entry {rng} must be [start, end] with 0 <= start < end")
        if self.coord_dim % self.coord_heads:
            raise ValueError(f"coord_dim ({self.coord_dim}) must be divisible by coord_heads ({self.coord_heads})")
        return self
