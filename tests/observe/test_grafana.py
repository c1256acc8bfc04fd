"""The Grafana dashboard of the ``rl_system_*`` series (rl_system/observe/grafana.py). Provisioning on a
real Ray head is covered in tests/run/test_jobs.py."""

from __future__ import annotations

import json
import re

from rl_system.cli.main import main
from rl_system.observe.grafana import FILE_NAME, dashboard, install
from rl_system.observe.telemetry import COUNTERS, GAUGES


def test_every_exported_series_has_a_panel_filtered_by_run():
    board = dashboard()
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    for name, _ in GAUGES:
        assert any(re.search(rf'\bray_rl_system_{name}\{{run=~"\$run"\}}', e) for e in exprs), name
    for name, _ in COUNTERS:
        assert any(f'rate(ray_rl_system_{name}_total{{run=~"$run"}}[1m])' in e for e in exprs), name
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) == len(GAUGES) + len(COUNTERS)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["run"]["query"]["query"] == "label_values(ray_rl_system_env_steps, run)"
    # panels do not overlap on the 24-column grid
    cells = {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in board["panels"]}
    assert len(cells) == len(ids) and all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in board["panels"])


def test_install_writes_beside_rays_dashboards_and_only_where_they_are(tmp_path):
    assert install(tmp_path) is None                                  # no dashboards folder: nothing written
    folder = tmp_path / "metrics" / "grafana" / "dashboards"
    folder.mkdir(parents=True)
    path = install(tmp_path)
    assert path == folder / FILE_NAME and json.loads(path.read_text()) == dashboard()
    assert sorted(p.name for p in folder.iterdir()) == [FILE_NAME]    # no temporary file left


def test_cli_writes_the_dashboard(tmp_path, capsys):
    out = tmp_path / "g" / "board.json"
    assert main(["grafana-dashboard", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["uid"] == "rlSystemDashboard"
    assert capsys.readouterr().out.startswith(f"wrote {out}")
