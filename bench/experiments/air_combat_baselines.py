"""What wins against AirCombat's scripted opponent: outcome rates of scripted red policies.

Red flies a batched rule, blue the env's scripted opponent (pursuit, fires within 20 km on the nose,
turns tail on red missiles within 12 km). The rule: pursue (turn toward blue), fire the first
``--salvo`` missiles once blue is within ``fire_km`` and 15 degrees of the nose, and turn tail on
the nearest incoming missile while it is within ``evade_km``. A uniformly random red is the
floor. The table shows which firing ranges and evasion ranges win, i.e. what a learned policy has
to discover (and what the shaping in ``launch/configs/air_combat_ppo.yaml`` points at).

    python -m bench.experiments.air_combat_baselines [--fire-km 16 18 20 22 25] [--evade-km 12 20]
                                                     [--episodes 4000] [--envs 1024] [--time-scale 16]
                                                     [--checkpoint RUN [RUN ...]]

``--checkpoint`` adds rows for trained runs (their own env settings, sampled actions), with the
same columns: how often and from how far they fire is what tells a policy that learned the
manoeuvre from one that did not.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import torch

from rl_system.envs.air_combat import (
    N_DISCRETE_ACTIONS,
    OBS_BEARING_COS,
    OBS_BEARING_SIN,
    OBS_MISSILE_BEARING_COS,
    OBS_MISSILE_BEARING_SIN,
    OBS_MISSILE_RANGE,
    OBS_MISSILES_LEFT,
    OBS_RANGE,
    OBS_WARNING,
    RANGE_SCALE_M,
    AirCombatVecEnv,
)

OUTCOMES = ("win", "loss", "draw", "timeout")  # info["outcome"] 1..4
MISSILES = 6
FIRE_CONE_RAD = math.radians(15.0)


def scripted_red(fire_km: float, evade_km: float, salvo: int):
    """A batched rule ``obs -> [N]`` discrete action (``6 * fire + 2 * rudder_idx + throttle_idx``)."""

    def act(obs: dict[str, torch.Tensor], gen: torch.Generator) -> torch.Tensor:
        o = obs["obs"]
        bearing = torch.atan2(o[:, OBS_BEARING_SIN], o[:, OBS_BEARING_COS])
        missile_bearing = torch.atan2(o[:, OBS_MISSILE_BEARING_SIN], o[:, OBS_MISSILE_BEARING_COS])
        threat = (o[:, OBS_WARNING] > 0.5) & (o[:, OBS_MISSILE_RANGE] * RANGE_SCALE_M < evade_km * 1000.0)
        command = torch.where(threat, missile_bearing - math.pi * torch.sign(missile_bearing), bearing)
        rudder_idx = (command > 0.05).long() * 2 + ((command >= -0.05) & (command <= 0.05)).long()
        fired = MISSILES - torch.round(o[:, OBS_MISSILES_LEFT] * MISSILES)
        fire = ((o[:, OBS_RANGE] * RANGE_SCALE_M < fire_km * 1000.0) & (bearing.abs() < FIRE_CONE_RAD)
                & (fired < salvo))
        return 6 * fire.long() + 2 * rudder_idx + 1  # full throttle

    return act


def random_red(obs: dict[str, torch.Tensor], gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, N_DISCRETE_ACTIONS, (obs["obs"].shape[0],), generator=gen)


def outcome_rates(policy, episodes: int, num_envs: int, time_scale: float, seed: int = 1,
                  env_kwargs: dict[str, Any] | None = None) -> dict[str, float]:
    """Rates of the outcomes over the first ``episodes`` finished episodes (``env_kwargs``
    override the time scale and 120 s limit), plus how red fires in them: the share of episodes with a launch, the median range of the first launch (km) and the
    mean number of launches."""
    env = AirCombatVecEnv(num_envs, seed=seed, **({"time_scale": time_scale, "max_time_s": 120.0} | (env_kwargs or {})))
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset(seed=seed)
    counts = torch.zeros(len(OUTCOMES) + 1, dtype=torch.int64)
    first_km = torch.full((num_envs,), math.nan)
    launches = torch.zeros(num_envs)
    ended_first, ended_launches = [], []
    with torch.no_grad():
        while int(counts.sum()) < episodes:
            o = obs["obs"]
            step = env.step(policy(obs, gen))
            launched = (o[:, OBS_MISSILES_LEFT] - step.final_obs["obs"][:, OBS_MISSILES_LEFT]) > 1e-3
            first_km = torch.where(launched & first_km.isnan(), o[:, OBS_RANGE] * RANGE_SCALE_M / 1000.0, first_km)
            launches += launched.float()
            done = step.terminated | step.truncated
            if bool(done.any()):
                counts += torch.bincount(step.info["outcome"][done].long(), minlength=len(OUTCOMES) + 1)
                ended_first.append(first_km[done])
                ended_launches.append(launches[done])
                first_km[done], launches[done] = math.nan, 0.0
            obs = step.obs
    total = max(int(counts.sum()), 1)
    first, fired = torch.cat(ended_first), torch.cat(ended_launches)
    return {name: int(counts[k + 1]) / total for k, name in enumerate(OUTCOMES)} | {
        "episodes": total, "fired": float((~first.isnan()).float().mean()),
        "first_launch_km": float(first.nanmedian()), "launches": float(fired.mean())}


def checkpoint_red(path: str) -> tuple[Any, dict[str, Any]]:
    """A trained policy as red (sampled actions, as in training) and its env kwargs."""
    from rl_system.algos import load_policy
    from rl_system.checkpoint import keys
    from rl_system.checkpoint.resume import find_resume
    from rl_system.config import RunConfig, load_config

    state = find_resume(path, load_config(None), None).state
    kwargs = dict(RunConfig.model_validate(state[keys.CONFIG]).env.kwargs)
    policy = load_policy(state, AirCombatVecEnv(1, **kwargs))
    return (lambda obs, gen: policy.act(obs)[0]), kwargs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fire-km", type=float, nargs="*", default=[16.0, 18.0, 20.0, 22.0, 25.0])
    ap.add_argument("--evade-km", type=float, nargs="*", default=[12.0, 20.0])
    ap.add_argument("--salvo", type=int, default=1, help="missiles fired per episode by the rule")
    ap.add_argument("--episodes", type=int, default=4000)
    ap.add_argument("--envs", type=int, default=1024)
    ap.add_argument("--time-scale", type=float, default=16.0, help="as in launch/configs/air_combat_ppo.yaml")
    ap.add_argument("--checkpoint", nargs="+", default=[], metavar="RUN",
                    help="also trained runs as red (their env settings), after the scripted rows")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"red policy vs scripted blue (time_scale {args.time_scale:g}, 120 s limit, >= {args.episodes} episodes each)")
    print("red policy | " + " | ".join(OUTCOMES) + " | fired | first launch km (median) | launches")
    print("---|" + "---|" * (len(OUTCOMES) + 3))
    rows = [("uniformly random", random_red, {})]
    rows += [(f"fire within {f:g} km, evade within {e:g} km", scripted_red(f, e, args.salvo), {})
             for f in args.fire_km for e in args.evade_km]
    rows += [(f"trained: {path}", *checkpoint_red(path)) for path in args.checkpoint]
    for name, policy, kwargs in rows:
        r = outcome_rates(policy, args.episodes, args.envs, args.time_scale, env_kwargs=kwargs)
        print(f"{name} | " + " | ".join(f"{r[k]:.3f}" for k in OUTCOMES)
              + f" | {r['fired']:.3f} | {r['first_launch_km']:.1f} | {r['launches']:.2f}", flush=True)


if __name__ == "__main__":
    main()
