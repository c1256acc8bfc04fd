"""Watching runs: ``rl-system status`` (the runs reporting on a Ray cluster) and
``rl-system grafana-dashboard`` (the dashboard of their ``rl_system_*`` series)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rl_system.cli.common import fail


def add_status_parser(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("status", help="one-screen summary of the runs reporting on a Ray cluster")
    st.add_argument("--address", default="auto", help="the Ray cluster whose runs to list (default: %(default)s)")
    st.set_defaults(handler=cmd_status)


def add_grafana_parser(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("grafana-dashboard", help="write the Grafana dashboard of the rl_system_* series (JSON)")
    g.add_argument("--out", type=Path, default=Path("rl_system_grafana_dashboard.json"), metavar="FILE",
                   help="the file to write (default %(default)s)")
    g.set_defaults(handler=cmd_grafana_dashboard)


def cmd_status(args: argparse.Namespace) -> int:
    from rl_system.observe.telemetry import format_status, read_status

    try:
        runs = read_status(args.address)
    except ConnectionError as err:
        text = str(err)  # the reachability check names the address; Ray's own errors may not
        return fail(text if args.address in text else f"cannot reach a Ray cluster at {args.address!r}: {text}", 1)
    print(format_status(runs))
    return 0


def cmd_grafana_dashboard(args: argparse.Namespace) -> int:
    from rl_system.filesystems import write_json
    from rl_system.observe.grafana import dashboard

    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, dashboard())
    except OSError as err:
        return fail(f"cannot write {args.out}: {err}", 1)
    print(f"wrote {args.out} (Grafana: Dashboards > Import)")
    return 0
