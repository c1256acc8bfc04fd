"""Typed run configuration: YAML file + ``--set a.b=value`` overrides, validated by pydantic.

Every bad input becomes one :class:`ConfigError` line naming the key and what was expected,
e.g. ``config error: workers.num_envs: Input should be greater than 0 (got -3)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)


class ConfigError(ValueError):
    """A config problem, already phrased as one line for the user."""


class _Strict(BaseModel):
    # extra="forbid" turns a typo in a key into an error instead of a silently ignored setting.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _threads(value: Any) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError("expected a thread count >= 1 or 'auto'")


Threads = Annotated[Any, AfterValidator(_threads)]
"""Torch intra-op threads of an actor: a count, or ``auto`` (:func:`rl_system.device.resolve_threads`)."""


class EnvConfig(_Strict):
    name: str = "CartPole"
    """A registered env name (``CartPole``), an entry point ``package.module:Name``, ``gym:<Gymnasium id>``
    or ``envpool:<EnvPool id>``."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to the env constructor."""
    eval_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Overrides of ``kwargs`` wherever a trained policy is tested rather than trained
    (``rl-system eval`` and ``render``, the benches' test episodes): e.g. exploring starts in
    training, the task's own start in the test."""

    def test_kwargs(self) -> dict[str, Any]:
        """The env kwargs a policy is tested under: ``kwargs`` updated with ``eval_kwargs``."""
        return {**self.kwargs, **self.eval_kwargs}


class WorkersConfig(_Strict):
    num_workers: int = Field(2, ge=1)
    num_envs: int = Field(512, gt=0)
    """Envs per worker, stepped as one batch."""
    rollout_len: int = Field(16, gt=0)
    """T: steps per env per rollout; one rollout holds ``rollout_len * num_envs`` env steps."""
    num_cpus: float = Field(1.0, ge=0)
    num_gpus: float = Field(0.0, ge=0)
    """Fractional GPU share per worker (e.g. 0.25 puts four workers on one GPU)."""
    device: str = "auto"
    """``auto`` picks ``cuda`` when the actor was given a GPU, else ``cpu``."""
    torch_threads: Threads = 1
    """Torch intra-op threads; ``auto``: the CPUs the worker reserves (``num_cpus``, at least 1)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources each worker requires, e.g. ``{rollout_node: 1}`` to pin placement."""
    max_restarts: int = Field(3, ge=-1)
    """Ray restarts of a dead worker (-1: unlimited)."""
    wait_for: Literal["all", "any"] = "all"
    """What a round waits for. ``all``: one rollout from every worker (a seeded run repeats bit for
    bit, with or without ``max_policy_lag``). ``any``: the first ``num_workers`` rollouts from
    whichever workers deliver them, so a slow worker never holds a round back (its rollouts are
    trained on while the gate admits them; timing decides which, so runs do not repeat exactly);
    needs ``max_policy_lag >= 1``, or every late rollout would be dropped."""


class PPOConfig(_Strict):
    lr: float = Field(2.5e-3, gt=0)
    anneal_lr: bool = True
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    num_epochs: int = Field(4, gt=0)
    num_minibatches: int = Field(4, gt=0)
    clip_coef: float = Field(0.2, gt=0)
    clip_vloss: bool = True
    ent_coef: float = Field(0.0, ge=0)
    vf_coef: float = Field(0.5, ge=0)
    max_grad_norm: float = Field(0.5, gt=0)
    norm_adv: bool = True
    target_kl: float | None = Field(None, gt=0)
    """Stop the epoch loop early when the approximate KL exceeds this."""
    normalize_reward: bool = False
    """Divide rewards by a running std of the discounted return (SB3's ``VecNormalize``
    reward scaling), kept by the learner and saved with its checkpoints."""
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
    policy's advantages stay GAE's; its ratio is always taken against ``mu``'s log-probabilities."""
    vtrace_rho_bar: float = Field(1.0, gt=0)
    vtrace_c_bar: float = Field(1.0, gt=0)


class EncoderConfig(_Strict):
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


class ModelConfig(_Strict):
    network: str | None = None
    """A user-defined network ``"package.module:Class"`` (``algo: ppo``) implementing
    :class:`rl_system.algos.protocols.ActorCriticNetwork`, built as
    ``Class(obs_spec, action_spec, model_cfg)``; ``None``: the built-in MLP actor-critic."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Free-form settings for a user-defined network (it reads ``model_cfg.kwargs``)."""
    hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    """The actor's and the critic's MLP layers after the encoders (and the recurrent core); ``[]``
    gives linear heads (CleanRL's Atari agent on the Nature CNN)."""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    normalize_obs: bool = False
    """Running mean/std normalisation of observations, updated by the learner, shipped with weights."""
    init_log_std: float = 0.0
    """Initial log std of the Gaussian head (continuous actions)."""
    ortho_init: bool = True
    """Orthogonal weight init (gain sqrt(2), 0.01 on the actor head, 1 on the critic head); false
    keeps torch's default init."""
    encoders: dict[str, EncoderConfig] = Field(default_factory=dict)
    """Per observation key: ``{lidar: scan}``, ``{pixels: {type: impala, layout: hwc}}``. Keys not
    named get the default for their spec (a CNN for uint8/bool images, else flattened)."""
    share_encoder: bool = True
    """Actor and critic share the conv encoders (and the recurrent core); false gives the critic
    its own."""
    recurrent: Literal["none", "gru", "lstm"] = "none"
    """A recurrent core between the encoders and the heads (single-agent PPO): the worker carries
    each env's state across rollouts, the learner replays whole rollouts (BPTT)."""
    recurrent_size: int = Field(128, gt=0)

    @model_validator(mode="after")
    def _positive_sizes(self) -> "ModelConfig":
        if any(h <= 0 for h in self.hidden_sizes):
            raise ValueError("hidden_sizes must be a list of positive ints ([] for linear heads)")
        return self


class LearnerConfig(_Strict):
    num_cpus: float = Field(1.0, ge=0)
    num_gpus: float = Field(0.0, ge=0)
    device: str = "auto"
    torch_threads: Threads = 1
    """Torch intra-op threads; ``auto``: the CPUs the learner reserves (``num_cpus``, at least 1),
    so its threads and Ray's accounting agree (``learner.num_cpus: 2`` + ``auto``: two threads)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources the learner requires (e.g. the node with the big GPU)."""
    max_restarts: int = Field(3, ge=0)
    """Times a dead learner (group) is rebuilt inside the run from the newest valid checkpoint (at
    most ``checkpoint.every_rounds`` rounds of work are lost each time); beyond it the run fails."""
    num_learners: int = Field(1, ge=1)
    """Data-parallel learners (:mod:`rl_system.actors.learner_group`): each trains on its share of a
    round's rollouts and every minibatch step all-reduces the gradients, so all hold the same
    weights. Each learner gets ``num_cpus`` / ``num_gpus`` / ``resources``. 1: a single learner."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """``torch.distributed`` backend of a learner group: ``auto`` is NCCL for learners with a whole
    GPU each, gloo otherwise (CPU learners, GPU shares that may sit on one device)."""
    placement: Literal["pack", "spread"] = "pack"
    """A learner group's placement group: ``pack`` on as few nodes as fit (cheaper all-reduce),
    ``spread`` over nodes where it can."""
    collective_timeout_s: float = Field(300.0, gt=0)
    """How long a learner waits in a collective for its peers before it fails (a peer that died)."""
    compile: bool = False
    """Compile the PPO loss's forward and backward with ``torch.compile`` (inductor: fused C++/
    OpenMP kernels on CPU, Triton on GPU). The first update pays the compile (2-6 s on a 2-core VM,
    35 s for a GRU's unrolled sequence, less from the on-disk cache); each update after it is ~30% faster for small MLPs, where eager
    PyTorch spends most of a minibatch step dispatching ops (``bench/bench_update.py --compile``).
    Pays for runs of hundreds of updates (MuJoCo), not for CartPole's few seconds. A machine
    without a C++ compiler falls back to eager with one warning (``train/compiled`` 0)."""
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    """``bf16``: the update's forward and backward passes under ``torch.autocast`` to bfloat16
    (weights, optimiser state and the losses' reductions stay float32). Faster where the hardware
    multiplies bf16 natively and the update is arithmetic: GPUs with bf16 tensor cores, and CPUs
    with AVX-512 BF16 or AMX (MinAtar's CNN update 3.1x, HMASD's 1.9x on a 2-core Zen 4 VM,
    ``python -m bench.bench_kernels``; small MLPs get slower). It changes learning: MinAtar Breakout with bf16 reached 5.5-9.7 at 1M
    env steps where fp32 reached 13.8-18.0 (seeds 0-2), so no shipped config uses it.
    ``auto``: ``bf16`` where the learner's device has native bf16
    (:func:`rl_system.device.bf16_fast`), else ``fp32`` (``system/bf16`` says which)."""


class CheckpointConfig(_Strict):
    every_rounds: int = Field(20, ge=0)
    """Save every K rounds (0: only at the end of the run)."""
    keep_last: int = Field(3, ge=1)
    """Checkpoints kept besides the best by mean return."""
    dir: str | None = None
    """Local path or filesystem URI (e.g. ``s3://bucket/run``); default ``<run dir>/checkpoints``."""
    max_nonfinite_rounds: int = Field(3, ge=1)
    """Stop (with a checkpoint) after this many rounds in a row had non-finite losses/gradients."""
    max_restarts: int = Field(3, ge=0)
    """Ray restarts of a dead checkpointer or rollout archiver (each); a save that was in flight
    when it died is lost, every checkpoint it had written stays."""


class HMASDConfig(_Strict):
    """HMASD hyperparameters (``algo: hmasd``). Names follow the paper (Yang et al., NeurIPS 2023,
    §3.2 and Appendix E); per-scenario values (its Table 3) live in the launch configs, e.g.
    ``launch/configs/alice_bob_hmasd.yaml``. See :mod:`rl_system.algos.hmasd`."""

    hierarchy: bool = True
    """False: flat MAPPO (no coordinator, no skills, no intrinsic rewards), same code path."""
    skill_interval: int = Field(25, gt=0)
    """k: the coordinator assigns new skills every k env steps."""
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
    """What the novelty error is divided by: the round's mean error (the bonus keeps mean 1) or
    the first round's (the bonus fades as the map becomes familiar)."""
    novelty_gate: Literal["none", "success"] = "none"
    """``success``: the bonus's weight is ``novelty_coef * (1 - p)``, ``p`` the share of the round's
    finished episodes that terminated on a positive team reward: explore until the task is solved."""
    lambda_h: float = Field(0.001, ge=0)
    """Entropy bonus of the skill coordinator (high level)."""
    lambda_h_gate: Literal["none", "success"] = "none"
    """``success``: the coordinator's entropy bonus is ``lambda_h * (1 - p)``, ``p`` the round's
    success share as for ``novelty_gate`` (not in the paper). The bonus helps the plan form while
    the task is unsolved; once every window succeeds, the high-level advantages are noise and the
    bonus alone carries the team-skill choice to uniform (docs/hmasd.md, "Diagnosis")."""
    lambda_l: float = Field(0.01, ge=0)
    """Entropy bonus of the skill discoverer's actor (low level)."""
    lambda_l_gate: Literal["none", "success"] = "none"
    """``success``: the actor's entropy bonus is ``lambda_l * (1 - p)``, ``p`` the round's success
    share as for ``lambda_h_gate`` (not in the paper): once the task is solved the bonus no longer
    pulls the agents' actions back toward uniform; it returns as soon as episodes fail."""
    gate_floor: float = Field(0.0, ge=0, le=1)
    """The share of ``lambda_h`` / ``lambda_l`` a gate keeps once every episode succeeds: the
    gated bonus is ``lambda * max(1 - p, gate_floor)``. At 0 a solved run's entropies fall toward 0
    and one update can flip the near-deterministic policies (docs/hmasd.md, "Diagnosis")."""

    # -- PPO, shared by both levels ------------------------------------------------------------
    lr: float = Field(5e-4, gt=0)
    anneal_lr: bool = False
    gamma: float = Field(0.99, gt=0, le=1)
    """Low-level discount per env step."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    high_gamma: float = Field(0.99, gt=0, le=1)
    """High-level discount per skill window (one high-level step = one window)."""
    high_gae_lambda: float = Field(0.95, ge=0, le=1)
    num_epochs: int = Field(5, gt=0)
    num_minibatches: int = Field(1, gt=0)
    """Minibatches of chunks (low level, discriminators) and of skill windows (high level)."""
    chunk_len: int = Field(10, gt=0)
    """Recurrent training (MAPPO-style): rollouts are cut into chunks of this many steps, each
    trained by BPTT from the hidden state entering it (recomputed by the learner from the shipped
    initial hiddens with the same weights that sampled). Rounded down to a divisor of rollout_len."""
    clip_coef: float = Field(0.2, gt=0)
    high_target_kl: float | None = Field(None, gt=0)
    """A hard bound on the coordinator's approximate KL to the policy that sampled the round (not
    in the paper; None: off): a step that takes it past the bound is shrunk along its direction
    (halved up to 6 times) until it is inside; only a step no shrink brings back is undone, and the
    coordinator then sits out the rest of the round's epochs; the low level and discriminators go
    on (:mod:`rl_system.algos.hmasd.trust`). Logged as ``train/high_steps_kept``,
    ``train/high_step_halvings`` and ``train/high_kl_reverted``."""
    value_clip: float | None = Field(0.2, gt=0)
    """Clip range of the value loss (in normalised units with value_norm); None: unclipped."""
    vf_coef: float = Field(1.0, ge=0)
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
    the features left, e.g. the objects in view rather than the wall pattern (docs/hmasd.md)."""
    hidden: int = Field(64, gt=0)
    """Width of the skill discoverer (MLP -> GRU -> MLP) and of the discriminators."""
    coord_dim: int = Field(64, gt=0)
    """Embedding width of the skill coordinator's transformer."""
    coord_heads: int = Field(2, gt=0)
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


class SelfPlayConfig(_Strict):
    """Self-play for two-player envs whose opponent is pluggable (``env.set_opponent``)."""

    enabled: bool = False
    refresh_every: int = Field(10, gt=0)
    """Every K rounds: add the current policy to the pool and re-pick each worker's opponent."""
    pool_size: int = Field(8, gt=0)
    """Snapshots kept (the newest ones)."""
    latest_prob: float = Field(0.5, ge=0, le=1)
    """Probability that a worker's opponent is the newest snapshot (else uniform over the pool)."""
    scripted_prob: float = Field(0.2, ge=0, le=1)
    """Probability that a worker plays the env's scripted opponent instead of a snapshot."""


class ReseedConfig(_Strict):
    """Reseed on stall: start a stalled run over from a fresh seed inside its own step budget.

    At each of ``at_env_steps``, if the current attempt's best mean return over a full
    ``return_window`` is still below ``below_return`` (none full yet counts as below) and no
    target was reached, the learner and every worker rebuild their networks, optimisers, envs and
    samplers from a fresh seed derived from ``seed`` (:func:`attempt_seed`). The env-step counter
    and budget go on, so every step of every attempt counts; an ``anneal_lr`` schedule follows the
    run's budget, not the attempt's. A check that falls in the run's last round does nothing.
    Meant for sparse-reward tasks where a seed can settle early into a dead end that more training
    does not leave: HMASD on Alice_and_Bob, whose skills sometimes never cover a button
    (docs/hmasd.md, "Reseed on stall"). Empty list (the default): never. ("Restart" is kept for a
    Ray actor restart, which is another thing.)"""

    at_env_steps: list[int] = Field(default_factory=list)
    below_return: float = 0.0

    @model_validator(mode="after")
    def _check(self) -> "ReseedConfig":
        steps = self.at_env_steps
        if any(s <= 0 for s in steps) or any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"at_env_steps {steps} must be positive and strictly increasing")
        return self


class RollbackConfig(_Strict):
    """Roll back on collapse: a guard for runs that lose what they had learned.

    After a round whose full ``return_window`` mean is at least ``drop`` below the current
    attempt's best (a reseed on stall starts a new attempt), the learner goes back to the
    run's best checkpoint (the highest mean return in the checkpoint store, ``best.json``) and
    trains on with its learning rate scaled by ``lr_scale`` once more per rollback. Env steps
    and the budget go on; the return window starts afresh. At most ``max_rollbacks`` per run.
    A checkpoint from an earlier attempt, or one whose mean return is not ``drop`` above the
    collapsed window, is not gone back to (the warning says so, and the guard waits for the
    next checkpoint). A round that does not trigger it changes nothing, so a run in which it
    never fires trains exactly as without it. Off unless ``drop`` is set (in return units: the
    Alice_and_Bob preset sets 0.3 on its 0-1 success return; docs/hmasd.md, "Rollback").

    The episodes that end in the ``settle_rounds`` rounds after a rollback do not enter the
    return window: the envs are not reset, so the episodes in flight then began under the
    collapsed policy, and counting them would judge the restored one by its predecessor's play
    (one round covers every episode no longer than ``rollout_len``)."""

    drop: float | None = Field(None, gt=0)
    lr_scale: float = Field(0.5, gt=0, le=1)
    max_rollbacks: int = Field(3, ge=1)
    settle_rounds: int = Field(1, ge=0)


def attempt_seed(seed: int, attempt: int) -> int:
    """The seed of a run's ``attempt``-th start (0: the config's own). Far from the seeds users
    sweep (0, 1, 2, ...), so seed 0's second attempt is not seed 1's first."""
    return seed + 1_000_003 * attempt


class WandbConfig(_Strict):
    """Weights & Biases (``rl_system.observe.trackers``; the ``wandb`` extra)."""

    enabled: bool = False
    project: str = "rl-system"
    entity: str | None = None
    mode: Literal["online", "offline"] = "online"
    """``offline``: written under ``<run dir>/wandb`` only (``wandb sync`` uploads it later)."""
    tags: list[str] = Field(default_factory=list)


class MlflowConfig(_Strict):
    """MLflow (``rl_system.observe.trackers``; the ``mlflow`` extra)."""

    enabled: bool = False
    tracking_uri: str | None = None
    """A server (``http://...``), a database (``sqlite:///...``, needs the full ``mlflow``) or a
    ``file:`` store; default: ``MLFLOW_TRACKING_URI``, else a file store in ``<run dir>/mlruns``."""
    experiment: str = "rl-system"


class TrackersConfig(_Strict):
    """Experiment trackers that get the TensorBoard scalars too."""

    wandb: WandbConfig = Field(default_factory=WandbConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)


class RunConfig(_Strict):
    """Top-level config of a training run."""

    algo: Literal["ppo", "hmasd"] = "ppo"
    seed: int = 0
    env: EnvConfig = Field(default_factory=EnvConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    hmasd: HMASDConfig = Field(default_factory=HMASDConfig)
    """HMASD hyperparameters (``algo: hmasd``); see :mod:`rl_system.algos.hmasd`."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    selfplay: SelfPlayConfig = Field(default_factory=SelfPlayConfig)
    reseed: ReseedConfig = Field(default_factory=ReseedConfig)
    """Reseed on stall (off unless ``reseed.at_env_steps`` is set)."""
    rollback: RollbackConfig = Field(default_factory=RollbackConfig)
    """Roll back to the best checkpoint on collapse (off unless ``rollback.drop`` is set)."""
    max_policy_lag: int = Field(0, ge=0)
    """Rollouts from policy versions older than ``version - max_policy_lag`` are dropped."""
    max_env_steps: int = Field(1_000_000, gt=0)
    max_wall_s: float | None = Field(None, gt=0)
    target_return: float | None = None
    """Record the time and env steps at which the 100-episode mean return first reaches this, and
    stop there unless ``stop_at_target`` is false."""
    stop_at_target: bool = True
    return_window: int = Field(100, gt=0)
    compression: Literal["auto", "lz4", "none"] = "auto"
    """``auto``: LZ4 only for workers on another node than the learner (on one node the object
    store is shared memory and compression costs more than it saves)."""
    compression_level: int = Field(0, ge=0, le=16)
    codec_filters: Literal["auto", "none"] = "auto"
    """Bit-exact preconditioning of compressed columns (integer narrowing, XOR along time, byte
    shuffle), chosen per column; ``none`` is slightly cheaper on links faster than ~4 Gbit/s
    (``docs/wire_cost.md``)."""
    run_dir: str = "runs"
    """Parent directory; each run writes to ``run_dir/<name>``."""
    run_name: str | None = None
    archive_every: int = Field(0, ge=0)
    """Also write every K-th round's rollouts as an Arrow IPC file (0: off)."""
    archive_dir: str | None = None
    """Where archives go (local path or filesystem URI); default ``<run dir>/rollouts``."""
    log_every_s: float = Field(1.0, ge=0)
    tensorboard: bool = True
    trackers: TrackersConfig = Field(default_factory=TrackersConfig)
    """Weights & Biases and MLflow beside TensorBoard (:mod:`rl_system.observe.trackers`)."""
    ray_dashboard: bool = False
    """Start the Ray dashboard with the embedded Ray (a run without ``--address``). Off by default:
    on a laptop its seven processes cost about a second of start-up and compete with the actors
    for the cores. A cluster (``--address``) has its own dashboard either way."""
    startup_timeout_s: float = Field(300.0, gt=0)
    """How long the run waits for its actors to be placed and started (e.g. while an autoscaling
    cluster adds nodes) before it gives up with one line."""

    @model_validator(mode="after")
    def _network_for_ppo(self) -> "RunConfig":
        if self.model.network is not None and self.algo != "ppo":
            raise ValueError(f"model.network is a PPO actor-critic; algo {self.algo!r} builds its own networks")
        if self.model.recurrent != "none" and self.algo != "ppo":
            raise ValueError(f"model.recurrent is PPO's recurrent core; algo {self.algo!r} has its own (hmasd.hidden)")
        if self.ppo.burn_in >= self.workers.rollout_len:
            raise ValueError(f"ppo.burn_in ({self.ppo.burn_in}) must be below workers.rollout_len "
                             f"({self.workers.rollout_len}): burn-in steps carry no loss")
        if self.model.recurrent != "none" and self.selfplay.enabled:
            raise ValueError("model.recurrent with selfplay: a recurrent opponent snapshot is not supported")
        if self.ppo.value_target == "vtrace" and self.algo != "ppo":
            raise ValueError(f"ppo.value_target: vtrace is PPO's value target; algo {self.algo!r} has its own")
        if self.learner.compile and self.algo != "ppo":
            raise ValueError(f"learner.compile: compiles PPO's loss; algo {self.algo!r} updates eagerly")
        if self.workers.wait_for == "any" and self.max_policy_lag == 0:
            raise ValueError("workers.wait_for: any takes rollouts as they arrive, some from a policy version "
                             "behind, and max_policy_lag is 0 (the gate would drop them); set max_policy_lag >= 1 "
                             "or wait_for: all")
        if self.ppo.value_target == "vtrace" and self.max_policy_lag == 0:
            raise ValueError("ppo.value_target: vtrace corrects for policy lag, and max_policy_lag is 0 (every "
                             "rollout is on-policy: its targets are gae's); set max_policy_lag >= 1 or use gae")
        return self

    @model_validator(mode="after")
    def _learner_group(self) -> "RunConfig":
        lc = self.learner
        if lc.num_learners > self.workers.num_workers:
            raise ValueError(f"learner.num_learners ({lc.num_learners}) exceeds workers.num_workers "
                             f"({self.workers.num_workers}): each learner trains on whole rollouts")
        if lc.backend == "nccl" and (lc.num_gpus < 1 or lc.device == "cpu"):
            raise ValueError("learner.backend=nccl needs a whole GPU per learner (learner.num_gpus >= 1, "
                             "learner.device auto or cuda); CPU learners and GPU shares use gloo")
        return self

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        """Configs saved in checkpoints before the ``reseed`` section was named so called it
        ``restart``; read them as they were meant."""
        if isinstance(data, dict) and "restart" in data and "reseed" not in data:
            data = {("reseed" if k == "restart" else k): v for k, v in data.items()}
        return data


def _parse_value(text: str) -> Any:
    """``--set`` values are YAML scalars/lists: ``3``, ``1e-3``, ``true``, ``[64, 64]``, ``null``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_override(tree: dict[str, Any], assignment: str) -> None:
    """Apply one ``a.b.c=value`` assignment to a nested dict in place."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. workers.num_envs=256")
    set_key(tree, key.strip(), _parse_value(raw))


def set_key(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set the dotted ``key`` (``ppo.lr``) of a nested dict in place."""
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{key}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def _format_error(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "<root>"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    if first["type"] == "value_error" and not first["loc"]:
        # A whole-config check: its message names the keys itself.
        return str(first["ctx"]["error"])
    got = first.get("input")
    shown = "" if first["type"] == "extra_forbidden" or isinstance(got, dict) else f" (got {got!r})"
    more = f" [+{err.error_count() - 1} more]" if err.error_count() > 1 else ""
    return f"{key}: {msg}{shown}{more}"


def build_config(tree: dict[str, Any]) -> RunConfig:
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Read a YAML config (or defaults when ``path`` is None), apply overrides, validate."""
    tree: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{p}: no such config file")
        try:
            loaded = yaml.safe_load(p.read_text())
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{p}:{where} not valid YAML") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{p}: expected a mapping of keys at the top level")
        tree = loaded or {}
    for assignment in overrides:
        apply_override(tree, assignment)
    return build_config(tree)
