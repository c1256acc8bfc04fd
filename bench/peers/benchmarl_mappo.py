"""BenchMARL's MAPPO as a peer: on a VMAS task with BenchMARL's fine-tuned VMAS settings, and on
MPE simple_spread (mpe2's) with BenchMARL's default settings.

VMAS (balance, transport); the settings and where each comes from:

* the experiment: BenchMARL's installed defaults (``benchmarl/conf/experiment/base_experiment.yaml``)
  overridden by its fine-tuned VMAS config (``fine_tuned/vmas/conf/config.yaml`` in the BenchMARL
  repository; not part of the pip package, so :data:`FINE_TUNED` repeats its on-policy values):
  60,000 frames per batch from 600 vectorized envs, 45 minibatch iterations of 4,096 frames,
  gamma 0.9, lr 5e-5, grad norm clipped at 5, 200 evaluation episodes, shared policy parameters;
* the algorithm: ``benchmarl/conf/algorithm/mappo.yaml`` (clip 0.2, GAE lambda 0.9, no entropy
  bonus, critic coefficient 1, l2 critic loss, a shared central critic, TanhNormal actions with
  a biased-softplus scale), the same values as ``fine_tuned/vmas/yaml/mappo.yaml``;
* the actor and critic: ``benchmarl/conf/model/layers/mlp.yaml`` (MLP [256, 256], Tanh), which
  the fine-tuned config names for both;
* the task: ``benchmarl/conf/task/vmas/<task>.yaml`` (balance and transport: 4 agents, 100 steps).

MPE simple_spread: BenchMARL publishes no fine-tuned settings for its PettingZoo tasks (the
repository's ``fine_tuned/`` holds VMAS and SMACv2 only), so the experiment is the installed
``base_experiment.yaml`` unchanged (:data:`MPE_DEFAULTS` repeats its on-policy values: 6,000 frames
per batch from 10 envs stepped one after another, 45 minibatch iterations of 400 frames, gamma
0.99, lr 5e-5, grad norm clipped at 5, continuous actions preferred, shared policy parameters),
the same algorithm and model files, and ``benchmarl/conf/task/pettingzoo/simple_spread.yaml`` (N 3,
local_ratio 0.5) with ``max_cycles`` 25 instead of its 100 (:data:`MPE_TASK`: MPE's own default,
the episode length this comparison runs). simple_spread has continuous actions, so
``prefer_continuous_actions`` picks them (``Box(0, 1, (5,))`` per agent). The env is mpe2's
``simple_spread_v3`` built by :mod:`bench.peers.benchmarl_mpe2` (BenchMARL's own task class looks
for ``pettingzoo.mpe``, which PettingZoo 1.27 no longer has).

What differs from those settings, and why: CPU instead of CUDA (the fine-tuned VMAS config's; this
machine has no GPU); loggers ``csv`` in a temp dir instead of wandb (no network); no rendering
(videos need torchvision); on MPE 200 evaluation episodes instead of the default's 10 (as many as
rl_system's final test); evaluation after every batch on VMAS and every :data:`MPE_EVAL_BATCHES`
batches on MPE (200 episodes of one env, one after another, take a while) instead of every
120,000 frames, so that a budget that is a multiple of the interval ends on an evaluation.

With ``--like CONFIG`` the same run takes the hyperparameters an rl_system config sets
instead of BenchMARL's (:func:`like_config`: learning rate, gamma, GAE lambda, clip,
entropy and critic coefficients, gradient clip, epochs and minibatch size); what BenchMARL cannot
take stays its own: no advantage normalisation (its MAPPO passes ``normalize_advantage=False``), two
Adam optimisers, TanhNormal actions. The batch (VMAS: 60,000 frames from 600 envs; MPE: 6,000
from 10) must be the same.

A BenchMARL *frame* is one step of one env with all its agents: the env steps rl_system counts.

The curve is BenchMARL's own evaluation: ``eval/reward/episode_reward_mean`` (its CSV logger's
``eval_reward_episode_reward_mean``): the mean over the evaluation episodes of each episode's
return averaged over the agents, deterministic actions (the TanhNormal's mode). With one agent
group (VMAS's ``agents``, MPE's ``agent``) it is the group's ``eval/<group>/reward/...`` figure.
Beside it the training curve, ``collection/reward/episode_reward_mean``: the same figure for the
episodes that ended in each collected batch (stochastic actions).

Run: ``python -m bench.peers.benchmarl_mappo --task balance --frames 300000 --seed 0 --json out.json``
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

VMAS_TASKS = ("balance", "transport")
MPE_TASKS = ("simple_spread",)
TASKS = VMAS_TASKS + MPE_TASKS

#: each task's env as rl_system names it (``env.name``): the peer's rows carry it, so that a table
#: joins the two systems' runs of one task
ENV = {"balance": "vmas:balance", "transport": "vmas:transport",
       "simple_spread": "pettingzoo:mpe2.simple_spread_v3:parallel_env"}

#: ``fine_tuned/vmas/conf/config.yaml``'s ``experiment:`` values an on-policy run reads (the
#: off-policy and exploration ones change nothing for MAPPO and are left at the defaults).
FINE_TUNED: dict[str, Any] = {
    "share_policy_params": True,
    "prefer_continuous_actions": True,
    "gamma": 0.9,
    "lr": 0.00005,
    "clip_grad_norm": True,
    "clip_grad_val": 5,
    "on_policy_collected_frames_per_batch": 60_000,
    "on_policy_n_envs_per_worker": 600,
    "on_policy_n_minibatch_iters": 45,
    "on_policy_minibatch_size": 4096,
    "evaluation": True,
    "evaluation_episodes": 200,
}

#: what this peer sets beside :data:`FINE_TUNED` (the module docstring says why)
LOCAL: dict[str, Any] = {
    "sampling_device": "cpu",
    "train_device": "cpu",
    "buffer_device": "cpu",
    "render": False,
    "loggers": ["csv"],
    "create_json": True,
    "checkpoint_interval": 0,
    "checkpoint_at_end": False,
}

#: ``benchmarl/conf/experiment/base_experiment.yaml``'s values an on-policy run reads (BenchMARL
#: 1.5.2), which the MPE run keeps; set explicitly all the same, so that another release's defaults
#: cannot change the run unseen.
MPE_DEFAULTS: dict[str, Any] = {
    "share_policy_params": True,
    "prefer_continuous_actions": True,
    "parallel_collection": False,
    "gamma": 0.99,
    "lr": 0.00005,
    "adam_eps": 0.000001,
    "clip_grad_norm": True,
    "clip_grad_val": 5,
    "on_policy_collected_frames_per_batch": 6_000,
    "on_policy_n_envs_per_worker": 10,
    "on_policy_n_minibatch_iters": 45,
    "on_policy_minibatch_size": 400,
    "evaluation": True,
    "evaluation_deterministic_actions": True,
}

#: what the MPE run sets beside :data:`MPE_DEFAULTS` and :data:`LOCAL` (the module docstring says why)
MPE_LOCAL: dict[str, Any] = {"evaluation_episodes": 200}

#: MPE: one evaluation every this many batches (60,000 frames; every budget's worth below that)
MPE_EVAL_BATCHES = 10

#: ``benchmarl/conf/task/pettingzoo/<task>.yaml``'s values this comparison changes
MPE_TASK: dict[str, dict[str, Any]] = {"simple_spread": {"max_cycles": 25}}

EVAL_KEY = "eval_reward_episode_reward_mean"
TRAIN_KEY = "collection_reward_episode_reward_mean"


def experiment_settings(task: str) -> dict[str, Any]:
    """What the peer sets on BenchMARL's installed experiment defaults for ``task``."""
    return {**FINE_TUNED, **LOCAL} if task in VMAS_TASKS else {**MPE_DEFAULTS, **MPE_LOCAL, **LOCAL}


def batch_frames(task: str) -> int:
    """Frames of one collected batch."""
    return (FINE_TUNED if task in VMAS_TASKS else MPE_DEFAULTS)["on_policy_collected_frames_per_batch"]


def eval_interval(task: str, frames: int) -> int:
    """Frames between two evaluations: every batch on VMAS, every :data:`MPE_EVAL_BATCHES` batches on
    MPE (a shorter budget: once, at its end). A budget that is a multiple of it ends on one."""
    if task in VMAS_TASKS:
        return batch_frames(task)
    return min(batch_frames(task) * MPE_EVAL_BATCHES, frames)


def like_config(task: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(experiment, algorithm)`` settings of BenchMARL that carry rl_system config ``path``'s
    hyperparameters (its ``mappo`` section, defaults filled in by rl_system's own loader). Raises
    ``ValueError`` where the config's batch is not BenchMARL's (:func:`batch_frames`)."""
    from rl_system.config import load_config

    cfg = load_config(path)
    m, w = cfg.mappo, cfg.workers
    batch = w.num_workers * w.num_envs * w.rollout_len
    if batch != batch_frames(task):
        raise ValueError(f"--like {path}: a config whose round is {batch_frames(task):,} env steps")
    experiment = {"lr": m.lr, "gamma": m.gamma, "clip_grad_val": m.max_grad_norm,
                  "on_policy_n_minibatch_iters": m.num_epochs,  # each one pass over the batch, as an epoch
                  "on_policy_minibatch_size": math.ceil(batch / m.num_minibatches)}
    # rl_system's value loss is vf_coef x half the squared error, BenchMARL's critic_coef x the l2 loss
    algorithm = {"lmbda": m.gae_lambda, "clip_epsilon": m.clip_coef, "entropy_coef": m.ent_coef,
                 "critic_coef": m.vf_coef / 2}
    return experiment, algorithm


def experiment_config(task: str, frames: int, save_folder: str, like: dict[str, Any] | None = None,
                      eval_episodes: int | None = None):
    """BenchMARL's ``ExperimentConfig``: installed defaults, then :func:`experiment_settings` and
    ``like`` (:func:`like_config`'s experiment part), ``frames`` as the budget and :func:`eval_interval`
    (``eval_episodes`` evaluation episodes where given)."""
    from benchmarl.experiment import ExperimentConfig

    cfg = ExperimentConfig.get_from_yaml()
    for key, value in {**experiment_settings(task), **(like or {}), **eval_override(eval_episodes)}.items():
        setattr(cfg, key, value)
    cfg.max_n_frames = frames
    cfg.evaluation_interval = eval_interval(task, frames)
    cfg.save_folder = save_folder
    return cfg


def eval_override(eval_episodes: int | None) -> dict[str, Any]:
    """The experiment setting that replaces the evaluation episodes, where given."""
    return {} if eval_episodes is None else {"evaluation_episodes": eval_episodes}


def benchmarl_task(task: str):
    """BenchMARL's task object: VMAS's from its yaml; MPE's from its yaml with :data:`MPE_TASK`, on
    mpe2 (:mod:`bench.peers.benchmarl_mpe2`)."""
    if task in VMAS_TASKS:
        from benchmarl.environments import VmasTask

        return VmasTask[task.upper()].get_from_yaml()
    from bench.peers import benchmarl_mpe2

    return benchmarl_mpe2.task(task, **MPE_TASK[task])


def settings(task: str) -> dict[str, Any]:
    """The algorithm, model and task settings as the run uses them, loaded from the installed yaml
    files (for the record and the tests)."""
    from dataclasses import asdict

    from benchmarl.algorithms import MappoConfig
    from benchmarl.models.mlp import MlpConfig

    model = MlpConfig.get_from_yaml()
    return {"algorithm": asdict(MappoConfig.get_from_yaml()),
            "model": {"num_cells": list(model.num_cells), "activation_class": model.activation_class.__name__},
            "task": dict(benchmarl_task(task).config)}


class Clock:
    """A BenchMARL callback stamping every batch and evaluation with the wall and CPU seconds since
    the run began (:meth:`start`) and the frames collected so far. Duck-typed (every hook of
    ``benchmarl.experiment.callback.Callback``) so that this module imports without BenchMARL."""

    def start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.trained: dict[int, tuple[int, float, float]] = {}
        self.evaluated: dict[int, tuple[int, float, float]] = {}
        self.threads: set[int] = set()

    def __getstate__(self) -> dict:
        # BenchMARL pickles its callbacks into config.pkl (for reloading); the clock's state and its
        # experiment are not worth keeping there.
        return {}

    def _now(self) -> tuple[int, float, float]:
        return (self.experiment.total_frames, time.perf_counter() - self.t0, time.process_time() - self.c0)

    def on_train_end(self, training_td, group: str) -> None:
        import torch

        self.trained[self.experiment.n_iters_performed] = self._now()
        # Read while training: TorchRL's SerialEnv.close() at the end sets the count again.
        self.threads.add(torch.get_num_threads())

    def on_evaluation_end(self, rollouts) -> None:
        self.evaluated[self.experiment.n_iters_performed] = self._now()
        self.last_test = episode_returns(rollouts, list(self.experiment.group_map))

    def on_setup(self) -> None: ...
    def on_load_state_dict(self, state_dict) -> None: ...
    def on_batch_collected(self, batch) -> None: ...
    def on_train_step(self, batch, group: str) -> None: ...
    def on_state_dict(self, state_dict) -> None: ...


def episode_returns(rollouts, groups: list[str]) -> dict[str, float]:
    """Mean, standard error and count of the evaluation episodes' returns (each summed over its
    steps, averaged over the agents of a group), from BenchMARL's evaluation rollouts (one episode
    each, ``[steps]`` with ``("next", group, "reward")`` of shape ``[steps, agents, 1]``); the mean is
    the figure of BenchMARL's ``eval/reward/episode_reward_mean`` with one group."""
    import torch

    returns = []
    for rollout in rollouts:
        for group in groups:
            reward = rollout.get(("next", group, "reward"))  # [steps, agents, 1]
            returns.append(reward.sum(0).mean().item())
    r = torch.tensor(returns, dtype=torch.float64)
    se = (r.std() / len(r) ** 0.5).item() if len(r) > 1 else math.nan
    return {"return_mean": r.mean().item(), "return_se": se, "episodes": len(r)}


def read_scalar(folder: Path, name: str) -> dict[int, float]:
    """``{step: value}`` of the CSV logger's scalar ``name`` anywhere under ``folder``."""
    files = list(Path(folder).rglob(f"scalars/{name}.csv"))
    if not files:
        return {}
    with open(files[0], newline="") as f:
        return {int(step): float(value) for step, value in csv.reader(f)}


def join_curve(stamps: dict[int, tuple[int, float, float]], values: dict[int, float]) -> list[tuple]:
    """Rows ``(frames, wall s, return, CPU s)`` for the iterations that have both a stamp and a value."""
    return [(stamps[i][0], round(stamps[i][1], 3), values[i], round(stamps[i][2], 3))
            for i in sorted(stamps) if i in values and math.isfinite(values[i])]


def run(task: str, frames: int, seed: int, threads: int | None = None, like: str | None = None,
        eval_episodes: int | None = None) -> dict[str, Any]:
    """Train BenchMARL's MAPPO on ``task`` for ``frames`` frames with ``seed`` on the CPU (with
    rl_system config ``like``'s hyperparameters where given); returns the evaluation and training
    curves (rows ``(frames, wall s, mean episode reward, CPU s)``, clocks from the start of
    ``Experiment.run``), the totals and the settings used."""
    import torch
    from benchmarl.algorithms import MappoConfig
    from benchmarl.experiment import Experiment
    from benchmarl.models.mlp import MlpConfig

    if threads:
        torch.set_num_threads(threads)
    like_exp, like_alg = like_config(task, like) if like else ({}, {})
    algorithm = MappoConfig.get_from_yaml()
    for key, value in like_alg.items():
        setattr(algorithm, key, value)
    t_build = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="benchmarl_") as tmp:
        clock = Clock()
        experiment = Experiment(task=benchmarl_task(task),
                                algorithm_config=algorithm, model_config=MlpConfig.get_from_yaml(),
                                critic_model_config=MlpConfig.get_from_yaml(), seed=seed,
                                config=experiment_config(task, frames, tmp, like_exp, eval_episodes),
                                callbacks=[clock])
        build_s = time.perf_counter() - t_build
        clock.start()
        experiment.run()
        wall, cpu = time.perf_counter() - clock.t0, time.process_time() - clock.c0
        evals, trains = read_scalar(Path(tmp), EVAL_KEY), read_scalar(Path(tmp), TRAIN_KEY)
        eval_s, collect_s, learn_s = (sum(read_scalar(Path(tmp), f"timers_{name}_time").values())
                                      for name in ("evaluation", "collection", "training"))
    curve, train_curve = join_curve(clock.evaluated, evals), join_curve(clock.trained, trains)
    return {"peer": "benchmarl_mappo_our_settings" if like else "benchmarl_mappo", "task": task, "env": ENV[task], "seed": seed,
            "env_steps": experiment.total_frames, "train_wall_s": wall, "train_cpu_s": cpu, "eval_wall_s": eval_s,
            "build_s": build_s, "collection_s": collect_s, "training_s": learn_s,
            "threads": max(clock.threads, default=None), "final_return": curve[-1][2] if curve else math.nan,
            "final_train_return": train_curve[-1][2] if train_curve else math.nan,
            "reward": "eval/reward/episode_reward_mean", "curve": curve, "train_curve": train_curve,
            "test": getattr(clock, "last_test", None),
            "settings": {"experiment": {**experiment_settings(task), **like_exp, **eval_override(eval_episodes),
                                        "evaluation_interval": eval_interval(task, frames)},
                         **settings(task), "algorithm_changed": like_alg, "like": like},
            "versions": versions()}


def versions() -> dict[str, str | None]:
    from bench.harness.stamp import version

    return {m: version(m) for m in ("benchmarl", "torchrl", "tensordict", "vmas", "pettingzoo", "mpe2", "torch")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=TASKS, default="balance")
    ap.add_argument("--frames", type=int, default=3_000_000, help="a multiple of the evaluation interval (60,000: "
                    "one VMAS batch, ten MPE batches)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, the cores)")
    ap.add_argument("--like", default=None, metavar="CONFIG",
                    help="an rl_system config whose hyperparameters replace BenchMARL's")
    ap.add_argument("--eval-episodes", type=int, default=None,
                    help="episodes of each evaluation (default: the settings', 200)")
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args(argv)
    result = run(args.task, args.frames, args.seed, args.threads, args.like, args.eval_episodes)
    print(f"{ENV[args.task]} seed {args.seed}: {result['env_steps']:,} frames in {result['train_wall_s']:.0f}s "
          f"({result['train_cpu_s']:.0f} CPU s, {result['eval_wall_s']:.0f}s evaluating), "
          f"final eval return {result['final_return']:.3f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
