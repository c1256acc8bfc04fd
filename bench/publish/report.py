"""Rerun the benchmarks behind the published figures and write the tables docs/results.md includes.

    python -m bench.publish.report                     # everything (8-15 minutes on 2 cores, ~5 more with --peers)
    python -m bench.publish.report --quick             # tiny budgets, one seed (~2 minutes): checks the pipeline
    python -m bench.publish.report --only ttt,codec    # a subset of the sections
    python -m bench.publish.report --peers             # also RLlib / CleanRL-style PPO where importable
    python -m bench.publish.report --update-results    # ... and put the tables between docs/results.md's markers
    python -m bench.publish.report --from-json bench/results/report/report.json --update-results
                                               # the pages from the latest run, without rerunning
    python -m bench.publish.report --refresh           # the speed figures beside their peers, re-measured at
                                               # this tree (bench.bench_speed), and the pages that show them

Sections (``--only``):

* ``ttt``: CartPole wall time and env steps to a 100-episode mean return of 475
  (``launch/configs/cartpole_ppo.yaml``, per seed; ``bench.bench_ppo.ours_time_to_target``);
* ``throughput``: CartPole training throughput, env steps/s with learning on
  (``launch/configs/cartpole_ppo_throughput.yaml``; ``bench.bench_ppo.ours_throughput``);
* ``field``: Navigation and AirCombat end to end, env steps/s with learning on over a short
  budget (``navigation_ppo.yaml``, ``air_combat_ppo.yaml`` through ``rl_system.run.loop.train``);
* ``envs``: env-only throughput (``bench_envs``, ``bench_air_combat``, ``bench_navigation``,
  ``bench_alice_bob``: their ``bench`` functions);
* ``codec``: rollout compression ratios, LZ4 level 0 with the codec's ``filters="auto"``, of a
  real worker's rollouts before and after some learner rounds (``bench.bench_codec.real_rollouts``);
* ``hmasd``: the 20-seed HMASD figures, **not rerun** (hours of compute): read from the seeds'
  stored ``bench_hmasd`` outputs (``bench/results/hmasd/shrink``, :mod:`bench.harness.hmasd_output`).

``--peers`` adds RLlib PPO (``bench.peers.rllib_ppo``; RLlib is part of the default install) and
the CleanRL-style loop (``bench.peers.cleanrl_ppo``) to ``ttt`` and ``throughput``; a peer whose
package is missing is skipped with a one-line note.

Writes ``bench/results/report/report.md`` (Markdown tables) and ``report.json`` (raw figures),
both stamped with the date (UTC), git commit (``+dirty`` when the tree has changes outside
``bench/results``), machine (CPU model, cores, memory, GPU), Python / torch / Ray /
gymnasium versions and the 1-minute load average before and after the run. Every table row
carries the command that reproduces it. Ray runs embedded on this machine, as ``rl-system
train`` starts it. The published figures come from the latest full run on a quiet machine
(``--update-results`` refuses ``--quick`` and ``--only`` results, and runs with a section not measured).

``--update-results`` also regenerates README's *results at a glance* (``bench.publish.pages``), which reads
``report.json``.

Exit status: 0; 1 when a section could not be measured (its error is in the tables; the pages are
left alone); 2 for bad flags or a page without its marker lines (one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.harness.learning import shutdown_ray
from bench.harness.results import RESULTS, write_suite
from bench.harness.stamp import ROOT, load1, stamp
from bench.publish import pages
from bench.publish.report_md import (
    END_MARKER,
    START_MARKER,
    ReportError,
    check_page_markers,
    render_markdown,
    replace_page_block,
)
from bench.publish.report_sections import FULL, QUICK, RUN_ORDER, RUNNERS, SECTIONS, Budget, log, run_peers

OUT_DIR = RESULTS / "report"
RESULTS_PAGE = ROOT / "docs" / "results.md"


# -- running ------------------------------------------------------------------------------------

def run_report(b: Budget, only: list[str], peers: bool, mode: str) -> dict:
    st = stamp()
    t_all = time.perf_counter()
    sections: dict[str, dict] = {}
    notes: list[str] = []
    run_root = Path(tempfile.mkdtemp(prefix="rl_system_report_"))
    try:
        for name in RUN_ORDER:
            if name not in only:
                continue
            log(f"section {name} (load average {load1()})")
            load0, t0 = load1(), time.perf_counter()
            for attempt in (1, 2):
                sections[name] = {"rows": []}  # filled in place: rows measured before a failure stay
                try:
                    RUNNERS[name](b, run_root, sections[name])
                    break
                except Exception as err:  # noqa: BLE001 - one broken section must not lose the others
                    msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                    sections[name]["error"] = msg
                    log(f"section {name} failed: {msg}")
                    # A Ray session that lost its processes (killed from outside, e.g. by a `ray stop`
                    # elsewhere on a shared box) takes the next section down with it: start afresh.
                    shutdown_ray()
                    if attempt == 1 and type(err).__module__.startswith("ray"):
                        notes.append(f"section {name} was rerun after a Ray failure ({msg}).")
                        log(f"section {name}: retrying once with a fresh Ray session")
                        continue
                    break
            sections[name].update(load_1m_before=load0, load_1m_after=load1(), elapsed_s=time.perf_counter() - t0)
        shutdown_ray()
        if peers:
            t0 = time.perf_counter()
            try:
                run_peers(b, sections, notes)
            except Exception as err:  # noqa: BLE001 - the peers' rows so far stay, ours are not lost
                notes.append(f"peers stopped by {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
                log(f"peers failed: {notes[-1]}")
            shutdown_ray()
            log(f"peers took {time.perf_counter() - t0:.0f} s")
    finally:
        shutdown_ray()
        shutil.rmtree(run_root, ignore_errors=True)
    st["load_1m_after"] = load1()
    return {"stamp": st, "mode": mode, "sections_run": [s for s in RUN_ORDER if s in only], "peers": peers,
            "budget": dataclasses.asdict(b), "elapsed_s": time.perf_counter() - t_all,
            "sections": sections, "notes": notes}


# -- command line ------------------------------------------------------------------------------

def write_outputs(results: dict, out_dir: Path) -> tuple[Path, Path]:
    """``report.md`` and ``report.json`` in ``out_dir``; returns their paths in that order."""
    js, md = write_suite(out_dir, "report", results,
                         "# Benchmark report (`python -m bench.publish.report`)\n\n" + render_markdown(results))
    return md, js


def _parse_only(value: str | None) -> list[str]:
    if not value:
        return list(SECTIONS)
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in SECTIONS]
    if bad:
        raise ReportError(f"--only: unknown section {', '.join(bad)} (sections: {', '.join(SECTIONS)})")
    return names


def refresh() -> int:
    """``--refresh``: :mod:`bench.bench_speed` at this tree, then README's glance and the results
    page's speed table from what it wrote."""
    from bench import bench_speed

    if bench_speed.main([]) != 0:
        return 1
    for block in (pages.GLANCE, pages.SPEED):
        pages.write(block)
    log("updated README.md's results at a glance and docs/results.md's speed table")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.publish.report", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="tiny budgets and one seed (~2 minutes): checks the pipeline")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="seeds of the CartPole time-to-target runs (default 0 1 2 3 4; --quick: 0); "
                         "the field runs use the first")
    ap.add_argument("--only", default=None, metavar="NAME[,NAME]", help=f"sections to run: {', '.join(SECTIONS)}")
    ap.add_argument("--peers", action="store_true", help="also RLlib PPO and the CleanRL-style loop, where importable")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default bench/results/report)")
    ap.add_argument("--update-results", action="store_true",
                    help=f"replace the lines between {START_MARKER} and {END_MARKER} in docs/results.md "
                         "with the tables")
    ap.add_argument("--page", type=Path, default=RESULTS_PAGE,
                    help="the page --update-results edits (default docs/results.md)")
    ap.add_argument("--from-json", type=Path, default=None, metavar="REPORT.json",
                    help="render a saved report.json instead of running anything")
    ap.add_argument("--refresh", action="store_true",
                    help="re-measure README's and the results page's speed figures beside their peers at this tree "
                         "(python -m bench.bench_speed, ~10 minutes on 2 cores) and regenerate those pages")
    args = ap.parse_args(argv)
    if args.refresh:
        return refresh()
    try:
        only = _parse_only(args.only)
        if args.update_results:
            check_page_markers(args.page)  # before a long run, not after
        if args.from_json:
            try:
                results = json.loads(args.from_json.read_text())
            except (OSError, ValueError) as err:
                raise ReportError(f"{args.from_json}: {getattr(err, 'strerror', None) or err}") from None
        else:
            if args.update_results and (args.quick or args.only):
                raise ReportError("--update-results: the published figures come from a full run "
                                  "(no --quick, no --only)")
            budget = QUICK if args.quick else FULL
            if args.seeds:
                budget = dataclasses.replace(budget, seeds=tuple(args.seeds))
            mode = "quick" if args.quick else "full" if only == list(SECTIONS) else "partial"
            results = run_report(budget, only, args.peers, mode)
            rerun = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--update-results"]
            results["command"] = " ".join(["python -m bench.publish.report", *rerun])
            md, js = write_outputs(results, args.out)
            log(f"wrote {md} and {js} in {results['elapsed_s']:.0f} s")
            failed = [n for n, sec in results["sections"].items() if sec.get("error")]
            if failed:
                print(render_markdown(results), end="")
                log(f"not measured: {', '.join(failed)} (see the errors above); the pages are left alone")
                return 1
        if args.update_results:
            if results.get("mode", "full") != "full":
                raise ReportError(f"--update-results: {args.from_json} is a {results.get('mode')} run, not a full one")
            failed = [n for n, sec in results.get("sections", {}).items() if sec.get("error")]
            if failed:
                raise ReportError(f"--update-results: {args.from_json} lacks {', '.join(failed)} (not measured)")
            replace_page_block(args.page, render_markdown(results))
            log(f"updated {args.page}")
            if args.page == RESULTS_PAGE and not args.from_json:
                pages.write(pages.GLANCE)  # it reads the report.json just written
                log("updated README.md's results at a glance")
        else:
            print(render_markdown(results), end="")
    except ReportError as err:
        print(f"bench.publish.report: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
