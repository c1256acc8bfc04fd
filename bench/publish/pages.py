"""The generated blocks of README.md and the docs: each block is a pure function of files under
``bench/results/`` or of the code (the algorithm and env registries,
:mod:`bench.publish.capability_tables`; the config models and the command line,
:mod:`bench.publish.reference_tables`), so a figure, a capability, a key or a flag has one source and
a hand edit is caught.

    python -m bench.publish.pages            # rewrite every block from the results
    python -m bench.publish.pages --check    # exit 1 and name each block that differs from its results

A block lies between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` lines (the
benchmark report's block keeps its own marker pair, ``bench.publish.report_md.START_MARKER``/``END_MARKER``).
Everything outside the markers is left byte for byte.

Exit status: 0; 1 when ``--check`` finds a block out of date; 2 when a page lacks its markers or a
source is missing (one line on stderr).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import hmasd_output
from bench.harness.markdown import md_table
from bench.harness.results import RESULTS, read_json
from bench.harness.stamp import ROOT
from bench.publish import capability_tables, reference_tables
from bench.publish.report_md import (
    END_MARKER,
    START_MARKER,
    ReportError,
    page_block,
    render_markdown,
    replace_page_block,
)

REPORT_JSON = RESULTS / "report" / "report.json"
MUJOCO_JSON = RESULTS / "mujoco" / "mujoco.json"
MEMORY_JSON = RESULTS / "memory" / "memory.json"
MARL_JSON = RESULTS / "marl" / "balance_600k" / "marl.json"
TRANSPORT_JSON = RESULTS / "marl" / "transport_1920k_eval2000" / "marl.json"
SPEED_JSON = RESULTS / "speed" / "speed.json"
A2C_MD = RESULTS / "a2c" / "a2c.md"
A2C_HALFCHEETAH_MD = RESULTS / "a2c" / "a2c_halfcheetah.md"
GROUPS_MD = RESULTS / "groups" / "groups.md"
EPYMARL_MD = RESULTS / "epymarl" / "epymarl.md"
EPYMARL_2M_MD = RESULTS / "epymarl" / "lbf_2m" / "epymarl.md"
PRODUCT = ("rl_system", "envs", "launch/configs")
"""The paths whose code a figure measures: a figure from a commit where they differ from the speed
sitting's is marked as measured on older code."""


@dataclass(frozen=True)
class Block:
    """One generated block: the page it lives in, its marker lines and its renderer."""

    name: str
    page: Path
    start: str
    end: str
    render: Callable[[], str]
    sources: tuple[Path, ...]


def _shown(path: Path) -> str:
    """A path as the messages show it: relative to the checkout when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _load(path: Path) -> dict:
    if not path.is_file():
        raise ReportError(f"{_shown(path)}: no such results file (its suite writes it)")
    return read_json(path)


def _k(x: float) -> str:
    """A rate in thousands: 295412 -> '295k'."""
    return f"{x / 1000:.0f}k" if x >= 10_000 else f"{x / 1000:.1f}k"


def _seconds(x: float) -> str:
    return f"{x:.1f} s" if x < 20 else f"{x:.0f} s"


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _median(values: list[float]) -> float:
    return statistics.median(values)


# -- results at a glance (README) -----------------------------------------------------------

def stamp_of(data: dict) -> dict:
    """A suite's stamp, wherever it keeps it (``stamp``, ``meta`` or ``meta.stamp``)."""
    meta = data.get("meta") or {}
    for st in (data.get("stamp"), meta.get("stamp"), meta):
        if isinstance(st, dict) and st.get("commit"):
            return st
    return {}


def same_code(commit: str, reference: str) -> bool:
    """Whether ``commit`` (a stamp's, ``+dirty`` for uncommitted changes) measured the product code
    of ``reference``: both clean and the product paths equal between them."""
    if commit.endswith("+dirty") or reference.endswith("+dirty"):
        return False
    if commit == reference:
        return True
    out = subprocess.run(["git", "diff", "--quiet", commit, reference, "--", *PRODUCT], cwd=ROOT,
                         capture_output=True, check=False)
    return out.returncode == 0


def measured(commits: list[str | None]) -> str:
    """The glance's *measured at* cell: the commit(s), and ``older code`` where the product code
    differs from the speed sitting's (``speed.json``), the newest figures on the page."""
    known = sorted({c for c in commits if c})
    if not known:
        raise ReportError("a figure of the glance names no commit (its suite's stamp lacks one)")
    reference = stamp_of(_load(SPEED_JSON))["commit"]
    older = not all(same_code(c, reference) for c in known)
    shown = ", ".join(f"`{c}`" for c in known[:2]) + (f" and {len(known) - 2} more" if len(known) > 2 else "")
    return shown + (", older code" if older else "")


def _ttt_row() -> list[str]:
    report = _load(REPORT_JSON)
    ttt = report["sections"]["ttt"]
    ours = _median([r["train_wall_s"] for r in ttt["rows"] if r["reached"]])
    by_peer: dict[str, list[float]] = {}
    for r in ttt.get("peer_rows", []):
        if r["reached"]:
            by_peer.setdefault(r["peer"].split("[")[0], []).append(r["train_wall_s"])
    peers = ", ".join(f"{p} {_seconds(_median(v))}" for p, v in by_peer.items())
    return ["CartPole: train time to return 475 (median of seeds)", _seconds(ours), peers,
            measured([stamp_of(report).get("commit")]), "[throughput](docs/results.md#throughput)"]


SPEED_ROWS = {"throughput": ("CartPole: env steps/s with learning on", "RLlib PPO"),
              "minatar": ("MinAtar Breakout: env steps/s with learning on", "SB3 PPO, same CNN"),
              "process": ("CartPole: the whole process, start to 475 to exit", "RLlib PPO (tuned)")}


def _speed_rows() -> list[list[str]]:
    """The headline speed figures, from one sitting beside their peers (``bench.bench_speed``)."""
    speed = _load(SPEED_JSON)
    cell = measured([stamp_of(speed)["commit"]])
    rows = []
    for r in speed["rows"]:
        task, peer = SPEED_ROWS[r["figure"]]
        show = _seconds if r["unit"] == "s" else _k
        rows.append([task, show(r["ours"]), f"{peer} {show(r['peer'])} (rl_system {r['ratio']:.1f}×)", cell,
                     "[speed](docs/results.md#speed-beside-peers)"])
    return rows


def _mujoco_rows() -> list[list[str]]:
    data = _load(MUJOCO_JSON)
    summary, cell = data["summary"], measured([stamp_of(data).get("commit")])
    rows = []
    for env in ("HalfCheetah-v5",):  # Hopper's in docs/results.md: one seed of SB3's collapsed, its target is low
        ours = next(s for s in summary if s["env"] == env and s["peer"] == "rl_system")
        sb3 = next(s for s in summary if s["env"] == env and s["peer"] == "sb3_zoo")
        rows.append([f"{env}: time to SB3's final return ({ours['common_return']:.0f})",
                     f"{_seconds(ours['time_to_common_s'])} wall",
                     f"SB3 (RL Zoo) {_seconds(sb3['cpu_to_common_s'])} of CPU time (its wall time shared the VM)",
                     cell, "[MuJoCo](docs/results.md#gymnasium-mujoco-beside-stable-baselines3)"])
    return rows


def _minatar_rows() -> list[list[str]]:
    """One row for both games, from the run sets the MinAtar figure draws
    (``bench.publish.figures_results.MINATAR``): each panel's first series (the shipped config) and its
    peer series."""
    from bench.harness.plots import PEER, FigureError
    from bench.publish.figures_results import MINATAR, find_runs

    games, ours_cells, peer_cells, seeds, peer_seeds, commits = [], [], [], [], [], []
    for panel in MINATAR:
        ours, peer = panel.series[0], next(s for s in panel.series if s.color == PEER)
        try:
            runs = [[read_json(p) for p in find_runs(RESULTS, s.pattern)] for s in (ours, peer)]
        except FigureError as err:
            raise ReportError(str(err)) from None
        finals = [[r["final_return"] for r in side] for side in runs]
        games.append(panel.title.removeprefix("MinAtar "))
        ours_cells.append(f"{_median(finals[0]):.1f}")
        peer_cells.append(f"{_median(finals[1]):.1f}")
        seeds.append(str(len(finals[0])))
        peer_seeds.append(str(len(finals[1])))
        commits += [r.get("commit") for r in runs[0]]
    return [[f"MinAtar {' / '.join(games)}: return at 5M env steps (median of {' / '.join(seeds)} seeds)",
             " / ".join(ours_cells), f"SB3 PPO {' / '.join(peer_cells)} ({' / '.join(peer_seeds)} seeds)",
             measured(commits), "[MinAtar](docs/results.md#minatar-ppo-with-the-small-cnn-beside-stable-baselines3)"]]


def _memory_rows() -> list[list[str]]:
    data = _load(MEMORY_JSON)
    rows = data["rows"]
    ours = next(r for r in rows if r["peer"] == "rl_system_gru" and r["env"] == "CartPole-positions")
    peer = next(r for r in rows if r["peer"] == "sb3_contrib_recurrent_ppo")
    return [["CartPole, velocities hidden (GRU): time to 475", _seconds(ours["time_to_target_s"]),
             f"sb3-contrib RecurrentPPO {_seconds(peer['time_to_target_s'])}", measured([stamp_of(data).get("commit")]),
             "[memory](docs/results.md#memory-recurrent-ppo-beside-sb3-contrib)"]]


def _multi_agent_rows() -> list[list[str]]:
    preset = hmasd_output.summary(hmasd_output.PRESET_SEEDS)
    if preset.get("error"):
        raise ReportError(preset["error"])
    hmasd = preset["rows"][0]
    balance = _load(MARL_JSON)
    table = [r for r in balance["table"] if r["env"] == "vmas:balance"]
    ours = [r for r in table if r["system"] == "rl_system"]
    peer = [r for r in table if r["system"] == "benchmarl_mappo"]

    def median(rows: list[dict], key) -> float:
        return statistics.median(key(r) for r in rows)

    # BenchMARL's training wall time without its evaluations (rl_system evaluates after training)
    peer_s = median(peer, lambda r: r["train_wall_s"] - r["eval_wall_s"])
    ours_s = median(ours, lambda r: r["train_wall_s"])
    task = (f"VMAS balance, MAPPO: eval return and training time at {peer[0]['env_steps'] // 1000}k frames "
            f"(median of {_seeds(len(ours))})")
    # The seeds were trained in float32; the preset ships precision: auto (bf16 on bf16 CPUs),
    # whose seeds 100-109 solve 9 of 10 (docs/hmasd.md, learner.precision).
    return [["AliceBob, HMASD: seeds with test success ≥ 0.8, trained in float32 (the shipped bf16: its page)",
             f"{hmasd['passed']} of {hmasd['seeds']}", "–", measured(preset["commits"]), "[HMASD](docs/hmasd.md)"],
            [task, f"{median(ours, lambda r: r['final_eval_return']):.1f} in {_seconds(ours_s)}",
             f"BenchMARL (fine-tuned) {median(peer, lambda r: r['final_eval_return']):.1f} in {_seconds(peer_s)}",
             measured([stamp_of(balance).get("commit")]), "[multi-agent](docs/multi_agent.md#vmas-beside-benchmarl)"], _transport_row()]


def _transport_row() -> list[str]:
    """Every seed's figure: at these returns one seed's evaluation differs from the next by more
    than the systems do, so a median alone would rank them by chance."""
    data = _load(TRANSPORT_JSON)
    table = [r for r in data["table"] if r["env"] == "vmas:transport"]

    def cell(system: str) -> str:
        rows = sorted((r for r in table if r["system"] == system), key=lambda r: r["seed"])
        walls = [r["train_wall_s"] - r["eval_wall_s"] for r in rows]
        returns = " / ".join(f"{r['final_eval_return']:.3f}" for r in rows)
        return f"{returns} in {min(walls):,.0f}–{max(walls):,.0f} s"

    frames = table[0]["env_steps"] // 1000
    return [f"VMAS transport, MAPPO: eval return (2,000 episodes) and training time at {frames:,}k frames, three seeds",
            cell("rl_system"), f"BenchMARL (fine-tuned) {cell('benchmarl_mappo')}", measured([stamp_of(data).get("commit")]),
            "[multi-agent](docs/multi_agent.md#transport-three-seeds-in-benchmarls-45-minutes)"]


def render_glance() -> str:
    """README's *results at a glance*: one row per headline figure, each linking to its details."""
    rows = [_ttt_row(), *_speed_rows(), *_mujoco_rows(), *_minatar_rows(), *_memory_rows(), *_multi_agent_rows()]
    table = md_table(["task", "rl_system", "peer, same task", "measured at", "details"], rows)
    return "\n".join(table) + "\n"


def render_speed() -> str:
    """docs/results.md's speed table: the latest ``python -m bench.bench_speed``, as it wrote it."""
    from bench.bench_speed import markdown

    speed = _load(SPEED_JSON)
    body = markdown(speed["meta"], speed["rows"], speed["command"])
    return body.split("\n", 2)[2]  # without its own heading: the page has one


def _suite_table(path: Path, command: str) -> str:
    """A suite's Markdown as it wrote it, without its own heading (the page has one)."""
    if not path.is_file():
        raise ReportError(f"{_shown(path)}: no such results file ({command} writes it)")
    return path.read_text().split("\n", 2)[2]


def render_report() -> str:
    """docs/results.md's benchmark-report tables, from the latest full ``python -m bench.publish.report``."""
    return render_markdown(_load(REPORT_JSON))


def _marker(name: str) -> tuple[str, str]:
    return f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"


GLANCE = Block("glance", ROOT / "README.md", *_marker("glance"), render_glance,
               (REPORT_JSON, SPEED_JSON, MUJOCO_JSON, RESULTS / "minatar", MEMORY_JSON, MARL_JSON, TRANSPORT_JSON,
                hmasd_output.PRESET_SEEDS))
SPEED = Block("speed", ROOT / "docs" / "results.md", *_marker("speed"), render_speed, (SPEED_JSON,))
REPORT = Block("report", ROOT / "docs" / "results.md", START_MARKER, END_MARKER, render_report, (REPORT_JSON,))
_REGISTRY = (ROOT / "rl_system" / "algos" / "registry.py",)
SUPPORTS = Block("supports", ROOT / "README.md", *_marker("supports"), capability_tables.render_supports, _REGISTRY)
ALGORITHMS = Block("algorithms", ROOT / "docs" / "reference.md", *_marker("algorithms"),
                   capability_tables.render_algorithms, _REGISTRY)
LIMITS = Block("limits", ROOT / "docs" / "limitations.md", *_marker("limits"), capability_tables.render_limits,
               (*_REGISTRY, ROOT / "envs" / "render.py", ROOT / "envs" / "__init__.py"))


def _suite_block(name: str, page: str, path: Path, command: str) -> Block:
    """A block holding a suite's own Markdown table (``path``, written by ``command``)."""
    return Block(name, ROOT / "docs" / page, *_marker(name), lambda: _suite_table(path, command), (path,))


A2C = _suite_block("a2c", "results.md", A2C_MD, "python -m bench.bench_a2c")
A2C_HALFCHEETAH = _suite_block("a2c_halfcheetah", "results.md", A2C_HALFCHEETAH_MD,
                               "python -m bench.bench_a2c --env HalfCheetah")
GROUPS = _suite_block("groups", "multi_agent.md", GROUPS_MD, "python -m bench.bench_groups")
EPYMARL = _suite_block("epymarl", "multi_agent.md", EPYMARL_MD, "python -m bench.bench_epymarl")
EPYMARL_2M = _suite_block("epymarl_2m", "multi_agent.md", EPYMARL_2M_MD,
                          "python -m bench.bench_epymarl --env-steps 2000000")
REFERENCE = ROOT / "docs" / "reference.md"
_CONFIG_CODE = (ROOT / "rl_system" / "config", ROOT / "rl_system" / "algos")
_CLI_CODE = (ROOT / "rl_system" / "cli",)


def _reference_blocks() -> tuple[Block, ...]:
    """docs/reference.md's tables, from the code: a block per config section (``config`` for the
    top-level keys) and per command, and the commands' synopsis."""
    def table(render: Callable[..., list[str]], *args: str) -> Callable[[], str]:
        return lambda: "\n".join(render(*args)) + "\n"

    blocks = [Block(f"config.{s}" if s else "config", REFERENCE, *_marker(f"config.{s}" if s else "config"),
                    table(reference_tables.config_table, s), _CONFIG_CODE)
              for s in ("", *reference_tables.sections())]
    blocks.append(Block("cli.synopsis", REFERENCE, *_marker("cli.synopsis"), lambda: reference_tables.cli_synopsis() + "\n",
                        _CLI_CODE))
    for command, _ in reference_tables.commands():
        name = "cli." + command.replace(" ", ".")
        blocks.append(Block(name, REFERENCE, *_marker(name), table(reference_tables.cli_table, command), _CLI_CODE))
    return tuple(blocks)


BLOCKS = (GLANCE, SPEED, REPORT, SUPPORTS, ALGORITHMS, A2C, A2C_HALFCHEETAH, LIMITS, GROUPS, EPYMARL, EPYMARL_2M,
          *_reference_blocks())


# -- the pages ------------------------------------------------------------------------------

def current(block: Block) -> str:
    """What the page holds between the block's markers."""
    return page_block(block.page, block.start, block.end)


def write(block: Block) -> bool:
    """Put the block's rendering between its markers; True when the page changed."""
    return replace_page_block(block.page, block.render(), block.start, block.end)


def stale(blocks: tuple[Block, ...] = BLOCKS) -> list[str]:
    """The names of the blocks whose page differs from what their results say."""
    return [b.name for b in blocks if current(b) != b.render()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.publish.pages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is out of date")
    ap.add_argument("--only", default="", help="comma-separated block names (default: all: "
                    + ", ".join(b.name for b in BLOCKS) + ")")
    args = ap.parse_args(argv)
    wanted = set(filter(None, args.only.split(",")))
    unknown = wanted - {b.name for b in BLOCKS}
    try:
        if unknown:
            raise ReportError(f"--only: no block named {', '.join(sorted(unknown))}")
        blocks = tuple(b for b in BLOCKS if not wanted or b.name in wanted)
        if args.check:
            out = stale(blocks)
            for name in out:
                b = next(b for b in blocks if b.name == name)
                print(f"{_shown(b.page)}: block '{name}' differs from "
                      f"{', '.join(_shown(s) for s in b.sources)}; run python -m bench.publish.pages",
                      file=sys.stderr)
            return 1 if out else 0
        for b in blocks:
            print(f"{_shown(b.page)}: {b.name} {'updated' if write(b) else 'unchanged'}")
    except (ReportError, OSError) as err:
        print(f"python -m bench.publish.pages: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
