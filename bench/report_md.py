"""The Markdown side of ``python -m bench.report``: the stamp line, one table per section, and
README's generated block between its marker lines. Pure functions of a results dict (what
``report.json`` holds), so a saved report renders without rerunning anything."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

START_MARKER = "<!-- bench-report:start -->"
END_MARKER = "<!-- bench-report:end -->"
HMASD_DOC = "docs/hmasd.md"


class ReportError(Exception):
    """An expected failure: one line on stderr, exit status 2."""


# -- Markdown ---------------------------------------------------------------------------------

def _cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A GitHub Markdown table: header, separator, one line per row (``|`` in cells escaped)."""
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def _n(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:,.{digits}f}"


def _k(v: Any) -> str:
    """Env steps: 135,168 -> 135k; 3,000,000 -> 3.00M."""
    if v is None:
        return "–"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k" if v >= 1e4 else f"{v:,}"


def _cmd(c: str | None) -> str:
    return f"`{c}`" if c else "–"


def _load_str(v: Any) -> str:
    return "?" if v is None else f"{v:.2f}"


def stamp_line(st: dict, mode: str = "full", elapsed_s: float | None = None) -> str:
    mem = f", {st['memory_gib']:g} GiB" if st.get("memory_gib") is not None else ""
    gpu = st.get("gpu") or "no GPU"
    took = f"; the run took {elapsed_s / 60:.1f} min" if elapsed_s is not None else ""
    line = (f"Measured {st['date_utc']} at commit `{st['commit']}` on {st['cpu']} ({st['cores']} cores{mem}, {gpu}); "
            f"Python {st['python']}, torch {st['torch']}, Ray {st['ray']}, gymnasium {st['gymnasium']}; "
            f"1-minute load average {_load_str(st.get('load_1m_before'))} before, "
            f"{_load_str(st.get('load_1m_after'))} after{took}.")
    if is_busy(st):
        line += " **The machine was busy: the figures are pessimistic.**"
    if mode != "full":
        line += f" **{mode} mode: tiny budgets, not README figures.**"
    return line


def is_busy(st: dict) -> bool:
    """Other work on the machine: a 1-minute load above half the cores before the run, or above
    the cores + 2 after it (the training runs themselves keep about the cores busy)."""
    cores = st.get("cores") or 1
    before, after = st.get("load_1m_before"), st.get("load_1m_after")
    return (before is not None and before > 0.5 * cores) or (after is not None and after > cores + 2)


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
        rows.append([r["peer"], r["seed"], "yes" if r["reached"] else "**no**", _n(r["train_wall_s"], 1) + " s",
                     _k(r["env_steps"]), (_n(startup, 1) + " s") if startup is not None else "–",
                     _cmd(r.get("command"))])
    after = []
    ours = [r for r in sec.get("rows", []) if r["reached"]]
    if ours:
        walls = [r["train_wall_s"] for r in ours]
        steps = [r["env_steps"] for r in ours]
        after = [f"rl_system: {len(ours)} of {len(sec['rows'])} seeds reached 475; train wall time "
                 f"{min(walls):.1f}–{max(walls):.1f} s (median {statistics.median(walls):.1f} s), "
                 f"{_k(min(steps))}–{_k(max(steps))} env steps."]
    return _section("**CartPole, time to a 100-episode mean return ≥ 475**",
                    "train wall time from the first round; Ray and actor start-up separate", sec,
                    ["run", "seed", "reached", "train wall time", "env steps", "start-up", "reproduce"], rows, after)


def md_throughput(sec: dict) -> list[str]:
    rows = []
    ours = sec.get("rows", [])
    base = ours[0]["steps_per_s"] if ours else None
    for r in ours:
        share = f"{r['update_share']:.0%}" if r.get("update_share") is not None else "–"
        rows.append([r["peer"], _k(r.get("env_steps")), f"**{_n(r['steps_per_s'])}**", share, _cmd(r.get("command"))])
    for r in sec.get("peer_rows", []):
        ratio = f" (rl_system {base / r['steps_per_s']:.1f}×)" if base and r["steps_per_s"] else ""
        rows.append([r["peer"], "–", _n(r["steps_per_s"]) + ratio, "–", _cmd(r.get("command"))])
    return _section("**CartPole training throughput**",
                    "env steps/s with learning on, 4 PPO epochs, `cartpole_ppo_throughput.yaml`", sec,
                    ["run", "env steps", "env steps/s", "PPO update share of round time", "reproduce"], rows)


def md_field(sec: dict) -> list[str]:
    rows = []
    for r in sec.get("rows", []):
        rates = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.get("rates", {}).items()))
        res = f"mean return {_n(r.get('final_mean_return'), 2)}" + (f"; {rates}" if rates else "")
        share = f"{r['update_share']:.0%}" if r.get("update_share") is not None else "–"
        rows.append([r["env"], r["seed"], _k(r["env_steps"]), _n(r["wall_s"], 1) + " s", f"**{_n(r['steps_per_s'])}**",
                     share, res, _cmd(r.get("command"))])
    return _section("**Field envs, end to end**",
                    "env steps/s with learning on over a short budget; the return and rates are the 100-episode "
                    "training window at the budget's end, not the converged figures of the docs", sec,
                    ["env", "seed", "env steps", "train wall time", "env steps/s", "update share", "at the end",
                     "reproduce"], rows)


def md_envs(sec: dict) -> list[str]:
    rows = []
    for r in sec.get("rows", []):
        wall = _n(r["wall_best"]) + (f" / {_n(r['wall_median'])}" if r.get("wall_median") is not None else "")
        cpu = _n(r["cpu_best"]) + (f" / {_n(r['cpu_median'])}" if r.get("cpu_median") is not None else "")
        rows.append([r["env"], r["setting"], f"{r['num_envs']:,}", wall, cpu, _cmd(r.get("command"))])
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
        rows.append([r["env"], f"{r['num_envs']} × {r['rollout_len']}", _n(r["raw_bytes_per_step"], 1),
                     f"{r['ratio_untrained']:.2f}×", trained, f"`{r['largest_column']}` {big}",
                     _cmd(r.get("command"))])
    return _section("**Rollout wire format**",
                    "ratio raw / wire bytes of one real worker rollout, LZ4 level 0 with `filters=\"auto\"`; "
                    "untrained policy, then after K learner rounds", sec,
                    ["env", "envs × steps", "raw B/step", "ratio, untrained", "ratio, trained", "largest column",
                     "reproduce"], rows)


def md_hmasd(sec: dict) -> list[str]:
    out = ["", ("**HMASD on Alice_and_Bob, default map, 3M env steps: cited, not rerun** (one run takes 6–16 "
                "minutes alone on 2 cores, by the machine's speed; the figures are read from the twenty-seed "
                "table of the shipped preset, with two learner threads, the KL bound's line search and rollback "
                "on collapse, in "
                f"`{sec.get('source', HMASD_DOC)}`):"), ""]
    if sec.get("error"):
        return out + [f"*Not cited: {sec['error']}*"]
    rows = [[r["figure"], f"{r['passed']} of {r['seeds']}", f"{r['mean']:.3f}", f"`{sec['source']}`",
             _cmd(r["command"])] for r in sec.get("rows", [])]
    out += md_table(["figure", "seeds ≥ 0.8", "mean", "source", "reproduce (per seed)"], rows)
    if "fell_after_solving" in sec:
        out += ["", f"Runs whose training success fell below 0.5 after first reaching 0.9: "
                    f"{sec['fell_after_solving']} of {sec['seeds']}."]
    return out


RENDERERS = {"ttt": md_ttt, "throughput": md_throughput, "field": md_field, "envs": md_envs, "codec": md_codec,
             "hmasd": md_hmasd}
RENDER_ORDER = ("ttt", "throughput", "field", "envs", "codec", "hmasd")  # README's order


def render_markdown(results: dict) -> str:
    """The tables (with the stamp line on top), as they go into report.md and README's block."""
    lines = [stamp_line(results["stamp"], results.get("mode", "full"), results.get("elapsed_s")), "",
             f"Regenerate with `{results.get('command') or 'python -m bench.report'}` "
             f"(figures: `bench/results/report/report.json`)."]
    for name in RENDER_ORDER:
        if name in results.get("sections", {}):
            lines += RENDERERS[name](results["sections"][name])
    if results.get("notes"):
        lines += [""] + [f"Note: {n}" for n in results["notes"]]
    return "\n".join(lines) + "\n"


# -- README ------------------------------------------------------------------------------------

def _marker_lines(lines: list[str]) -> tuple[int, int]:
    starts = [i for i, ln in enumerate(lines) if ln.strip() == START_MARKER]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == END_MARKER]
    if not starts or not ends:
        missing = ", ".join(m for m, found in ((START_MARKER, starts), (END_MARKER, ends)) if not found)
        raise ReportError(f"marker line missing: {missing} (--update-readme replaces what lies between "
                          f"{START_MARKER} and {END_MARKER})")
    if len(starts) > 1 or len(ends) > 1 or ends[0] < starts[0]:
        raise ReportError(f"expected one {START_MARKER} line followed by one {END_MARKER} line")
    return starts[0], ends[0]


def check_readme_markers(path: Path) -> None:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ReportError(f"{path}: {err.strerror}") from None
    try:
        _marker_lines(text.splitlines())
    except ReportError as err:
        raise ReportError(f"{path}: {err}") from None


def replace_readme_block(path: Path, block: str) -> None:
    """Replace everything between README's marker lines with ``block``; the marker lines and all
    outside them stay byte for byte. Raises :class:`ReportError` when the markers are missing."""
    path = Path(path)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    try:
        s, e = _marker_lines([ln.rstrip("\r\n") for ln in lines])
    except ReportError as err:
        raise ReportError(f"{path}: {err}") from None
    body = block if block.endswith("\n") or not block else block + "\n"
    path.write_text("".join(lines[:s + 1]) + body + "".join(lines[e:]))
