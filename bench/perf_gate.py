"""The performance gate: does this checkout run as fast as a base commit, on this machine, now?

    python -m bench.perf_gate [--base REF] [--quick] [--pairs N] [--cases NAME ...] [--set KEY=VALUE ...]
                              [--head REF] [--out DIR]

The base (default ``origin/main`` where it exists, else ``HEAD``) is checked out into a temporary
git worktree and installed into a virtualenv of its own, which borrows this environment's
dependencies but not its ``rl_system``. This checkout, uncommitted changes included, runs from the
current interpreter; ``--head REF`` measures a commit instead, installed as the base is (a bisect
step). ``--set`` overrides a key in both sides' runs, e.g. to hold ``learner.torch_threads`` equal
while looking for another cause. Each case is a whole ``rl-system train`` process of a shipped config, so the
gate sees what a user gets: start-up, actors, object store, the learner's threads. Base and head
runs alternate (base-head, then head-base, ...), so a machine that drifts slows both alike, and
every pair gives each metric a head/base ratio oriented so that above 1 is faster.

A metric fails the gate when its median ratio is below ``0.95`` by more than its spread (half the
range of the pairs' ratios): one slow pair on a noisy machine does not fail it, a steady 5% loss
does. Rows marked "info" are shown, not gated. Exit codes: 0 the gate passed, 1 a metric
regressed (or the head could not run a case), 2 bad input: a ``--base`` that names no commit, a
base checkout with uncommitted changes, a base that does not install or run (one line says which).
No worktree or virtualenv is left behind on any exit, Ctrl-C included.

The whole gate is about 10 minutes on 2 cores (three pairs of every case); ``--quick`` runs the
CartPole cases only (about 3 minutes). It does not run in CI: a shared machine is too noisy for a
pass/fail there. Writes ``gate_<base>_<head>.json.xz`` (every run's figures) / ``.md`` to ``--out`` (default
``bench/results/perf_gate/``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_startup import ray_pids, wait_for_quiet
from bench.harness.ab import THRESHOLD, Metric, ratios, verdict
from bench.harness.learning import read_summary, train_command
from bench.harness.markdown import md_table
from bench.harness.results import RESULTS, command_line, write_suite
from bench.harness.stamp import ROOT, git_commit, load1, stamp, stamp_line

BAD_INPUT, REGRESSED = 2, 1
START_UP_PHASES = ("interpreter", "config", "imports", "probe", "ray_init", "actors")
"""``summary.json`` → ``phases_s`` before the first round: the wait a user sees before training."""


class GateError(Exception):
    """A reason the gate cannot compare: one line for the console, and its exit code."""

    def __init__(self, line: str, code: int = BAD_INPUT):
        super().__init__(line)
        self.code = code


@dataclass(frozen=True)
class Case:
    name: str
    config: str
    """Under ``launch/configs/`` of each tree: each tree runs its own shipped config."""
    sets: tuple[str, ...]
    metrics: tuple[Metric, ...]
    quick: bool = False


def _per_round_update(s: dict[str, Any]) -> float | None:
    return s["time_breakdown_s"]["update"] / s["rounds"] if s.get("rounds") else None


def _start_up(s: dict[str, Any]) -> float | None:
    phases = s.get("phases_s") or {}
    return sum(phases[p] for p in START_UP_PHASES if p in phases) or None


def _phase(name: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda s: (s.get("phases_s") or {}).get(name)


STEPS_PER_S = Metric("env steps/s", lambda s: s["steps_per_s"], "", True)
UPDATE_PER_ROUND = Metric("update per round", _per_round_update, "s", False)
CASES = (
    Case("cartpole_throughput", "cartpole_ppo_throughput.yaml", ("max_env_steps=1500000",), (STEPS_PER_S,), quick=True),
    Case("cartpole_to_475", "cartpole_ppo.yaml", (), (
        Metric("train time to 475", lambda s: s.get("time_to_target_s"), "s", False),
        Metric("whole process", lambda s: s["process_s"], "s", False),
        Metric("start-up (to the first round)", _start_up, "s", False),
        *(Metric(f"phase: {p}", _phase(p), "s", False, gated=False) for p in ("imports", "ray_init", "actors")),
        Metric("phase: ray_shutdown", _phase("ray_shutdown"), "s", False, gated=False),
    ), quick=True),
    Case("minatar_breakout", "minatar_breakout_ppo.yaml", ("max_env_steps=131072",), (STEPS_PER_S,)),
    Case("vmas_balance_mappo", "vmas_balance_mappo.yaml", ("max_env_steps=120000",), (UPDATE_PER_ROUND,)),
    Case("alice_bob_hmasd", "alice_bob_hmasd.yaml", ("max_env_steps=40960",), (UPDATE_PER_ROUND,)),
)


# -- the trees -----------------------------------------------------------------------------------
def git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def resolve_ref(ref: str, flag: str = "--base") -> tuple[str, Path | None]:
    """``(commit, checkout)``: the commit ``ref`` names in this repository, or the HEAD of the
    git checkout at path ``ref`` (which must have no uncommitted changes: the gate would measure
    something no commit holds)."""
    path = Path(ref).expanduser()
    if path.is_dir() and (path / ".git").exists():
        dirty = git("status", "--porcelain", "--untracked-files=no", cwd=path).stdout.strip()
        if dirty:
            raise GateError(f"perf_gate: the {flag[2:]} checkout {path} has uncommitted changes "
                            f"({len(dirty.splitlines())} files); commit or stash them, or name a commit")
        out = git("rev-parse", "--verify", "HEAD^{commit}", cwd=path)
        return out.stdout.strip(), path
    out = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if out.returncode != 0:
        raise GateError(f"perf_gate: {flag} {ref}: no such commit in this repository")
    return out.stdout.strip(), None


def default_base() -> str:
    return "origin/main" if git("rev-parse", "--verify", "--quiet", "origin/main^{commit}").returncode == 0 else "HEAD"


def check_head() -> None:
    """The current interpreter must import this checkout's ``rl_system`` (an editable install)."""
    out = subprocess.run([sys.executable, "-c", "import rl_system, rl_system.envs; print(rl_system.__file__)"],
                         cwd=tempfile.gettempdir(), capture_output=True, text=True, check=False)
    where = Path(out.stdout.strip()).resolve().parent.parent if out.returncode == 0 else None
    if where != ROOT.resolve():
        raise GateError(f"perf_gate: this interpreter's rl_system is not this checkout's "
                        f"({out.stdout.strip() or out.stderr.strip().splitlines()[-1:]}); "
                        f"run `pip install -e .` here first")


def install_tree(label: str, commit: str, source: Path | None, tmp: Path) -> Path:
    """A worktree of ``commit`` at ``tmp/<label>`` and a virtualenv with it installed at
    ``tmp/<label>-venv``; returns the venv's python."""
    tree, venv = tmp / label, tmp / f"{label}-venv"
    out = git("worktree", "add", "--detach", str(tree), commit, cwd=source or ROOT)
    if out.returncode != 0:
        raise GateError(f"perf_gate: could not check out the {label} {commit[:10]}: {last_line(out.stderr)}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    # The tree borrows this environment's packages (torch, Ray, the envs' libraries) through a
    # .pth line; pip still installs whatever the tree requires that this environment lacks.
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    shared = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "_perf_gate_shared.pth").write_text("\n".join(shared) + "\n")
    out = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(tree)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise GateError(f"perf_gate: the {label} {commit[:10]} did not install: {last_line(out.stderr)}")
    return python


def remove_worktrees(tmp: Path, source: Path | None) -> None:
    for label in ("base", "head"):
        if (tmp / label).exists():
            git("worktree", "remove", "--force", str(tmp / label), cwd=source or ROOT)
    git("worktree", "prune", cwd=source or ROOT)


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    return lines[-1] if lines else "(no output)"


# -- the runs ------------------------------------------------------------------------------------
@dataclass
class Side:
    label: str  # base or head
    commit: str  # short, +dirty for a checkout with changes
    python: Path
    tree: Path
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def run_case(side: Side, case: Case, run_dir: Path, present: set[int], sets: tuple[str, ...] = ()) -> dict[str, Any]:
    """One ``rl-system train`` of ``case`` by ``side``: its summary and the process's wall time."""
    config = side.tree / "launch" / "configs" / case.config
    if not config.exists():  # the base's are checked before any run (comparable_cases)
        raise GateError(f"perf_gate: the head has no launch/configs/{case.config}", REGRESSED)
    wait_for_quiet(present)  # an earlier run's Ray teardown is not billed to this one
    cmd = train_command(side.python, config, run_dir, (*case.sets, *sets))
    t0 = time.perf_counter()
    out = run_child(cmd, cwd=run_dir.parent)  # not the tree: `-m` would import the bare tree first
    process_s = time.perf_counter() - t0
    if out.returncode != 0 or not (run_dir / "summary.json").exists():
        raise GateError(f"perf_gate: {side.label} {side.commit[:10]} could not run {case.name} "
                        f"(exit {out.returncode}): {last_line(out.stderr)}", BAD_INPUT if side.label == "base" else REGRESSED)
    summary = read_summary(run_dir)
    return {k: summary.get(k) for k in KEPT} | {"process_s": process_s}


KEPT = ("steps_per_s", "env_steps", "rounds", "time_breakdown_s", "time_to_target_s", "phases_s", "cpu_s",
        "wall_time_s")
"""What the results keep of each run's ``summary.json`` (the metrics read these)."""


def comparable_cases(cases: list[Case], base_tree: Path) -> tuple[list[Case], list[Case]]:
    """``(compared, absent)``: a case whose config the base does not ship cannot be compared."""
    absent = [c for c in cases if not (base_tree / "launch" / "configs" / c.config).exists()]
    return [c for c in cases if c not in absent], absent


def run_child(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``cmd`` in a session of its own; on Ctrl-C (or SIGTERM) it gets SIGINT, time to stop its
    Ray, then SIGKILL, and the interrupt goes on up."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate()
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=30)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, "", err)


def measure(sides: tuple[Side, Side], cases: list[Case], pairs: int, tmp: Path, sets: tuple[str, ...] = ()) -> None:
    """``pairs`` runs of every case by both sides, alternating which goes first."""
    present = ray_pids()
    for i in range(pairs):
        for case in cases:
            order = sides if (i + cases.index(case)) % 2 == 0 else sides[::-1]
            for side in order:
                r = run_case(side, case, tmp / "runs" / f"{side.label}-{case.name}-{i}", present, sets)
                side.runs.setdefault(case.name, []).append(r)
                shown = ", ".join(f"{m.name} {fmt(m.read(r), m.unit)}" for m in case.metrics if m.gated)
                print(f"pair {i + 1}/{pairs} | {case.name:20s} | {side.label}: {shown}", flush=True)


# -- the verdict ---------------------------------------------------------------------------------
def rows(sides: tuple[Side, Side], cases: list[Case]) -> list[dict[str, Any]]:
    base, head = sides
    out = []
    for case in cases:
        for m in case.metrics:
            rs = ratios(m, base.runs.get(case.name, []), head.runs.get(case.name, []))
            med, spread, word = verdict(rs, m.gated)
            vals = {s.label: [m.read(r) for r in s.runs.get(case.name, [])] for s in sides}
            out.append({"case": case.name, "metric": m.name, "unit": m.unit, "gated": m.gated,
                        "base": median_of(vals["base"]), "head": median_of(vals["head"]), "values": vals,
                        "ratios": rs, "median_ratio": med, "spread": spread, "verdict": word})
    return out


def median_of(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "s":
        return f"{v:.3f} s" if v < 1 else f"{v:.2f} s"
    return f"{v:,.0f}"


def markdown(meta: dict[str, Any], result: list[dict[str, Any]], command: str, base: str, head: str,
             pairs: int, absent: list[Case] = ()) -> str:
    header = ["case", "metric", f"base {base}", f"head {head}", "head/base, each pair", "median", "± spread",
              "verdict"]
    body = [[r["case"], r["metric"], fmt(r["base"], r["unit"]), fmt(r["head"], r["unit"]),
             " · ".join(f"{x:.2f}" for x in r["ratios"]) or "–",
             "–" if r["median_ratio"] is None else f"**{r['median_ratio']:.2f}×**",
             "–" if r["spread"] is None else f"{r['spread']:.2f}", r["verdict"]] for r in result]
    return "\n".join([f"# Performance gate: {head} against {base} ({meta['date_utc']})", "", f"`{command}`", "",
                      stamp_line(meta), "", *md_table(header, body), "",
                      f"{pairs} pairs of whole `rl-system train` runs, base and head alternating; ratios above 1: "
                      f"the head is faster. A gated metric fails where its median is below {THRESHOLD} by more "
                      "than its spread (half the range of the pairs)."
                      + "".join(f" `{c.name}`: the base ships no `{c.config}`, not compared." for c in absent)]) + "\n"


# -- the command ---------------------------------------------------------------------------------
def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.perf_gate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=None, metavar="REF",
                    help="a commit, branch or tag, or the path of a clean git checkout (default: origin/main, else HEAD)")
    ap.add_argument("--head", default=None, metavar="REF",
                    help="a commit to measure instead of this checkout (installed as the base is; for bisecting)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for both sides' runs (repeatable), as rl-system train --set")
    ap.add_argument("--quick", action="store_true", help="the CartPole cases only (about 3 minutes)")
    ap.add_argument("--pairs", type=int, default=3, help="base/head pairs of each case (default: %(default)s)")
    ap.add_argument("--cases", nargs="+", choices=[c.name for c in CASES], metavar="NAME",
                    help=f"of: {', '.join(c.name for c in CASES)} (default: all, or --quick's)")
    ap.add_argument("--out", type=Path, default=RESULTS / "perf_gate")
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    return args


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def gate(args: argparse.Namespace, command: str) -> int:
    base, base_source = resolve_ref(args.base or default_base())
    head, head_source = resolve_ref(args.head, "--head") if args.head else (None, None)
    if head is None:
        check_head()
    cases = [c for c in CASES if (c.name in args.cases if args.cases else (c.quick or not args.quick))]
    base_label, head_label = base[:7], head[:7] if head else git_commit()
    meta = stamp()
    with tempfile.TemporaryDirectory(prefix="perf_gate_") as tmp_name:
        tmp = Path(tmp_name)
        try:
            print(f"perf_gate: installing the base {base_label} into {tmp}", flush=True)
            sides = (Side("base", base_label, install_tree("base", base, base_source, tmp), tmp / "base"),
                     Side("head", head_label, Path(sys.executable), ROOT))
            if head:
                print(f"perf_gate: installing the head {head_label}", flush=True)
                sides[1].python, sides[1].tree = install_tree("head", head, head_source, tmp), tmp / "head"
            cases, absent = comparable_cases(cases, tmp / "base")
            for case in absent:
                print(f"perf_gate: the base {base_label} has no launch/configs/{case.config}: {case.name} is not compared")
            if not cases:
                raise GateError(f"perf_gate: the base {base_label} ships none of the cases' configs")
            (tmp / "runs").mkdir()
            measure(sides, cases, args.pairs, tmp, tuple(args.set))
        finally:
            remove_worktrees(tmp, base_source)
            if head_source not in (None, base_source):
                remove_worktrees(tmp, head_source)
    meta["load_1m_after"] = load1()
    result = rows(sides, cases)
    text = markdown(meta, result, command, base_label, head_label, args.pairs, absent)
    name = f"gate_{base_label}_{head_label.replace('+', '_')}"
    write_suite(args.out, name, {"meta": meta, "base": base, "head": head or head_label, "pairs": args.pairs,
                                 "set": args.set, "cases": [c.name for c in cases],
                                 "not_in_base": [c.name for c in absent], "rows": result,
                                 "runs": {s.label: s.runs for s in sides}}, text, compress=True)
    print("\n" + text)
    slower = [f"{r['case']}: {r['metric']}" for r in result if r["verdict"] == "SLOWER"]
    if slower:
        print(f"perf_gate: SLOWER than {base_label}: {'; '.join(slower)}", file=sys.stderr)
        return REGRESSED
    print(f"perf_gate: no gated metric is slower than {base_label} beyond its spread")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return gate(args, command_line("python -m bench.perf_gate", argv))
    except GateError as err:
        print(err, file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        print("perf_gate: interrupted; the base worktree is removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
