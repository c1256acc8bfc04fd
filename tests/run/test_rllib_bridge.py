"""The built-in envs through RLlib's env registry (rl_system/rllib.py): Gymnasium's own env
checker on every env an RLlib EnvRunner would build, and RLlib's PPO training on a registered id
for two iterations with a remote EnvRunner (a separate process that finds the env through Ray's
registry, not through an import)."""

from __future__ import annotations

import numpy as np
import pytest
import ray
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from rl_system.rllib import ENV_IDS, MULTI_AGENT_IDS, make, make_multi_agent


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_every_registered_env_passes_gymnasiums_checker_with_one_flat_observation(env_id):
    env = make(ENV_IDS[env_id], {"seed": 3})
    assert isinstance(env.observation_space, spaces.Box) and len(env.observation_space.shape) == 1
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    assert obs.shape == env.observation_space.shape and np.all(np.isfinite(obs))
    env.close()


@ray.remote(num_cpus=0)
def _registry_seen(env_id: str) -> tuple[bool, str]:
    """Whether a worker finds ``env_id`` in Tune's registry, and the job it looks under."""
    from ray.tune.registry import ENV_CREATOR, _global_registry
    return _global_registry.contains(ENV_CREATOR, env_id), _global_registry.prefix


@pytest.mark.slow
def test_rllib_ppo_trains_on_a_registered_id(ray_session):
    pytest.importorskip("ray.rllib", reason="RLlib: pip install 'ray[rllib]'")
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune import registry

    from rl_system.rllib import register

    assert register() == [*ENV_IDS, *MULTI_AGENT_IDS]
    # A worker of this job finds the id before RLlib's env runners look (a miss here names the
    # registry's job and this driver's: the env runner's NamespaceNotFound below would not).
    job = ray.get_runtime_context().get_job_id()
    assert ray.get(_registry_seen.remote("rl_system/CartPole-v0")) == (True, job), (registry._global_registry._prefix, job)
    config = (PPOConfig()
              .environment("rl_system/CartPole-v0", env_config={"seed": 0})
              .framework("torch")
              .env_runners(num_env_runners=1, num_envs_per_env_runner=4)
              .learners(num_learners=0)
              .training(train_batch_size_per_learner=512, minibatch_size=128, num_epochs=2, lr=1e-3)
              .debugging(seed=0, log_level="ERROR"))
    algo = config.build_algo()
    try:
        for _ in range(2):
            result = algo.train()
    finally:
        algo.stop()
    runners = result["env_runners"]
    assert runners["num_env_steps_sampled_lifetime"] >= 1024
    assert runners["num_episodes_lifetime"] > 0 and runners["episode_return_mean"] > 0


def test_register_reaches_the_workers_of_a_ray_restarted_in_the_same_process(ray_session):
    # Tune's registry keeps the job id of the first Ray job the process joined; after a
    # ray.shutdown() and ray.init() (a notebook, another test in this worker) it still holds the
    # old one, as set here. register() must store the ids where this job's workers look.
    from ray.tune import registry

    from rl_system.rllib import register

    registry._global_registry._prefix = "0fffffff"  # a job that is gone
    register()
    seen = ray.get([_registry_seen.remote(i) for i in [*ENV_IDS, *MULTI_AGENT_IDS]])
    assert [found for found, _ in seen] == [True] * 4


def test_alice_bob_is_an_rllib_multi_agent_env_that_passes_rllibs_checker():
    pytest.importorskip("ray.rllib", reason="RLlib: pip install 'ray[rllib]'")
    from ray.rllib.env.multi_agent_env import MultiAgentEnv
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    env = make_multi_agent(MULTI_AGENT_IDS["rl_system/AliceBob-v0"], {"seed": 3})
    assert isinstance(env, MultiAgentEnv) and sorted(env.possible_agents) == ["alice", "bob"]
    check_multiagent_environments(env)  # RLlib's own pre-check of a MultiAgentEnv
    obs, _ = env.reset(seed=3)
    assert set(obs) == set(env.possible_agents)
    for _ in range(120):  # past the episode limit: the "__all__" done comes with the team's end
        obs, rew, term, trunc, _ = env.step({a: env.action_space[a].sample() for a in obs})
        assert rew["alice"] == rew["bob"]  # one team reward
        if term["__all__"] or trunc["__all__"]:
            break
    assert term["__all__"] or trunc["__all__"]


@pytest.mark.parametrize("env", ["CartPole", "Navigation", "AirCombat", "AliceBob"])
def test_the_rllib_peer_runs_each_shipped_configs_ppo(env):
    # bench/bench_rllib_envs.py: RLlib gets the same batch per update, minibatches, epochs, lr and net.
    pytest.importorskip("ray.rllib", reason="RLlib: pip install 'ray[rllib]'")
    from bench.bench_rllib_envs import ENVS
    from bench.peers.rllib_builtin import make_config
    from rl_system.config import load_config

    path, outcome = ENVS[env]
    cfg = load_config(path, ["seed=5"])
    config = make_config(cfg, outcome)
    w, algo = cfg.workers, (cfg.hmasd if cfg.algo == "hmasd" else cfg.ppo)
    batch = w.num_workers * w.num_envs * w.rollout_len
    assert config.env == f"rl_system/{env}-v0" and config.env_config == {**cfg.env.kwargs, "seed": 5}
    assert config.train_batch_size_per_learner == batch
    assert config.minibatch_size == batch // algo.num_minibatches and config.num_epochs == algo.num_epochs
    assert (config.lr, config.gamma, config.lambda_) == (algo.lr, algo.gamma, algo.gae_lambda)
    if env == "AliceBob":
        assert set(config.policies) == {"shared"}
    else:
        assert config.model_config["fcnet_hiddens"] == cfg.model.hidden_sizes


def test_the_rllib_beside_table_compares_at_equal_env_steps():
    from bench.bench_rllib_envs import table

    ours = {"env": "Navigation", "peer": "rl_system", "outcome": "success", "build_s": 20.0, "steps_per_s": 1000.0,
            "curve": [(1000, 1.0, -5.0, 0.1), (2000, 2.0, -1.0, 0.4), (3000, 3.0, 2.0, 0.8)]}
    peer = {"env": "Navigation", "peer": "RLlib PPO", "outcome": "success", "build_s": 2.0, "steps_per_s": 500.0,
            "curve": [(800, 1.5, -6.0, 0.0), (1600, 3.2, -2.0, 0.3)]}
    for r in (ours, peer):
        r["final"] = r["curve"][-1]
    text = table([ours, peer])
    assert "rl_system at RLlib's 1,600 env steps: return -1.00, success 0.40" in text
    assert "reached RLlib's final success rate 0.30 after 2.0 s (2,000 steps)" in text
