"""``rl-system eval``: a checkpoint's policy without training. By default the episode statistics
(:mod:`rl_system.policy.evaluation`; on a multi-agent run each agent's return too);
``--render``/``--video``: one episode as a picture or a video; an env's own way to evaluate where
its CLI module registers one (:func:`register_extra`: AirCombat's ``--launch-map``,
:mod:`rl_system.cli.air_combat`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rl_system.cli.common import add_pick_flag, fail, with_env_kwargs


@dataclass(frozen=True)
class Extra:
    """An env's own way to evaluate, chosen by a flag of its own: ``add_flags(parser)`` adds the
    flag (argparse ``dest``: ``dest``), ``run(args, state, run_dir) -> exit code`` runs where it is
    given, instead of the statistics; ``excludes``: the dests of the flags it does not combine with."""

    dest: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, dict, Path | None], int]
    excludes: tuple[str, ...] = ()


_EXTRAS: list[Extra] = []


def register_extra(extra: Extra) -> None:
    """Add ``extra`` to ``rl-system eval`` (its flag is listed after the built-in ones)."""
    _EXTRAS.append(extra)


@dataclass(frozen=True)
class Conflict:
    """``flag`` (a dest) given together with any of ``others`` is refused with ``says``, formatted
    with the flags' names: ``flag``, ``other`` (the first of ``others`` given), ``others`` (all)."""

    flag: str
    others: tuple[str, ...]
    says: str


_PICTURES = ("render", "video")
# Checked in this order after the checkpoint has loaded; the first that applies is the one line.
CONFLICTS = (
    Conflict("render", ("video",), "{flag} and {other}: one at a time"),
    Conflict("opponent", _PICTURES, "{flag} does not apply to {other} (the episode is against the scripted opponent)"),
    Conflict("greedy_level", _PICTURES, "{flag} does not apply to {other}"),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("eval", help="run a checkpoint's policy without training")
    e.add_argument("checkpoint", metavar="CHECKPOINT",
                   help="a checkpoint file, a checkpoints directory or a run directory")
    add_pick_flag(e)
    e.add_argument("--episodes", type=int, default=100, metavar="N",
                   help="episodes to finish and average over (N >= 1); each env contributes at most its share, "
                        "ceil(N / envs), so short episodes are not over-represented (default %(default)s)")
    greedy = e.add_mutually_exclusive_group()
    greedy.add_argument("--deterministic", action="store_true",
                        help="greedy (argmax) or mean actions instead of sampling")
    greedy.add_argument("--greedy-level", choices=("high", "low"), default=None,
                        help="HMASD with its hierarchy: argmax at that level only (high: skills, low: actions), the "
                             "other level samples; not with --deterministic")
    e.add_argument("--env", dest="env_overrides", action="append", default=[], metavar="KWARG=VALUE",
                   help="override one of the env kwargs the checkpoint is tested under (its env.kwargs, "
                        "then env.eval_kwargs) for this evaluation (repeatable), e.g. --env random_start=true; "
                        "the observation and action shapes must not change")
    e.add_argument("--num-envs", type=int, default=None, metavar="N",
                   help="envs stepped at once (default: --episodes, at most 64); each finishes at most its share "
                        "of the episodes")
    e.add_argument("--seed", type=int, default=12345, metavar="S",
                   help="seed of the envs and the action sampling (default %(default)s)")
    e.add_argument("--device", default="cpu", metavar="DEV",
                   help="torch device the statistics' envs and policy run on (--render and --video run on the CPU; "
                        "default: %(default)s)")
    e.add_argument("--json", dest="json_out", type=Path, default=None, metavar="OUT",
                   help="where to write the result (default: a run's <run dir>/eval.json; ./eval.json for a bare "
                        "checkpoint file outside a run)")
    e.add_argument("--opponent", default=None, metavar="CHECKPOINT",
                   help="another checkpoint (file, checkpoints dir or run dir; of a run, its default --pick) "
                        "whose policy flies the other side instead of the env's scripted opponent "
                        "(two-player envs: AirCombat)")
    e.add_argument("--random-groups", nargs="+", default=(), metavar="GROUP",
                   help="agent groups of a MAPPO policy whose agents differ (mappo.groups) that act uniformly at "
                        "random: a trained group against opponents at random, or every group for the baseline; "
                        "the result gives each group's return")
    _add_picture_flags(e)
    for extra in _EXTRAS:
        extra.add_flags(e)
    e.set_defaults(handler=cmd_eval)


def _add_picture_flags(e: argparse.ArgumentParser) -> None:
    e.add_argument("--render", type=Path, default=None, metavar="OUT.png",
                   help="instead of the statistics, draw one episode (env index 0) to a PNG "
                        "(AirCombat, Navigation, CartPole; gym:<id> and vmas:<scenario> envs: their own last picture; "
                        "needs matplotlib: pip install matplotlib, or pip install -e '.[render]' in a checkout)")

    e.add_argument("--video", type=Path, default=None, metavar="OUT.mp4",
                   help="instead of the statistics, one episode (env index 0) as an H.264 video (.mp4, .mkv, .mov): "
                        "AirCombat, Navigation and CartPole drawn frame by frame, gym:<id> envs by their own "
                        "rgb_array rendering, vmas:<scenario> envs by VMAS's renderer (headless through libEGL, or an "
                        "X display); needs PyAV and matplotlib (pip install -e '.[render]' in a checkout); not with "
                        "--render, --opponent or --greedy-level")
    e.add_argument("--fps", type=int, default=30, metavar="N", help="--video: frames per second (default %(default)s)")
    e.add_argument("--max-frames", type=int, default=300, metavar="N",
                   help="--video: at most this many frames, spread evenly over the episode, first and last kept "
                        "(default %(default)s)")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def conflict(args: argparse.Namespace) -> str | None:
    """The one line refusing the first combination of given flags that :data:`CONFLICTS` or a
    registered extra's ``excludes`` rules out; None where the flags combine."""
    rules = CONFLICTS + tuple(Conflict(x.dest, x.excludes, "{flag} does not combine with {others}") for x in _EXTRAS)
    for rule in rules:
        given = [dest for dest in rule.others if getattr(args, dest) is not None]
        if getattr(args, rule.flag) is not None and given:
            names = [_flag(dest) for dest in rule.others]
            others = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
            return rule.says.format(flag=_flag(rule.flag), other=_flag(given[0]), others=others)
    return None


def cmd_eval(args: argparse.Namespace) -> int:
    from rl_system.checkpoint import CheckpointError, pick_checkpoint

    if args.episodes < 1:
        return fail("--episodes: expected a positive number", 2)
    try:
        found = pick_checkpoint(args.checkpoint, args.pick)
    except CheckpointError as err:
        return fail(f"cannot load checkpoint: {err}", 2)
    if args.env_overrides:
        found.state = with_env_kwargs(found.state, args.env_overrides)
    refused = conflict(args)
    if refused is not None:
        return fail(refused, 2)
    extra = next((x for x in _EXTRAS if getattr(args, x.dest) is not None), None)
    if extra is not None:
        return extra.run(args, found.state, found.run_dir)
    if args.render is not None or args.video is not None:
        return _draw_episode(args, found.state)
    return _statistics(args, found)


def _statistics(args: argparse.Namespace, found) -> int:
    """Episode statistics of the checkpoint ``found`` (against ``--opponent`` where given), one
    line on stdout and the result as JSON."""
    from rl_system.checkpoint import CheckpointError, pick_checkpoint
    from rl_system.filesystems import write_json
    from rl_system.policy.evaluation import evaluate

    opponent = None
    if args.opponent is not None:
        try:
            opponent = pick_checkpoint(args.opponent).state
        except CheckpointError as err:
            return fail(f"cannot load opponent checkpoint: {err}", 2)
    try:
        result = evaluate(found.state, episodes=args.episodes, deterministic=args.greedy_level or args.deterministic,
                          num_envs=args.num_envs, seed=args.seed, device=args.device, opponent=opponent,
                          random_groups=tuple(args.random_groups))
    except ValueError as err:
        return fail(f"cannot evaluate: {err}", 2)
    result["checkpoint"] = found.path
    result["opponent"] = args.opponent
    if not result["episodes"]:
        return fail(f"no episode finished within {result['env_steps']:,} env steps", 1)
    rates = "".join(f", {k[:-5]} {v:.3f}" for k, v in result.items() if k.endswith("_rate"))
    rates += "".join(f", {k[:-5]} {v:.2f} ± {result[k[:-5] + '_std']:.2f}" for k, v in result.items()
                     if k.endswith("_mean") and k not in ("return_mean", "length_mean", "agent_return_mean",
                                                              "group_return_mean"))
    against = f" against v{result['opponent_version']} of {args.opponent}" if opponent is not None else ""
    print(f"{result['env']} v{result['policy_version']}: return {result['return_mean']:.2f} ± {result['return_std']:.2f}, "
          f"length {result['length_mean']:.1f} ± {result['length_std']:.1f}{rates} over {result['episodes']} episodes"
          f"{' (deterministic)' if args.deterministic else ''}"
          f"{f' (argmax at the {args.greedy_level} level only)' if args.greedy_level else ''}{against}")
    if "agent_return_mean" in result:
        print(agent_line(result))
    if "group_return_mean" in result:
        at_random = set(result["random_groups"])
        print("  per group: " + ", ".join(f"{g} {v:.2f}{' (at random)' if g in at_random else ''}"
                                          for g, v in result["group_return_mean"].items()))
    out = args.json_out or ((found.run_dir or Path(".")) / "eval.json")
    write_json(out, result)
    print(f"wrote {out}")
    return 0


def agent_line(result: dict) -> str:
    """The console line of a multi-agent result: each agent's return, mean ± std, in agent order."""
    each = zip(result["agent_return_mean"], result["agent_return_std"])
    return "  per agent: " + ", ".join(f"{i} {m:.2f} ± {s:.2f}" for i, (m, s) in enumerate(each))


def _draw_episode(args: argparse.Namespace, state: dict) -> int:
    """``eval --render OUT.png`` or ``eval --video OUT.mp4``: one episode of env index 0."""
    from rl_system.envs.render import RenderError
    from rl_system.policy.render import render_episode

    greedy = " (deterministic)" if args.deterministic else ""
    try:
        if args.video is not None:
            from rl_system.policy.video import write_video

            ep = write_video(state, args.video, deterministic=args.deterministic, seed=args.seed, fps=args.fps,
                             max_frames=args.max_frames)
            shown = f"{ep['frames']} frames of {ep['size'][0]}x{ep['size'][1]} at {ep['fps']} fps"
        else:
            ep = render_episode(state, args.render, deterministic=args.deterministic, seed=args.seed)
            shown = "a picture"
    except (RenderError, ValueError) as err:
        return fail(f"cannot render: {err}", 2)
    print(f"{ep['env']} v{ep['policy_version']}: one episode of {ep['steps']} steps, return {ep['return']:.2f}"
          f"{greedy}; wrote {ep['path']} ({shown})")
    return 0
