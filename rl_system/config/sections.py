"""The run config's sections that belong to no one algorithm: the env, the workers, the learner,
checkpoints, self-play, reseed on stall, rollback on collapse, trackers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from rl_system.config.base import Strict, Threads


class EnvConfig(Strict):
    name: str = "CartPole"
    """A registered env (``CartPole``, ``Navigation``, ``AirCombat``, ``AliceBob``, ``Overcooked``, ``Chaos``);
    ``package.module:Name``, a ``VecEnv`` subclass or factory of your own ([byo_env.md](byo_env.md));
    ``gym:<Gymnasium id>`` / ``gym:package.module:<id>`` ([gym.md](gym.md)); ``envpool:<EnvPool id>`` (Linux);
    ``vmas:<scenario>``; ``pettingzoo:<module>:<env_fn>``; or ``magym:<Gymnasium id>``, Level-Based Foraging and the
    Multi-Robot Warehouse ([multi_agent.md](multi_agent.md))."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to the env's constructor; each env page lists its parameters ([cartpole.md](cartpole.md),
    [navigation.md](navigation.md), [air_combat.md](air_combat.md), [alice_bob.md](alice_bob.md),
    [overcooked.md](overcooked.md), [gym.md](gym.md))."""
    eval_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Overrides of ``env.kwargs`` wherever a trained policy is tested rather than trained: ``rl-system eval`` and
    ``--render``, the benches' test episodes (e.g. exploring starts in training, the task's own start in the test)."""

    def test_kwargs(self) -> dict[str, Any]:
        """The env kwargs a policy is tested under: ``kwargs`` updated with ``eval_kwargs``."""
        return {**self.kwargs, **self.eval_kwargs}


class WorkersConfig(Strict):
    num_workers: int = Field(2, ge=1)
    """Rollout workers (Ray actors ``rollout-worker-<i>``)."""
    num_envs: int = Field(512, gt=0)
    """Envs per worker, stepped as one batch."""
    rollout_len: int = Field(16, gt=0)
    """T: steps per env per rollout; a round is ``num_workers × num_envs × rollout_len`` env steps."""
    num_cpus: float = Field(1.0, ge=0)
    """Ray CPUs per worker."""
    num_gpus: float = Field(0.0, ge=0)
    """Ray GPUs per worker; fractional shares allowed (0.25 puts four workers on one GPU)."""
    device: str = "auto"
    """Torch device of the envs and the policy copy; ``auto`` uses ``cuda`` when the actor was given a GPU, else
    ``cpu``."""
    torch_threads: Threads = 1
    """Torch intra-op threads per worker; ``auto``: the CPUs each worker reserves (``workers.num_cpus``, rounded down,
    at least 1)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources each worker requires, e.g. ``{rollout_node: 1}`` to pin placement."""
    max_restarts: int = Field(3, ge=-1)
    """Ray restarts of a dead worker (−1: unlimited). A worker that fails more than ``max(3, max_restarts)`` times in a
    row ends the run."""
    wait_for: Literal["all", "any"] = "all"
    """What a round waits for. ``all``: one rollout from every worker (a seeded run repeats bit for
    bit, with or without ``max_policy_lag``). ``any``: the first ``num_workers`` rollouts from
    whichever workers deliver them, so a slow worker never holds a round back (its rollouts are
    trained on while the gate admits them; timing decides which, so runs do not repeat exactly);
    needs ``max_policy_lag >= 1``, or every late rollout would be dropped
    ([user guide](user_guide.md#on-policy-gating))."""


class LearnerConfig(Strict):
    num_cpus: float = Field(1.0, ge=0)
    """Ray CPUs of the learner actor."""
    num_gpus: float = Field(0.0, ge=0)
    """Ray GPUs of the learner (fractional allowed)."""
    device: str = "auto"
    """``auto`` uses ``cuda`` when the learner was given a GPU, else ``cpu``."""
    torch_threads: Threads = 1
    """Torch intra-op threads of the learner; ``auto``: the CPUs it reserves (``learner.num_cpus``, rounded down, at
    least 1, at most the cores the process may use), so its threads and Ray's accounting agree: ``learner.num_cpus:
    2`` with ``auto`` computes on two cores that Ray gives no other actor. How a waiting thread waits follows the
    cores free when the run starts, unless the environment sets ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``: where
    other processes keep under half a core busy, libgomp's own spin (``GOMP_SPINCOUNT=300000``: two threads of small
    steps stay fast); otherwise ``OMP_WAIT_POLICY=PASSIVE`` (a spinning thread would take the time slice its partner
    needs); a job joining a cluster waits passively. ``--log-level debug`` says which (``python -m
    bench.bench_threads --runs``; [lab log](lab/results.md))."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources the learner requires (e.g. the node with the large GPU)."""
    max_restarts: int = Field(3, ge=0)
    """Times a dead learner (a learner group: the whole group) is rebuilt inside the run from the newest valid
    checkpoint (or from scratch before the first one): the run's counters, return window and policy go back to that
    checkpoint, so at most ``checkpoint.every_rounds`` rounds of work are lost; the policy version still goes up.
    Counted as ``learner_restarts``; beyond the limit the run fails in one line."""
    num_learners: int = Field(1, ge=1)
    """Data-parallel learners ([scaling.md](scaling.md#learner-group)): each trains on its share of a round's rollouts
    (contiguous by worker), every minibatch step all-reduces the gradients and every statistic stays global, so N
    learners take the one-learner steps; each gets ``num_cpus`` / ``num_gpus`` / ``resources``. At most
    ``workers.num_workers``."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """``torch.distributed`` backend of a group: ``auto`` is NCCL for learners with a whole GPU each (``num_gpus >=
    1``), gloo otherwise (CPU learners; GPU shares, which may sit on one device and NCCL refuses); ``nccl`` without a
    whole GPU per learner is a config error."""
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
    with one warning (``train/compiled`` 0). On a 2-core VM the compile takes 2-6 s (35 s for a GRU's
    unrolled sequence) and later updates of small MLPs run ~1.5x faster. PPO only."""
    gradients: Literal["autograd", "closed_form"] = "autograd"
    """``closed_form``: PPO's minibatch gradients written out for the built-in feedforward actor-critic (flat
    observations, tanh/relu/elu MLP heads, Discrete or Box actions; ``rl_system/algos/ppo/analytic.py``): about half
    the ATen calls of autograd's loss and backward and no graph, no compile (CartPole's update 1.78× faster, Hopper's
    1.88×); the gradients agree with autograd's to float32 rounding (``tests/algos/test_ppo_analytic.py``), so a
    seed's run differs in the last bits. Other policies and bf16 updates take autograd with one warning
    (``train/closed_form`` says which ran); with ``learner.compile`` or another algo it is one config-error line. PPO
    only (``bench/bench_update.py --closed-form``). The CartPole, Acrobot, Pendulum, Hopper and HalfCheetah configs
    ship it ([ppo.md](ppo.md#the-mode-each-shipped-config-runs))."""
    head_threads: Literal["auto", 1, 2] = "auto"
    """Threads of the closed-form update (``gradients: closed_form``): 2 runs the critic's forward, value loss and
    backward on a second thread while the actor's run on the first, each on one intra-op thread, so the gradients
    are the same bits as on 1. ``auto`` takes 2 where four things hold: the learner computes on the CPU with one
    intra-op thread (``torch_threads``; two OpenMP teams side by side would fight for the cores), the process may
    use two cores, the machine was idle when the run started (the run's OpenMP choice is to spin), and the step has
    4,096 rows or more (smaller steps lose to the threads' hand-offs). ``train/closed_form_threads`` says which ran.
    Unlike a second intra-op thread, it does not wait at every op: the throughput CartPole runs at 349k env steps/s
    against 295k on one thread on an idle 2-core VM, and level beside a busy process, where ``auto`` keeps one
    ([lab log](lab/results.md), 2026-12-08)."""
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    """``bf16``: the update under ``torch.autocast`` to bfloat16, without its cast cache (an update's optimiser steps
    run inside the region, and a cached cast would keep the round's first weights): the encoders' and recurrent
    cores' matrix products and convolutions take bf16, while the output layers (logits, values, discriminators),
    HMASD's round preparation, the losses, the weights and the optimiser stay float32
    ([ppo.md](ppo.md#speed-of-the-update)). Faster where the hardware multiplies bf16 natively and the update is
    arithmetic: GPUs with bf16 tensor cores, CPUs with AVX-512 BF16 or AMX (Zen 4+, Sapphire Rapids+), where
    MinAtar's CNN update runs 2.5× and HMASD's 1.6× faster on a 2-core VM (``python -m bench.bench_kernels``); small
    MLPs get slower. MinAtar Breakout with two learner threads ran 1.5× the env steps/s of fp32 (seeds 0–2); the
    MinAtar and HMASD presets ship ``auto`` ([ppo.md](ppo.md#the-mode-each-shipped-config-runs)). ``auto``: ``bf16``
    where the learner's device has native bf16, else ``fp32`` (``system/bf16`` in TensorBoard says which)."""


class CheckpointConfig(Strict):
    every_rounds: int = Field(20, ge=0)
    """Save every K rounds (0: only at the end of the run); a checkpoint is always written at the end."""
    keep_last: int = Field(3, ge=1)
    """Newest checkpoints kept, besides the one with the best training mean return."""
    dir: str | None = None
    """Local path or filesystem URI (``s3://bucket/run``, ``gs://…``); default ``<run dir>/checkpoints``."""
    max_nonfinite_rounds: int = Field(3, ge=1)
    """Stop the run, with a checkpoint of the last good weights, after this many rounds in a row had non-finite losses
    or gradients."""
    max_restarts: int = Field(3, ge=0)
    """Ray restarts of a dead checkpointer or rollout archiver (each); the call it was running is retried on the new
    process, so a save whose state is still in the object store lands after all, and every checkpoint already written
    stays. Counted as ``checkpointer_restarts``, ``archiver_restarts``."""


class SelfPlayConfig(Strict):
    """Self-play for two-player envs whose opponent is pluggable (``env.set_opponent``)."""

    enabled: bool = False
    """On: every ``refresh_every`` rounds the current policy joins a pool of frozen snapshots and each worker's opponent
    is re-drawn."""
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
    """Env-step counts (positive, strictly increasing) at which to check; empty: never."""
    below_return: float = 0.0
    """At a check, reseed if the current attempt's best mean return over a full ``return_window`` is below this (no full
    window yet counts as below) and no target was reached."""

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
    """Roll back after a round whose full ``return_window`` mean is at least this far below the current attempt's best
    (return units); null: never."""
    lr_scale: float = Field(0.5, gt=0, le=1)
    """The learning rate is multiplied by this once more per rollback (0 < scale ≤ 1)."""
    max_rollbacks: int = Field(3, ge=1)
    """At most this many per run."""
    settle_rounds: int = Field(1, ge=0)
    """The episodes that end in this many rounds after a rollback stay out of the return window."""


def attempt_seed(seed: int, attempt: int) -> int:
    """The seed of a run's ``attempt``-th start (0: the config's own). Far from the seeds users
    sweep (0, 1, 2, ...), so seed 0's second attempt is not seed 1's first."""
    return seed + 1_000_003 * attempt


class WandbConfig(Strict):
    """Weights & Biases (``rl_system.observe.trackers``; the ``wandb`` extra)."""

    enabled: bool = False
    """Send the TensorBoard scalars (same tags, env-step axis) and the config to Weights & Biases (the ``wandb``
    extra)."""
    project: str = "rl-system"
    """The W&B project; the run is named after the run directory."""
    entity: str | None = None
    """The W&B entity (user or team); none: the login's default."""
    mode: Literal["online", "offline"] = "online"
    """``online`` (needs ``wandb login``) or ``offline`` (files under ``<run dir>/wandb``, upload later with ``wandb
    sync``)."""
    tags: list[str] = Field(default_factory=list)
    """The W&B run's tags."""


class MlflowConfig(Strict):
    """MLflow (``rl_system.observe.trackers``; the ``mlflow`` extra)."""

    enabled: bool = False
    """Send the same scalars, and the config as parameters, to MLflow (the ``mlflow`` extra)."""
    tracking_uri: str | None = None
    """A server (``http://...``), a database (``sqlite:///...``, needs the full ``mlflow``) or a
    ``file:`` store; default: ``MLFLOW_TRACKING_URI``, else a file store in ``<run dir>/mlruns``."""
    experiment: str = "rl-system"
    """The MLflow experiment (created if missing)."""


class TrackersConfig(Strict):
    """Experiment trackers that get the TensorBoard scalars too."""

    wandb: WandbConfig = Field(default_factory=WandbConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
