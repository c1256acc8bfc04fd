"""RLlib 2.60 PPO (new API stack) on a built-in env through its RLlib registry id
(:mod:`rl_system.rllib`), with the hyperparameters of an rl_system run config where RLlib has them.

What is mapped from the rl_system config (so both peers run the same PPO where they can):

* the env and its constructor kwargs (``env.kwargs``), the seed;
* the batch per update (``num_workers x num_envs x rollout_len`` env steps), the number of
  minibatches and epochs, ``lr``, ``gamma``, ``gae_lambda``, ``clip_coef``, ``ent_coef``,
  ``vf_coef``, ``max_grad_norm``;
* the network: ``model.hidden_sizes`` and ``model.activation`` for separate policy and value MLPs
  (RLlib's default ``vf_share_layers=False``), and RLlib's ``MeanStdFilter`` connector where
  ``model.normalize_obs`` is on.

Not mapped: rl_system's linear ``lr`` annealing (RLlib's ``lr`` stays constant; the bench makes
rl_system's negligible with a far ``max_env_steps``), its value-loss clipping range, and for the multi-agent env its recurrent MAPPO model and centralised critic
(RLlib trains one shared MLP policy over each agent's own observation, as
``examples/rllib_alice_bob.py`` does). The RLlib env is the Gymnasium single-env view of one torch
env per copy (RLlib's ``SyncVectorEnv`` steps them one by one); on 2 cores everything runs in the
driver (``num_env_runners=0``, ``num_learners=0``) with one torch thread, which was RLlib's
fastest geometry on CartPole (``bench/peers/rllib_ppo.py``).
"""

from __future__ import annotations

import collections
import functools
import math
import time
import warnings
from typing import Any

from bench.peers.rllib_ppo import _lifetime_steps, _quiet, _torch_threads, series
from rl_system.config import RunConfig

RETURNS_KEY = "peer_episode_returns"
OUTCOME_KEY = "peer_episode_outcomes"


def _on_episode_end(*, episode, prev_episode_chunks=None, metrics_logger=None, outcome: str | None = None,
                    agents: int = 1, **_: Any) -> None:
    """Log the whole episode's return (per agent, for a shared team reward) and its outcome flag."""
    if metrics_logger is None:
        return
    ret = float(episode.get_return()) + sum(float(c.get_return()) for c in prev_episode_chunks or ())
    metrics_logger.log_value(RETURNS_KEY, ret / agents, reduce="item_series")
    if outcome is not None:
        info = episode.get_infos(-1)
        if agents > 1:  # {agent: info}: the team outcome is the same in every agent's info
            info = next(iter(info.values()), {})
        metrics_logger.log_value(OUTCOME_KEY, float(bool(info.get(outcome, False))), reduce="item_series")


def make_config(cfg: RunConfig, outcome: str | None, envs_per_runner: int = 32):
    """RLlib's ``PPOConfig`` for rl_system config ``cfg`` (see the module docstring)."""
    import torch.nn
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from rl_system.rllib import ENV_IDS, MULTI_AGENT_IDS, make_multi_agent

    ids = {name: env_id for env_id, name in {**ENV_IDS, **MULTI_AGENT_IDS}.items()}
    env_id, multi = ids[cfg.env.name], cfg.env.name in MULTI_AGENT_IDS.values()
    env_config = {**cfg.env.kwargs, "seed": cfg.seed}
    w = cfg.workers
    batch = w.num_workers * w.num_envs * w.rollout_len
    algo = cfg.hmasd if cfg.algo == "hmasd" else cfg.ppo
    agents = len(make_multi_agent(cfg.env.name, env_config).possible_agents) if multi else 1
    callback = functools.partial(_on_episode_end, outcome=outcome, agents=agents)
    config = (PPOConfig()
              .environment(env_id, env_config=env_config)
              .framework("torch")
              .env_runners(num_env_runners=0, num_envs_per_env_runner=envs_per_runner,
                           env_to_module_connector=(lambda env, spaces, device: MeanStdFilter(multi_agent=multi))
                           if cfg.model.normalize_obs else None)
              .learners(num_learners=0)
              .training(train_batch_size_per_learner=batch, minibatch_size=batch // algo.num_minibatches,
                        num_epochs=algo.num_epochs, lr=algo.lr, gamma=algo.gamma, lambda_=algo.gae_lambda,
                        clip_param=algo.clip_coef, entropy_coeff=getattr(algo, "ent_coef", 0.0),
                        vf_loss_coeff=algo.vf_coef, grad_clip=algo.max_grad_norm, use_kl_loss=False,
                        vf_clip_param=10_000.0)
              .callbacks(on_episode_end=callback)
              .debugging(seed=cfg.seed, log_level="ERROR"))
    if multi:
        config = config.multi_agent(policies={"shared"}, policy_mapping_fn=lambda aid, *a, **k: "shared")
    else:
        act = {"tanh": "tanh", "relu": "relu", "elu": "elu"}[cfg.model.activation]
        config = config.rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=list(cfg.model.hidden_sizes), fcnet_activation=act,
            fcnet_kernel_initializer=torch.nn.init.orthogonal_))
    return config


def run(cfg: RunConfig, seconds: float, outcome: str | None = None, window: int = 100) -> dict[str, Any]:
    """Train RLlib PPO for ``seconds`` of wall time (whole ``train()`` iterations, build time
    apart). Returns totals and a ``curve`` of ``(env_steps, wall_s, mean return, outcome rate)``
    after each iteration, both over the last ``window`` finished episodes."""
    _quiet()
    # One intra-op thread in this process, where RLlib's env runner and learner run: as for the
    # CartPole peer, two threads on two cores spin-wait and make the small MLPs far slower.
    with _torch_threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        algo = make_config(cfg, outcome).build_algo()
        build_s = time.perf_counter() - t0
        returns: collections.deque = collections.deque(maxlen=window)
        outcomes: collections.deque = collections.deque(maxlen=window)
        curve, steps, wall = [], 0, 0.0
        t_start = time.perf_counter()
        try:
            while wall < seconds:
                result = algo.train()
                wall, steps = time.perf_counter() - t_start, _lifetime_steps(result)
                returns.extend(series(result, RETURNS_KEY))
                outcomes.extend(series(result, OUTCOME_KEY))
                curve.append((steps, wall, _mean(returns), _mean(outcomes)))
        finally:
            algo.stop()
    return {"peer": "RLlib PPO", "env_steps": steps, "wall_s": wall, "build_s": build_s,
            "steps_per_s": steps / wall if wall else math.nan, "curve": curve}


def _mean(xs) -> float:
    return sum(xs) / len(xs) if xs else math.nan
