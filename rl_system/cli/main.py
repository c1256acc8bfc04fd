"""``rl-system`` command line. Every expected failure ends in one line on stderr and a
non-zero exit: 2 for bad input (config, flags), 1 for a run that failed, 130 for Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from rl_system import __version__
from rl_system.cli.air_combat import add_eval_flags
from rl_system.cli.air_combat import add_parser as add_air_combat_parser
from rl_system.cli.tune import add_parser as add_tune_parser
from rl_system.config import ConfigError, apply_override, build_config, load_config
from rl_system.errors import one_line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rl-system", description="Distributed actor-learner RL on Ray.")
    p.add_argument("--version", action="version", version=f"rl-system {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train with a YAML config")
    t.add_argument("config", help="YAML config file, e.g. launch/configs/cartpole_ppo.yaml")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set workers.num_envs=256 (repeatable)")
    t.add_argument("--address", default=None,
                   help="Ray cluster to join ('auto' or HOST:PORT); default: start Ray on this machine")
    t.add_argument("--run-dir", default=None, type=Path, help="directory for this run's outputs")
    t.add_argument("--quiet", action="store_true", help="no per-round console lines (--log-level warning)")
    t.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                   help="what the console shows: debug adds the full text behind one-line errors; every level "
                        "goes to <run dir>/console.log")
    t.add_argument("--resume", default=None, metavar="RUN_DIR|CHECKPOINT|latest",
                   help="continue from a checkpoint (newest valid one of a run dir, or 'latest' run)")

    e = sub.add_parser("eval", help="run a checkpoint's policy without training")
    e.add_argument("checkpoint", help="checkpoint file, checkpoints dir or run dir")
    e.add_argument("--pick", choices=("latest", "best"), default="latest",
                   help="for a run or checkpoints dir: its newest valid checkpoint, or the one with the best "
                        "training mean return (the one best.json names)")
    e.add_argument("--episodes", type=int, default=100)
    greedy = e.add_mutually_exclusive_group()
    greedy.add_argument("--deterministic", action="store_true", help="greedy / mean action instead of sampling")
    greedy.add_argument("--greedy-level", choices=("high", "low"), default=None,
                        help="HMASD: argmax at this level only (high: skills, low: actions); the other samples")
    e.add_argument("--env", dest="env_overrides", action="append", default=[], metavar="KWARG=VALUE",
                   help="override one of the env kwargs the checkpoint is tested under (its env.kwargs, "
                        "then env.eval_kwargs) for this evaluation (repeatable), e.g. --env random_start=true; "
                        "the observation and action shapes must not change")
    e.add_argument("--num-envs", type=int, default=None)
    e.add_argument("--seed", type=int, default=12345)
    e.add_argument("--json", dest="json_out", type=Path, default=None,
                   help="where to write the result (default: eval.json beside the checkpoint's run)")
    e.add_argument("--opponent", default=None, metavar="CHECKPOINT",
                   help="another checkpoint (file, checkpoints dir or run dir) whose policy flies the other "
                        "side instead of the env's scripted opponent (two-player envs: AirCombat)")
    e.add_argument("--render", type=Path, default=None, metavar="OUT.png",
                   help="instead of the statistics, draw one episode (env index 0) to a PNG "
                        "(AirCombat, Navigation; needs matplotlib: pip install matplotlib, or pip install -e '.[render]' in a checkout)")

    e.add_argument("--video", type=Path, default=None, metavar="OUT.mp4",
                   help="instead of the statistics, one episode (env index 0) as an H.264 video (.mp4, .mkv, .mov): "
                        "AirCombat, Navigation, CartPole and gym:<id> envs that render rgb_array (needs PyAV and "
                        "matplotlib: pip install -e '.[render]' in a checkout)")
    e.add_argument("--fps", type=int, default=30, help="--video: frames per second (default 30)")
    e.add_argument("--max-frames", type=int, default=300,
                   help="--video: at most this many frames, spread evenly over the episode (default 300)")

    add_eval_flags(e)

    x = sub.add_parser("export", help="a trained policy as a TorchScript or ONNX file that runs without rl_system or Ray")
    x.add_argument("checkpoint", help="run dir, checkpoints dir or checkpoint file")
    x.add_argument("--format", dest="fmt", choices=("torchscript", "onnx"), required=True)
    x.add_argument("--out", type=Path, required=True, help="the file to write (written whole or not at all)")
    x.add_argument("--pick", choices=("best", "final"), default="best",
                   help="for a run: the checkpoint of the best training mean return, or the newest")

    c = sub.add_parser("check-env", help="conformance check of an env: specs, auto-reset, seeding, state, speed")
    c.add_argument("name", help="a registered env, 'package.module:Name', 'gym:<id>' or 'envpool:<id>' (as env.name in a config)")
    c.add_argument("--env", dest="env_kwargs", action="append", default=[], metavar="KWARG=VALUE",
                   help="an env constructor kwarg (repeatable), e.g. --env size=small")
    c.add_argument("--num-envs", type=int, default=8, help="batch size N to check and time (default 8)")
    c.add_argument("--steps", type=int, default=200, help="random steps per check (default 200)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--device", default="cpu", help="torch device to build the env on (default cpu)")

    st = sub.add_parser("status", help="one-screen summary of the runs reporting on a Ray cluster")
    st.add_argument("--address", default="auto", help="Ray cluster address (default: auto)")

    add_air_combat_parser(sub)
    add_tune_parser(sub)

    g = sub.add_parser("grafana-dashboard", help="write the Grafana dashboard of the rl_system_* series (JSON)")
    g.add_argument("--out", type=Path, default=Path("rl_system_grafana_dashboard.json"))

    r = sub.add_parser("rollouts", help="work with rollout archives")
    rsub = r.add_subparsers(dest="rollouts_command", required=True)
    ri = rsub.add_parser("inspect", help="schema, size, compression and column statistics of an archive")
    ri.add_argument("file", help="an archive written with archive_every > 0 (rollouts-r*.arrow)")
    return p


def _fail(msg: str, code: int) -> int:
    print(f"rl-system: {msg}", file=sys.stderr)
    return code


def _on_sigterm(signum, frame):  # noqa: ARG001
    # SIGTERM (e.g. `ray job stop`, a scheduler) takes the Ctrl-C path: flush checkpoints, exit.
    raise KeyboardInterrupt


def cmd_train(args: argparse.Namespace) -> int:
    """``rl-system train``: :func:`rl_system.api.run_training` with the console's lines, exit codes
    and the process's start-up phases."""
    from rl_system.run.phases import PhaseClock, process_age_s

    debug = (lambda text: print(f"debug: {text}", file=sys.stderr, flush=True)) if args.log_level == "debug" else None
    clock = PhaseClock(say=debug)
    age = process_age_s()
    if age is not None:
        clock.record("interpreter", age)
    with clock.phase("config"):
        cfg = load_config(args.config, args.overrides)
    with clock.phase("imports"):  # Ray, torch and the run's modules (kept out of `--help`)
        import rl_system.run.loop  # noqa: F401 - timed here; run_training uses it
        from rl_system.api import run_training
        from rl_system.errors import RayStartError, ResumeError, TrainingError

    def say(text: str, warning: bool = False) -> None:
        print(f"rl-system: {text}" if warning else text, file=sys.stderr if warning else sys.stdout)

    def on_ray_started() -> None:
        # After ray.init, which installs its own SIGTERM handler (that one aborts the process).
        signal.signal(signal.SIGTERM, _on_sigterm)

    try:
        summary = run_training(cfg, run_dir=args.run_dir, address=args.address, resume=args.resume,
                               log_level=args.log_level, quiet=args.quiet, clock=clock, say=say,
                               on_ray_started=on_ray_started)
    except (ResumeError, RayStartError) as err:
        return _fail(str(err), 1)
    except TrainingError as err:
        return _fail(f"error: {err}", 1)
    _print_done(cfg, summary)
    _record_phases(summary, clock)
    return 0


def _print_done(cfg, summary: dict) -> None:
    ttt = summary["time_to_target_s"]
    if cfg.target_return is None:
        reached = ""  # no target configured: nothing was to be reached
    elif ttt is not None:
        reached = f", target reached in {ttt:.2f}s / {summary['steps_to_target']:,} steps"
    else:
        reached = ", target not reached"
    reseeds = summary["reseeds"]
    at = ", ".join(f"{r['env_steps']:,}" for r in reseeds)
    reseeded = f", reseeded on stall at {at} steps" if reseeds else ""
    rollbacks = summary.get("rollbacks") or []
    back = ", ".join(f"{r['env_steps']:,} (to {r['to_env_steps']:,})" for r in rollbacks)
    rolled = f", rolled back on collapse at {back} steps" if rollbacks else ""
    print(f"done: {summary['env_steps']:,} env steps in {summary['wall_time_s']:.2f}s "
          f"({summary['steps_per_s']:,.0f} steps/s), final mean return {_fmt(summary['final_mean_return'])}{reached}"
          f"{reseeded}{rolled}")


def _record_phases(summary: dict, clock) -> None:
    """The whole process's phases into ``summary.json`` (the run wrote it before Ray stopped)."""
    from rl_system.filesystems import write_json

    summary["phases_s"] = dict(clock.seconds)
    path = summary.get("run_dir")
    if path:
        try:
            write_json(Path(path) / "summary.json", summary)
        except OSError:
            pass  # the run's own summary stays; these figures are for people


def _fmt(value: float | None) -> str:
    """A return for a person, without float noise: two decimals (1.5000000453 -> 1.50), whole
    numbers from 10,000 up."""
    return "none" if value is None else f"{value:.2f}" if abs(value) < 1e4 else f"{value:,.0f}"


def cmd_status(args: argparse.Namespace) -> int:
    from rl_system.observe.telemetry import format_status, read_status

    try:
        runs = read_status(args.address)
    except ConnectionError as err:
        return _fail(f"cannot reach a Ray cluster at {args.address!r}: {err}", 1)
    print(format_status(runs))
    return 0


def cmd_grafana_dashboard(args: argparse.Namespace) -> int:
    from rl_system.filesystems import write_json
    from rl_system.observe.grafana import dashboard

    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, dashboard())
    except OSError as err:
        return _fail(f"cannot write {args.out}: {err}", 1)
    print(f"wrote {args.out} (Grafana: Dashboards > Import)")
    return 0


def env_kwarg(assignment: str) -> str:
    """``assignment`` if it reads ``KWARG=VALUE`` (an ``--env`` flag), else ConfigError."""
    if "=" not in assignment or assignment.startswith("="):
        raise ConfigError(f"--env {assignment!r}: expected KWARG=VALUE, e.g. random_start=false")
    return assignment


def with_env_kwargs(state: dict, assignments: list[str]) -> dict:
    """``state`` with ``KWARG=VALUE`` assignments applied to the env kwargs its policy is tested
    under (``env.eval_kwargs``, which win over ``env.kwargs``; a copy: the checkpoint's own dict is
    left alone). ConfigError on a malformed assignment."""
    import copy

    tree = copy.deepcopy(state["config"])
    for assignment in assignments:
        apply_override(tree, f"env.eval_kwargs.{env_kwarg(assignment)}")
    build_config(tree)
    return {**state, "config": tree}


def cmd_eval(args: argparse.Namespace) -> int:
    from rl_system.checkpoint import CheckpointError, find_resume
    from rl_system.filesystems import write_json
    from rl_system.policy.evaluation import evaluate

    if args.episodes < 1:
        return _fail("--episodes: expected a positive number", 2)
    try:
        found = find_resume(args.checkpoint, load_config(None), None, pick=args.pick)
    except CheckpointError as err:
        return _fail(f"cannot load checkpoint: {err}", 1)
    if args.env_overrides:
        found.state = with_env_kwargs(found.state, args.env_overrides)
    picture = next((flag for flag, value in (("--render", args.render), ("--video", args.video)) if value), None)
    if args.render is not None and args.video is not None:
        return _fail("--render and --video: one at a time", 2)
    if picture and args.opponent is not None:
        return _fail(f"--opponent does not apply to {picture} (the episode is against the scripted opponent)", 2)
    if picture and args.greedy_level is not None:
        return _fail(f"--greedy-level does not apply to {picture}", 2)
    if args.launch_map is not None and (picture or args.opponent is not None or args.greedy_level is not None):
        return _fail("--launch-map does not combine with --render, --video, --opponent or --greedy-level", 2)
    if args.launch_map is not None:
        from rl_system.cli.air_combat import cmd_launch_map

        return cmd_launch_map(args, found.state, found.run_dir)
    if picture:
        return _draw_episode(args, found.state)
    opponent = None
    if args.opponent is not None:
        try:
            opponent = find_resume(args.opponent, load_config(None), None).state
        except CheckpointError as err:
            return _fail(f"cannot load opponent checkpoint: {err}", 1)
    try:
        result = evaluate(found.state, episodes=args.episodes, deterministic=args.greedy_level or args.deterministic,
                          num_envs=args.num_envs, seed=args.seed, opponent=opponent)
    except ValueError as err:
        return _fail(f"cannot evaluate: {err}", 2)
    result["checkpoint"] = found.path
    result["opponent"] = args.opponent
    if not result["episodes"]:
        return _fail(f"no episode finished within {result['env_steps']:,} env steps", 1)
    rates = "".join(f", {k[:-5]} {v:.3f}" for k, v in result.items() if k.endswith("_rate"))
    against = f" against v{result['opponent_version']} of {args.opponent}" if opponent is not None else ""
    print(f"{result['env']} v{result['policy_version']}: return {result['return_mean']:.2f} ± {result['return_std']:.2f}, "
          f"length {result['length_mean']:.1f} ± {result['length_std']:.1f}{rates} over {result['episodes']} episodes"
          f"{' (deterministic)' if args.deterministic else ''}"
          f"{f' (argmax at the {args.greedy_level} level only)' if args.greedy_level else ''}{against}")
    out = args.json_out or ((found.run_dir or Path(".")) / "eval.json")
    write_json(out, result)
    print(f"wrote {out}")
    return 0


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
        return _fail(f"cannot render: {err}", 2)
    print(f"{ep['env']} v{ep['policy_version']}: one episode of {ep['steps']} steps, return {ep['return']:.2f}"
          f"{greedy}; wrote {ep['path']} ({shown})")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rl_system.api import export
    from rl_system.policy.export import ExportError

    try:
        out = export(args.checkpoint, args.fmt, args.out, pick=args.pick)
    except ExportError as err:
        return _fail(f"cannot export: {err}", 2)
    print(f"wrote {out} ({args.fmt}: one input per observation key, then state for a recurrent policy; "
          f"outputs action, logp, value, then new_state)")
    return 0


def cmd_check_env(args: argparse.Namespace) -> int:
    from rl_system.envs import EntryPointError
    from rl_system.envs.checker import check_env

    if args.num_envs < 1 or args.steps < 1:
        return _fail("--num-envs and --steps must be positive", 2)
    tree: dict = {}
    for assignment in args.env_kwargs:
        apply_override(tree, env_kwarg(assignment))
    try:
        findings = check_env(args.name, args.num_envs, tree, steps=args.steps, seed=args.seed, device=args.device)
    except EntryPointError as err:
        return _fail(f"env.name: {err}", 2)
    except Exception as err:  # noqa: BLE001 - the env could not be built: that is the finding
        print(f"FAIL build: {type(err).__name__}: {one_line(err)}")
        return 1
    for finding in findings:
        print(finding.line())
    failed = sum(f.failed for f in findings)
    print(f"{args.name}: {'conforms' if not failed else f'{failed} violation(s)'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Entry points (env.name, model.network) resolve from the current directory too, as under
    # `python -m`; Ray's local workers start in it as well.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "tune":
            from rl_system.cli.tune import cmd_tune

            return cmd_tune(args)
        if args.command == "status":
            return cmd_status(args)
        if args.command == "check-env":
            return cmd_check_env(args)
        if args.command == "eval":
            return cmd_eval(args)
        if args.command == "export":
            return cmd_export(args)
        if args.command == "grafana-dashboard":
            return cmd_grafana_dashboard(args)
        if args.command == "air-combat":
            from rl_system.cli.air_combat import cmd_range_map

            return cmd_range_map(args)
        if args.command == "rollouts":
            from rl_system.rollout.archive_inspect import cmd_rollouts_inspect

            return cmd_rollouts_inspect(args.file)
    except ConfigError as err:
        return _fail(f"config error: {err}", 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        # The reader went away (`rl-system eval ... | head -1`): stop quietly, as Unix tools do.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE
    return _fail(f"unknown command {args.command!r}", 2)


def run() -> None:
    """The ``rl-system`` executable: :func:`main`, then a quick exit.

    Once a command has returned, its files are closed, its checkpoints flushed and Ray stopped;
    what is left is the interpreter tearing down torch, Ray and their threads, most of a second
    that nobody waits for on purpose. The streams are flushed and the process ends with the code.
    (:func:`main` itself returns normally, for callers in the same process.)"""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    import ray

    if ray.is_initialized():  # a command that joined a cluster: leave it as a normal exit would
        ray.shutdown()
    os._exit(code)


if __name__ == "__main__":
    run()
