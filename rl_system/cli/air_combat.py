"""``rl-system air-combat range-map`` and ``rl-system eval RUN --launch-map``: the AirCombat
missile envelope (:mod:`rl_system.envs.air_combat.envelope`) and a policy's launches on it
(:mod:`rl_system.policy.launch_map`). ``--launch-map`` is an extra of ``eval`` registered here
(:func:`rl_system.cli.evaluate.register_extra`), so ``eval`` knows nothing of AirCombat. Bad
arguments end in one line and exit 2, as everywhere in the CLI."""

from __future__ import annotations

import argparse
import inspect
import math
from pathlib import Path
from typing import Any

from rl_system.cli.common import env_kwarg, fail
from rl_system.cli.evaluate import Extra, register_extra
from rl_system.config import ConfigError, apply_override


def add_parser(sub: Any) -> None:
    a = sub.add_parser("air-combat", help="AirCombat tools: the missile's launch envelope")
    asub = a.add_subparsers(dest="air_combat_command", required=True)
    r = asub.add_parser("range-map", help="sweep shots over launch range x target aspect x manoeuvre in one env "
                                          "batch; draw the envelope and the space-time diagram")
    r.add_argument("--out", type=Path, default=Path("range_map.png"), metavar="MAP.png",
                   help="the envelope: hit probability over launch range x target aspect, one half disc per "
                        "manoeuvre, with R_max and the no-escape range (default: %(default)s)")
    r.add_argument("--space-time", type=Path, default=None, metavar="OUT.png",
                   help="distance from the launch point against time: the missile's reach and the targets' escape "
                        "paths, per traced aspect (default: <out>_space_time.png)")
    r.add_argument("--json", dest="json_out", type=Path, default=None, metavar="TABLE.json",
                   help="also write the parameters, every cell, the edges per manoeuvre and the timing")
    r.add_argument("--env", dest="env_kwargs", action="append", default=[], metavar="KWARG=VALUE",
                   help="an AirCombat constructor kwarg (repeatable); the physics reads time_scale and "
                        "scripted_evade_range_m (default: time_scale=16, as launch/configs/air_combat_ppo.yaml)")
    r.add_argument("--ranges", default="2:60:2", metavar="FIRST:LAST:STEP", help="launch ranges in km (default %(default)s)")
    r.add_argument("--aspects", default="0:180:15", metavar="FIRST:LAST:STEP",
                   help="target aspects, degrees: 0 hot (nose on the shooter), 90 beam, 180 cold (default %(default)s)")
    r.add_argument("--manoeuvres", nargs="+", default=None, metavar="NAME",
                   help="what the target flies from the launch: straight, beam, cold, scripted (the training "
                        "opponent) (default: all)")
    r.add_argument("--samples", type=int, default=6, metavar="K",
                   help="shots per cell; shooter and target speeds drawn per shot (default %(default)s)")
    r.add_argument("--shooter-speed", default="200:300", metavar="LOW[:HIGH]",
                   help="the shooter's speed, m/s: one value or a range (the episodes' start speeds; default %(default)s)")
    r.add_argument("--target-speed", default="200:300", metavar="LOW[:HIGH]",
                   help="the target's speed, m/s: one value or a range (the episodes' start speeds; default %(default)s)")
    r.add_argument("--trace-aspects", nargs="+", type=float, default=[0.0, 90.0, 180.0], metavar="DEG",
                   help="aspects drawn in the space-time diagram (on the aspect grid; default 0 90 180)")
    r.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the speeds drawn from --shooter-speed / --target-speed ranges and of the env "
                        "(default %(default)s)")
    r.set_defaults(handler=cmd_range_map)


def add_eval_flags(e: argparse.ArgumentParser) -> None:
    e.add_argument("--launch-map", type=Path, default=None, metavar="OUT.png",
                   help="AirCombat: over --episodes episodes, record every launch of the policy (range, target "
                        "aspect and off-boresight angle at launch; hit, miss, or in flight when the episode ended), "
                        "sweep the missile envelope under the checkpoint's env kwargs and draw the launches on it; "
                        "prints the fractions fired inside the no-escape range, between it and the maximum range, "
                        "and beyond, with their hit rates, and writes them with the evaluation to "
                        "<run dir>/launch_map.json (or --json); not with --render, --opponent or --greedy-level")


def grid(text: str, flag: str) -> tuple[float, ...]:
    """``FIRST:LAST:STEP`` -> the values from FIRST to LAST (inclusive) in STEPs."""
    try:
        first, last, step = (float(x) for x in text.split(":"))
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected FIRST:LAST:STEP, e.g. 2:60:2") from None
    if step <= 0 or last < first:
        raise ConfigError(f"{flag} {text!r}: STEP must be > 0 and LAST >= FIRST")
    count = math.floor((last - first) / step + 1e-9) + 1
    return tuple(round(first + i * step, 9) for i in range(count))


def speed_range(text: str, flag: str) -> tuple[float, float]:
    """``LOW[:HIGH]`` in m/s."""
    try:
        parts = [float(x) for x in text.split(":")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise ConfigError(f"{flag} {text!r}: expected LOW or LOW:HIGH in m/s, e.g. 200:300")
    return (parts[0], parts[-1])


def env_kwargs(assignments: list[str]) -> dict[str, Any]:
    """``--env`` assignments as AirCombat kwargs, ``time_scale`` 16 unless given; ConfigError for
    a name the env does not take."""
    from rl_system.envs.air_combat import AirCombatVecEnv
    from rl_system.envs.air_combat.envelope import DEFAULT_ENV_KWARGS

    tree: dict[str, Any] = {}
    for assignment in assignments:
        apply_override(tree, env_kwarg(assignment))
    known = set(inspect.signature(AirCombatVecEnv).parameters) - {"num_envs", "device", "seed"}
    for name in tree:
        if name not in known:
            raise ConfigError(f"--env {name}: AirCombat takes no such kwarg (it takes {', '.join(sorted(known))})")
    return {**DEFAULT_ENV_KWARGS, **tree}


def cmd_range_map(args: argparse.Namespace) -> int:
    from rl_system.envs.air_combat.envelope import MANOEUVRES, EnvelopeError, SweepSpec, sweep
    from rl_system.envs.air_combat.envelope_plot import PlotError, draw_envelope, draw_space_time
    from rl_system.filesystems import write_json

    spec = SweepSpec(ranges_km=grid(args.ranges, "--ranges"), aspects_deg=grid(args.aspects, "--aspects"),
                     manoeuvres=tuple(args.manoeuvres or MANOEUVRES), samples=args.samples,
                     shooter_speed=speed_range(args.shooter_speed, "--shooter-speed"),
                     target_speed=speed_range(args.target_speed, "--target-speed"), seed=args.seed,
                     env_kwargs=env_kwargs(args.env_kwargs), trace_aspects_deg=tuple(args.trace_aspects))
    try:
        envelope = sweep(spec)
    except (EnvelopeError, ValueError, TypeError) as err:  # the grid, or an env kwarg the env refuses
        return fail(f"range-map: {err}")
    print(f"swept {spec.shots:,} shots ({len(spec.manoeuvres)} manoeuvres x {len(spec.aspects_deg)} aspects x "
          f"{len(spec.ranges_km)} ranges x {spec.samples}) in one batch: {envelope.sim_steps} steps of "
          f"{envelope.dt:.3f} s in {envelope.wall_s:.2f} s")
    print(_edge_table(envelope))
    space_time = args.space_time or args.out.with_name(f"{args.out.stem}_space_time{args.out.suffix or '.png'}")
    try:
        wrote = [draw_envelope(envelope, args.out)]
        if envelope.traces:
            wrote.append(draw_space_time(envelope, space_time))
        else:
            print(f"no space-time diagram: none of --trace-aspects {' '.join(f'{a:g}' for a in spec.trace_aspects_deg)} "
                  f"is on the aspect grid")
        if args.json_out is not None:
            args.json_out.parent.mkdir(parents=True, exist_ok=True)
            write_json(args.json_out, envelope.to_json())
            wrote.append(args.json_out)
    except PlotError as err:
        return fail(str(err))
    except OSError as err:
        return fail(f"cannot write the output: {err}", 1)
    print("wrote " + ", ".join(str(p) for p in wrote))
    return 0


def _edge_table(envelope: Any) -> str:
    """Per aspect, the far edge of the hit region against each manoeuvre (km)."""
    s = envelope.spec
    names = {"straight": "R_max", "cold": "R_ne"}
    head = "aspect  " + "".join(f"{names.get(m, m):>10}" for m in s.manoeuvres)
    rows = [head]
    for j, a in enumerate(s.aspects_deg):
        cells = "".join(f"{'-' if math.isnan(float(envelope.edge_km[i, j])) else f'{float(envelope.edge_km[i, j]):.1f}':>10}"
                        for i in range(len(s.manoeuvres)))
        rows.append(f"{a:5.0f}°  {cells}")
    return "\n".join(rows) + "\n(km where the hit probability falls below 0.5; R_max: target straight, " \
                             "R_ne: target turning cold at launch)"


def cmd_launch_map(args: argparse.Namespace, state: dict[str, Any], run_dir: Path | None) -> int:
    from rl_system.envs.air_combat.envelope_plot import PlotError
    from rl_system.filesystems import write_json
    from rl_system.policy.launch_map import launch_map

    try:
        result = launch_map(state, args.launch_map, episodes=args.episodes, deterministic=args.deterministic,
                            seed=args.seed, num_envs=args.num_envs)
    except PlotError as err:
        return fail(str(err))
    except ValueError as err:
        return fail(f"cannot draw the launch map: {err}")
    except OSError as err:
        return fail(f"cannot write the launch map: {err}", 1)
    lc = result["launches"]

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    print(f"{result['env']} v{result['policy_version']}: {lc['launches']} launches in {lc['episodes_ended']} episodes "
          f"(win rate {result.get('win_rate', float('nan')):.3f} over {result['episodes']}); hit {pct(lc['hit_rate'])} of those decided; "
          f"inside R_ne {pct(lc['inside_no_escape']['fraction'])} (hit {pct(lc['inside_no_escape']['hit_rate'])}), "
          f"between R_ne and R_max {pct(lc['between']['fraction'])} (hit {pct(lc['between']['hit_rate'])}), "
          f"beyond R_max {pct(lc['beyond_max']['fraction'])}; more than 30° off the nose "
          f"{pct(lc['off_nose_fraction'])}; envelope swept in {result['envelope_s']:.1f} s")
    first, later = lc["first_shots"], lc["later_shots"]
    if first["count"]:
        print(f"first launch of an episode ({first['count']}): median {first['range_km_median']:.1f} km at aspect "
              f"{first['aspect_deg_median']:.0f}°, inside R_ne {pct(first['inside_no_escape'])}, hit "
              f"{pct(first['hit_rate'])} of those decided; later launches ({later['count']}): hit "
              f"{pct(later['hit_rate'])}, still in flight when the episode ended {pct(later['cut_fraction'])}")
    out = args.json_out or ((run_dir or Path(".")) / "launch_map.json")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, result)
    except OSError as err:
        return fail(f"cannot write {out}: {err}", 1)
    print(f"wrote {args.launch_map}, {out}")
    return 0


register_extra(Extra("launch_map", add_eval_flags, cmd_launch_map,
                     excludes=("render", "video", "opponent", "greedy_level")))
