"""The Markdown side of ``python -m bench.publish.report``: one table per section under the stamp line,
and the generated block between a page's marker lines (docs/results.md). Pure functions of a results dict (what
``report.json`` holds), so a saved report renders without rerunning anything."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.harness.markdown import code, md_table, num, steps
from bench.harness.stamp import stamp_line

START_MARKER = "<!-- bench-report:start -->"
END_MARKER = "<!-- bench-report:end -->"


class ReportError(Exception):
    """An expected failure: one line on stderr, exit status 2."""


# -- the sections' tables -------------------------------------------------------------------

def _load_str(v: Any) -> str:
    return "?" if v is None else f"{v:.2f}"


def _section(title: str, detail: str, sec: dict, header: list[str], rows: list[list[Any]],
             after: list[str] | None = None) -> list[str]:
    """A titled paragraph, the table (when there are rows), lines after it, and the error if any."""
    load = (f"load {_load_str(sec.get('load_1m_before'))} → {_load_str(sec.get('load_1m_after'))}, "
            f"{sec.get('elapsed_s', 0):.0f} s")
    out = ["", f"{title} ({detail}; {load}):", ""]
    if rows:
        out += md_table(header, rows)
    if after:
        out += ["", *after]
    if sec.get("error"):
        out += ([""] if rows or after else []) + [f"*Not measured{' (further rows)' if rows else ''}: {sec['error']}*"]
    return out


def md_ttt(sec: dict) -> list[str]:
    rows = []
    for r in sec.get("rows", []) + sec.get("peer_rows", []):
        startup = r.get("startup_s", r.get("build_s"))
        rows.append([r["peer"], r["seed"], "yes" if r["reached"] else "**no**", num(r["train_wall_s"], 1) + " s",
                     steps(r["env_steps"]), (num(startup, 1) + " s") if startup is not None else "–",
                     code(r.get("command"))])
    after = []
    ours = [r for r in sec.get("rows", []) if r["reached"]]
    if ours:
        walls = [r["train_wall_s"] for r in ours]
        counts = [r["env_steps"] for r in ours]
        after = [f"rl_system: {len(ours)} of {len(sec['rows'])} seeds reached 475; train wall time "
                 f"{min(walls):.1f}–{max(walls):.1f} s (median {statistics.median(walls):.1f} s), "
                 f"{steps(min(counts))}–{steps(max(counts))} env steps."]
    return _section("**CartPole, time to a 100-episode mean return ≥ 475**",
                    "train wall time from the first round; Ray and actor start-up separate", sec,
                    ["run", "seed", "reached", "train wall time", "env steps", "start-up", "reproduce"], rows, after)


def md_throughput(sec: dict) -> list[str]:
    rows = []
    ours = sec.get("rows", [])
    base = ours[0]["steps_per_s"] if ours else None
    for r in ours:
        share = f"{r['update_share']:.0%}" if r.get("update_share") is not None else "–"
        rows.append([r["peer"], steps(r.get("env_steps")), f"**{num(r['steps_per_s'])}**", share, code(r.get("command"))])
    for r in sec.get("peer_rows", []):
        ratio = f" (rl_system {base / r['steps_per_s']:.1f}×)" if base and r["steps_per_s"] else ""
        rows.append([r["peer"], "–", num(r["steps_per_s"]) + ratio, "–", code(r.get("command"))])
    return _section("**CartPole training throughput**",
                    "env steps/s with learning on, 4 PPO epochs, `cartpole_ppo_throughput.yaml`", sec,
                    ["run", "env steps", "env steps/s", "PPO update share of round time", "reproduce"], rows)


def md_field(sec: dict) -> list[str]:
    rows = []
    for r in sec.get("rows", []):
        rates = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.get("rates", {}).items()))
        res = f"mean return {num(r.get('final_mean_return'), 2)}" + (f"; {rates}" if rates else "")
        share = f"{r['update_share']:.0%}" if r.get("update_share") is not None else "–"
        rows.append([r["env"], r["seed"], steps(r["env_steps"]), num(r["wall_s"], 1) + " s", f"**{num(r['steps_per_s'])}**",
                     share, res, code(r.get("command"))])
    return _section("**Field envs, end to end**",
                    "env steps/s with learning on over a short budget; the return and rates are the 100-episode "
                    "training window at the budget's end, not the converged figures of the docs", sec,
                    ["env", "seed", "env steps", "train wall time", "env steps/s", "update share", "at the end",
                     "reproduce"], rows)


def md_envs(sec: dict) -> list[str]:
    rows = []
    for r in sec.get("rows", []):
        wall = num(r["wall_best"]) + (f" / {num(r['wall_median'])}" if r.get("wall_median") is not None else "")
        cpu = num(r["cpu_best"]) + (f" / {num(r['cpu_median'])}" if r.get("cpu_median") is not None else "")
        rows.append([r["env"], r["setting"], f"{r['num_envs']:,}", wall, cpu, code(r.get("command"))])
    return _section("**Env-only throughput**",
                    "1 torch thread, pre-generated actions, `step` with its auto-resets timed; by the wall clock "
                    "and by this process's CPU time; best, and best / median where the bench gives both", sec,
                    ["env", "setting", "envs", "wall steps/s", "steps per CPU-second", "reproduce"], rows)


def md_codec(sec: dict) -> list[str]:
    rows = []
    for r in sec.get("rows", []):
        trained = (f"{r['ratio_trained']:.2f}× (K = {r['train_rounds']})" if r.get("ratio_trained") is not None
                   else "–")
        big = " / ".join(f"{v:.2f}×" for v in r.get("largest_column_ratio", []))
        rows.append([r["env"], f"{r['num_envs']} × {r['rollout_len']}", num(r["raw_bytes_per_step"], 1),
                     f"{r['ratio_untrained']:.2f}×", trained, f"`{r['largest_column']}` {big}",
                     code(r.get("command"))])
    return _section("**Rollout wire format**",
                    "ratio raw / wire bytes of one real worker rollout, LZ4 level 0 with `filters=\"auto\"`; "
                    "untrained policy, then after K learner rounds", sec,
                    ["env", "envs × steps", "raw B/step", "ratio, untrained", "ratio, trained", "largest column",
                     "reproduce"], rows)


def md_hmasd(sec: dict) -> list[str]:
    out = ["", ("**HMASD on Alice_and_Bob, default map, 3M env steps: stored runs, not rerun** (one run takes "
                "6–16 minutes alone on 2 cores, by the machine's speed; the figures are read from the stored "
                "outputs of the preset's seeds in float32 (it ships `precision: auto`: bf16 where the CPU "
                "multiplies it natively), with two learner threads, the KL bound's line search and rollback on "
                f"collapse, in `{sec.get('source')}`; [HMASD](hmasd.md) has their table):"), ""]
    if sec.get("error"):
        return out + [f"*Not read: {sec['error']}*"]
    rows = [[r["figure"], f"{r['passed']} of {r['seeds']}", f"{r['mean']:.3f}", f"`{sec['source']}`",
             code(r["command"])] for r in sec.get("rows", [])]
    out += md_table(["figure", "seeds ≥ 0.8", "mean", "source", "reproduce (per seed)"], rows)
    if "fell_after_solving" in sec:
        out += ["", f"Runs whose training success fell below 0.5 after first reaching 0.9: "
                    f"{sec['fell_after_solving']} of {sec['seeds']}."]
    return out


RENDERERS = {"ttt": md_ttt, "throughput": md_throughput, "field": md_field, "envs": md_envs, "codec": md_codec,
             "hmasd": md_hmasd}
RENDER_ORDER = ("ttt", "throughput", "field", "envs", "codec", "hmasd")  # the page's order


def current_command(command: str | None) -> str:
    """The report's command as it is run today: results written before the report moved into
    ``bench.publish`` (2026-12-07) name its old module."""
    return (command or "python -m bench.publish.report").replace("python -m bench.report", "python -m bench.publish.report")


def render_markdown(results: dict) -> str:
    """The tables (with the stamp line on top), as they go into report.md and docs/results.md's block."""
    lines = [stamp_line(results["stamp"], results.get("mode", "full"), results.get("elapsed_s")), "",
             f"Regenerate with `{current_command(results.get('command'))}` "
             f"(figures: `bench/results/report/report.json`)."]
    for name in RENDER_ORDER:
        if name in results.get("sections", {}):
            lines += RENDERERS[name](results["sections"][name])
    if results.get("notes"):
        lines += [""] + [f"Note: {n}" for n in results["notes"]]
    return "\n".join(lines) + "\n"


# -- the pages' generated blocks -----------------------------------------------------------------

def _marker_lines(lines: list[str], start: str = START_MARKER, end: str = END_MARKER) -> tuple[int, int]:
    starts = [i for i, ln in enumerate(lines) if ln.strip() == start]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == end]
    if not starts or not ends:
        missing = ", ".join(m for m, found in ((start, starts), (end, ends)) if not found)
        raise ReportError(f"marker line missing: {missing} (the generated block lies between {start} and {end})")
    if len(starts) > 1 or len(ends) > 1 or ends[0] < starts[0]:
        raise ReportError(f"expected one {start} line followed by one {end} line")
    return starts[0], ends[0]


def check_page_markers(path: Path, start: str = START_MARKER, end: str = END_MARKER) -> None:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ReportError(f"{path}: {err.strerror}") from None
    try:
        _marker_lines(text.splitlines(), start, end)
    except ReportError as err:
        raise ReportError(f"{path}: {err}") from None


def page_block(path: Path, start: str = START_MARKER, end: str = END_MARKER) -> str:
    """What lies between the page's marker lines."""
    lines = Path(path).read_text().splitlines(keepends=True)
    try:
        s, e = _marker_lines([ln.rstrip("\r\n") for ln in lines], start, end)
    except ReportError as err:
        raise ReportError(f"{path}: {err}") from None
    return "".join(lines[s + 1:e])


def replace_page_block(path: Path, block: str, start: str = START_MARKER, end: str = END_MARKER) -> bool:
    """Replace everything between the page's marker lines with ``block``; the marker lines and all
    outside them stay byte for byte. True when the page changed; :class:`ReportError` when the
    markers are missing."""
    path = Path(path)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    try:
        s, e = _marker_lines([ln.rstrip("\r\n") for ln in lines], start, end)
    except ReportError as err:
        raise ReportError(f"{path}: {err}") from None
    body = block if block.endswith("\n") or not block else block + "\n"
    new = "".join(lines[:s + 1]) + body + "".join(lines[e:])
    if new != text:
        path.write_text(new)
    return new != text
