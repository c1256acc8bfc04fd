"""The run config's sections that belong to no one algorithm: the env, the workers, the learner,
checkpoints, self-play, reseed on stall, rollback on collapse, trackers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from rl_system.config.base import Strict, Threads


class EnvConfig(Strict):
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


class WorkersConfig(Strict):
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


class LearnerConfig(Strict):
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
    OpenMP kernels on CPU, Triton on GPU). The first update pays the compile (seconds; longer for a
    GRU's unrolled sequence, less from the on-disk cache); each update after it is faster for small
    MLPs, where eager PyTorch spends most of a minibatch step dispatching ops (docs/ppo.md, "Speed
    of the update"; ``bench/bench_update.py --compile``). Pays for runs of hundreds of updates
    (MuJoCo), not for CartPole's few seconds. A machine without a C++ compiler falls back to eager
    with one warning (``train/compiled`` 0)."""
    gradients: Literal["autograd", "closed_form"] = "autograd"
    """How PPO's minibatch gradients are computed. ``closed_form``: written out for the built-in
    feedforward actor-critic (:mod:`rl_system.algos.ppo.analytic`: flat observations, ``tanh`` /
    ``relu`` / ``elu`` MLP heads, Discrete or Box actions), about half the ATen calls of
    autograd's loss and backward and no graph, so a small MLP's update is faster (docs/ppo.md,
    "Speed of the update"); the gradients agree with autograd's to float32 rounding (not bit for
    bit, so a seed's run differs from ``autograd``'s). A policy it cannot serve (encoders with
    weights, a recurrent core, MultiDiscrete actions, a ``model.network``) and a ``bf16`` update
    use autograd, with one warning (``train/closed_form`` says which ran)."""
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    """``bf16``: the update under ``torch.autocast`` to bfloat16, without its cast cache
    (:func:`rl_system.algos.precision.update_autocast`): the encoders' and recurrent cores' matrix
    products and convolutions take bf16, while the output layers, HMASD's round preparation, the
    losses, the weights and the optimiser stay float32. Faster where the hardware multiplies bf16
    natively and the update is arithmetic: GPUs with bf16 tensor cores, and CPUs with AVX-512 BF16
    or AMX (a CNN's or HMASD's update; small MLPs get slower; ``python -m bench.bench_kernels``,
    docs/ppo.md, "Speed of the update"). The MinAtar and HMASD presets ship ``auto`` (docs/ppo.md,
    "The mode each shipped config runs"). ``auto``: ``bf16`` where the learner's device has native
    bf16 (:func:`rl_system.device.bf16_fast`), else ``fp32`` (``system/bf16`` says which)."""


class CheckpointConfig(Strict):
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


class SelfPlayConfig(Strict):
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


class ReseedConfig(Strict):
    """Reseed on stall: start a stalled run over from a fresh seed inside its own step budget.

    At each of ``at_env_steps``, if the current attempt's best mean return over a full
    ``return_window`` is still below ``below_return`` (none full yet counts as below) and no
    target was reached, the learner and every worker rebuild their networks, optimisers, envs and
    samplers from a fresh seed derived from ``seed`` (:func:`attempt_seed`). The env-step counter
    and budget go on, so every step of every attempt counts; an ``anneal_lr`` schedule follows the
    run's budget, not the attempt's. A check that falls in the run's last round does nothing.
    Meant for sparse-reward tasks where a seed can settle early into a dead end that more training
    does not leave: HMASD on Alice_and_Bob, whose skills sometimes never cover a button
    (docs/hmasd.md, "Presets and hyperparameters"). Empty list (the default): never. ("Restart" is kept for a
    Ray actor restart, which is another thing.)"""

    at_env_steps: list[int] = Field(default_factory=list)
    below_return: float = 0.0

    @model_validator(mode="after")
    def _check(self) -> "ReseedConfig":
        steps = self.at_env_steps
        if any(s <= 0 for s in steps) or any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"at_env_steps {steps} must be positive and strictly increasing")
        return self


class RollbackConfig(Strict):
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
    Alice_and_Bob preset sets 0.3 on its 0-1 success return; docs/hmasd.md, "Why solved runs hold").

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


class WandbConfig(Strict):
    """Weights & Biases (``rl_system.observe.trackers``; the ``wandb`` extra)."""

    enabled: bool = False
    project: str = "rl-system"
    entity: str | None = None
    mode: Literal["online", "offline"] = "online"
    """``offline``: written under ``<run dir>/wandb`` only (``wandb sync`` uploads it later)."""
    tags: list[str] = Field(default_factory=list)


class MlflowConfig(Strict):
    """MLflow (``rl_system.observe.trackers``; the ``mlflow`` extra)."""

    enabled: bool = False
    tracking_uri: str | None = None
    """A server (``http://...``), a database (``sqlite:///...``, needs the full ``mlflow``) or a
    ``file:`` store; default: ``MLFLOW_TRACKING_URI``, else a file store in ``<run dir>/mlruns``."""
    experiment: str = "rl-system"


class TrackersConfig(Strict):
    """Experiment trackers that get the TensorBoard scalars too."""

    wandb: WandbConfig = Field(default_factory=WandbConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
