"""Where a checkpoint's AirCombat policy fires, on the missile envelope: ``rl-system eval RUN --launch-map OUT.png``.

:func:`launch_map` evaluates the checkpoint with a :class:`~rl_system.envs.air_combat.launches.LaunchLog`
on its env, sweeps the missile envelope under the checkpoint's own env settings
(:mod:`rl_system.envs.air_combat.envelope`) and draws red's launches on it
(:func:`~rl_system.envs.air_combat.envelope_plot.draw_launch_map`). The env package records and
draws; driving the policy is this module's part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rl_system.checkpoint import keys
from rl_system.config import RunConfig
from rl_system.envs.air_combat import RED, AirCombatVecEnv
from rl_system.envs.air_combat.envelope import SweepSpec, sweep
from rl_system.envs.air_combat.envelope_plot import draw_launch_map
from rl_system.envs.air_combat.launches import LaunchLog, classify
from rl_system.policy.evaluation import evaluate


def launch_map(state: dict[str, Any], out: Path, episodes: int = 200, deterministic: bool = False,
               seed: int = 12345, num_envs: int | None = None, samples: int = 6) -> dict[str, Any]:
    """Evaluate the checkpoint ``state`` over ``episodes`` episodes with a :class:`LaunchLog`,
    sweep the envelope under its env kwargs, draw red's launches on it at ``out``; returns the
    evaluation result with ``launches`` (:func:`classify`) and ``envelope_s`` (the sweep's wall
    time). Raises ``ValueError`` (one line) for a checkpoint of another env."""
    logs: list[LaunchLog] = []

    def attach(env: Any) -> None:
        if not isinstance(env, AirCombatVecEnv):
            raise ValueError(f"--launch-map needs an AirCombat checkpoint, not one of {type(env).__name__}")
        env.launch_log = LaunchLog(env)
        logs.append(env.launch_log)

    result = evaluate(state, episodes=episodes, deterministic=deterministic, num_envs=num_envs, seed=seed,
                      instrument=attach)
    launches = logs[0].records(side=RED)
    cfg = RunConfig.model_validate(state[keys.CONFIG])
    envelope = sweep(SweepSpec(env_kwargs=cfg.env.test_kwargs(), samples=samples, seed=seed))
    result["launches"] = classify(envelope, launches)
    result["launches"]["episodes_ended"] = logs[0].episodes_ended
    result["envelope_s"] = envelope.wall_s
    rates = result["launches"]
    title = (f"{cfg.env.name} v{result['policy_version']}: {rates['launches']} launches in {logs[0].episodes_ended} "
             f"episodes (win rate {result.get('win_rate', float('nan')):.3f}){', argmax' if deterministic else ''}, "
             f"on the envelope against the scripted opponent")
    draw_launch_map(envelope, launches, out, title)
    return result
