"""Train the cooperative two-agent Alice_and_Bob task with RLlib's multi-agent PPO (new API stack)
through ``rl_system/AliceBob-v0``, the id :func:`rl_system.rllib.register` puts into Ray's env
registry (RLlib's ``ParallelPettingZooEnv`` over the PettingZoo view of one env):

    python examples/rllib_alice_bob.py --iterations 3

Both agents share one policy (``policy_mapping_fn`` maps ``alice`` and ``bob`` to ``shared``);
``--per-agent`` gives each its own. Each agent observes its local view (``own_position`` etc. are
env kwargs in ``--env KWARG=VALUE``); the team reward is shared. Prints one line per iteration.
"""

from __future__ import annotations

import argparse
import time

import ray
import yaml


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--per-agent", action="store_true", help="one policy per agent instead of a shared one")
    ap.add_argument("--env", action="append", default=[], metavar="KWARG=VALUE", help="an AliceBob kwarg")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from ray.rllib.algorithms.ppo import PPOConfig

    from rl_system.rllib import make_multi_agent, register

    env_config = {"seed": args.seed, **{k: yaml.safe_load(v) for k, v in (a.split("=", 1) for a in args.env)}}
    agents = make_multi_agent("AliceBob", env_config).possible_agents
    ray.init(include_dashboard=False, log_to_driver=False)
    register()
    policies = set(agents) if args.per_agent else {"shared"}
    config = (PPOConfig()
              .environment("rl_system/AliceBob-v0", env_config=env_config)
              .framework("torch")
              .env_runners(num_env_runners=1, num_envs_per_env_runner=4)
              .multi_agent(policies=policies,
                           policy_mapping_fn=(lambda aid, *a, **k: aid) if args.per_agent else
                           (lambda aid, *a, **k: "shared"))
              .learners(num_learners=0)
              .training(train_batch_size_per_learner=4000, minibatch_size=500, num_epochs=4, lr=5e-4)
              .debugging(seed=args.seed, log_level="ERROR"))
    algo = config.build_algo()
    for i in range(args.iterations):
        t0 = time.perf_counter()
        result = algo.train()
        runners = result["env_runners"]
        print(f"iteration {i + 1}: {runners.get('num_env_steps_sampled_lifetime', 0):,.0f} env steps, "
              f"episode return mean {runners.get('episode_return_mean', float('nan')):.3f}, "
              f"{time.perf_counter() - t0:.1f} s")
    algo.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
