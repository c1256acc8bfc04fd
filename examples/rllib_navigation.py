"""Train our torch lidar-navigation env with RLlib's PPO (new API stack) through its Gymnasium id.

RLlib comes with rl_system (``ray[default,rllib]``)::

    python examples/rllib_navigation.py --iterations 5

How RLlib finds the env: ``config.environment(env="rl_system.envs.gym_vector:rl_system/Navigation-v0")``
is a Gymnasium id in ``"module:id"`` form. Every EnvRunner (a separate Ray actor process) builds
its envs with ``gymnasium.make_vec(id, num_envs=num_envs_per_env_runner,
vectorization_mode=config.gym_env_vectorize_mode, **env_config)``; the ``rl_system.envs.gym_vector:``
prefix makes Gymnasium import that module, which registers the id, in that process first.
``env_config`` goes to the env constructor (``max_steps``, ``num_static``...).

Autoreset: RLlib 2.60's ``SingleAgentEnvRunner`` expects Gymnasium's default ``NEXT_STEP``
autoreset (after a final step, the next ``step`` returns the reset observation). Our
``TorchVectorEnv`` (the id's ``vector_entry_point``) autoresets in the ``SAME_STEP`` mode, which that
runner would misread (it would take the next episode's first observation as the terminal one).
So this example keeps RLlib's default ``gym_env_vectorize_mode="sync"``: Gymnasium's
``SyncVectorEnv`` (NEXT_STEP) over the id's single-env ``entry_point`` (``TorchEnv``, one
torch env each). Don't set ``gym_env_vectorize_mode="vector_entry_point"`` with this runner.

Observations are a ``Dict`` (``state``, ``lidar``, ``direction``, ``dynamic_obstacle``);
RLlib's default PPO model wants one vector, so a ``FlattenObservations`` env-to-module
connector flattens them. Actions are ``Box(-1, 1, (3,))``.

Prints one line per iteration (env steps, episode return mean, episodes, timings) and, at the
end, a JSON summary (``--json OUT`` writes it too).
"""

from __future__ import annotations

import argparse
import json
import math
import time

GYM_ID = "rl_system.envs.gym_vector:rl_system/Navigation-v0"


def build_config(args: argparse.Namespace):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module import FlattenObservations
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (
        PPOConfig()  # the new API stack (RLModule / Learner / EnvRunner) is the default in 2.60
        .environment(env=GYM_ID, env_config={"max_steps": args.max_steps})
        .env_runners(
            num_env_runners=args.num_env_runners,
            num_envs_per_env_runner=args.num_envs,
            gym_env_vectorize_mode="sync",  # NEXT_STEP autoreset, see the module docstring
            env_to_module_connector=lambda env, spaces, device: FlattenObservations(),
        )
        .training(
            lr=3e-4,
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.2,
            entropy_coeff=0.0,
            train_batch_size_per_learner=args.batch,
            minibatch_size=args.batch // 8,
            num_epochs=4,
        )
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[128, 128], fcnet_activation="tanh",
                                                   vf_share_layers=False))
        .debugging(seed=args.seed)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--num-env-runners", type=int, default=1, help="0 samples in the driver process")
    p.add_argument("--num-envs", type=int, default=8, help="envs per EnvRunner")
    p.add_argument("--batch", type=int, default=4000, help="train_batch_size_per_learner (env steps)")
    p.add_argument("--max-steps", type=int, default=200, help="episode time limit of the env (steps)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the summary here")
    args = p.parse_args()

    import ray

    ray.init(num_cpus=max(2, args.num_env_runners + 1), include_dashboard=False, log_to_driver=False)
    algo = build_config(args).build_algo()
    history = []
    t_start = time.perf_counter()
    try:
        for i in range(1, args.iterations + 1):
            t0 = time.perf_counter()
            result = algo.train()
            runners = result.get("env_runners", {})
            ret = runners.get("episode_return_mean", float("nan"))
            row = {
                "iteration": i,
                "env_steps": int(result.get("num_env_steps_sampled_lifetime", 0)),
                "episode_return_mean": None if ret is None or math.isnan(ret) else round(float(ret), 3),
                "episode_len_mean": runners.get("episode_len_mean"),
                "episodes": int(runners.get("num_episodes", 0)),
                "iter_s": round(time.perf_counter() - t0, 2),
            }
            history.append(row)
            print(f"iter {i}: {row['env_steps']:,} env steps, return mean {row['episode_return_mean']}, "
                  f"episode length {row['episode_len_mean']}, {row['episodes']} episodes, {row['iter_s']} s",
                  flush=True)
    finally:
        algo.stop()
        ray.shutdown()
    import gymnasium

    summary = {"env": GYM_ID, "gymnasium": gymnasium.__version__, "ray": ray.__version__,
               "iterations": history, "wall_s": round(time.perf_counter() - t_start, 1), "args": vars(args)}
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
