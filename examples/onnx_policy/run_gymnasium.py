"""Run a policy exported with ``rl-system export --format onnx`` on a Gymnasium env, with
onnxruntime, Gymnasium and NumPy only: no rl_system, no torch, no Ray.

    rl-system export runs/cartpole --format onnx --out cartpole.onnx
    python examples/onnx_policy/run_gymnasium.py cartpole.onnx CartPole-v1 --episodes 100

The graph's inputs are the observation keys (a single-key policy's one input takes the env's
observation as it comes) and, for a recurrent policy, ``state`` (zeros when an episode begins,
then the ``new_state`` output of the previous step). Its first output is the greedy action.
Prints the mean and standard deviation of the episode returns, one line.
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import numpy as np
import onnxruntime


def run_episodes(model: str, env_id: str, episodes: int, seed: int = 0) -> np.ndarray:
    """The returns of ``episodes`` episodes of ``env_id`` acted by the ONNX policy ``model``."""
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in session.get_inputs()}
    obs_names = [name for name in inputs if name != "state"]
    if len(obs_names) != 1:
        raise SystemExit(f"{model}: this runner feeds one observation input; the graph has {obs_names}")
    recurrent = "state" in inputs
    state_size = inputs["state"].shape[1] if recurrent else 0
    dtype = np.float32 if "float" in inputs[obs_names[0]].type else np.int64
    env = gym.make(env_id)
    returns = np.zeros(episodes)
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        state = np.zeros((1, state_size), np.float32)
        done = False
        while not done:
            feed = {obs_names[0]: np.asarray(obs, dtype)[None]}
            if recurrent:
                feed["state"] = state
            outputs = session.run(None, feed)
            if recurrent:
                state = outputs[3]
            obs, reward, terminated, truncated, _ = env.step(outputs[0][0])
            returns[episode] += reward
            done = terminated or truncated
    env.close()
    return returns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="the .onnx file rl-system export wrote")
    p.add_argument("env_id", help="a Gymnasium id whose observations the policy was trained on, e.g. CartPole-v1")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0, help="episode i is reset with seed + i")
    args = p.parse_args(argv)
    returns = run_episodes(args.model, args.env_id, args.episodes, args.seed)
    loaded = ", ".join(f"{m}: {m in sys.modules}" for m in ("rl_system", "torch", "ray"))
    print(f"{args.env_id}: return {returns.mean():.2f} ± {returns.std():.2f} over {args.episodes} episodes "
          f"(onnxruntime {onnxruntime.__version__}; imported {loaded})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
