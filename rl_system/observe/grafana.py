"""A Grafana dashboard for the ``rl_system_*`` series (:data:`rl_system.observe.telemetry.GAUGES`,
:data:`~rl_system.observe.telemetry.COUNTERS`), provisioned the way Ray provisions its own.

Ray's dashboard process writes its Grafana dashboards as JSON files into
``<session dir>/metrics/grafana/dashboards/`` and a provisioning file that points Grafana at that
folder (start Grafana with ``--config <session dir>/metrics/grafana/grafana.ini``, as Ray's
metrics guide says). :func:`install` puts ``rl_system_grafana_dashboard.json`` beside them; the
driver of ``rl-system train`` calls it on its node once Ray is up, so on the head of a cluster
(where ``ray submit`` and ``ray job submit`` run the driver) Grafana lists "rl_system" next to
Ray's dashboards. ``rl-system grafana-dashboard --out FILE`` writes the same JSON for a Grafana
of your own (Dashboards → Import).

The dashboard is built from the telemetry's series list, so a new series gets a panel. Each
panel selects the runs picked in the ``run`` variable; counters are drawn as per-second rates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rl_system.filesystems import write_json
from rl_system.observe.telemetry import COUNTERS, GAUGES

FILE_NAME = "rl_system_grafana_dashboard.json"
UID = "rlSystemDashboard"
PROMETHEUS_PREFIX = "ray_"  # Ray's metrics agent prefixes every custom metric


def _panel(pid: int, title: str, description: str, expr: str, x: int, y: int) -> dict[str, Any]:
    return {"id": pid, "type": "timeseries", "title": title, "description": description,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
            "targets": [{"expr": expr, "legendFormat": "{{run}}", "refId": "A",
                         "datasource": {"type": "prometheus", "uid": "${datasource}"}}],
            "fieldConfig": {"defaults": {"unit": "short"}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}}


def dashboard() -> dict[str, Any]:
    """The dashboard JSON: a ``datasource`` and a ``run`` variable, one panel per series."""
    panels = []
    series = [(f"{PROMETHEUS_PREFIX}rl_system_{name}", name.replace("_", " "), desc, False) for name, desc in GAUGES]
    series += [(f"{PROMETHEUS_PREFIX}rl_system_{name}_total", f"{name.replace('_', ' ')} per second", desc, True)
               for name, desc in COUNTERS]
    for i, (metric, title, desc, is_counter) in enumerate(series):
        selector = f'{metric}{{run=~"$run"}}'
        expr = f"sum by (run) (rate({selector}[1m]))" if is_counter else f"max by (run) ({selector})"
        panels.append(_panel(i + 1, title, desc, expr, x=12 * (i % 2), y=8 * (i // 2)))
    first = f"{PROMETHEUS_PREFIX}rl_system_{GAUGES[0][0]}"
    return {
        "uid": UID, "title": "rl_system", "tags": ["rl_system"], "editable": True, "schemaVersion": 27,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "10s", "timezone": "", "version": 1,
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "hide": 2, "current": {}},
            {"name": "run", "label": "run", "type": "query", "multi": True, "includeAll": True, "allValue": ".+",
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "definition": f"label_values({first}, run)",
             "query": {"query": f"label_values({first}, run)", "refId": "run"}, "refresh": 2, "sort": 1,
             "current": {"selected": True, "text": ["All"], "value": ["$__all"]}},
        ]},
        "panels": panels,
    }


def install(session_dir: str | Path) -> Path | None:
    """Write the dashboard into Ray's provisioned dashboards folder of ``session_dir``; None if
    this node has no such folder (no dashboard process on it, e.g. a worker node)."""
    folder = Path(session_dir) / "metrics" / "grafana" / "dashboards"
    if not folder.is_dir():
        return None
    path = folder / FILE_NAME
    write_json(path, dashboard())
    return path


def install_on_this_node() -> Path | None:
    """:func:`install` into the session of the Ray node this process is connected to; never
    raises (a dashboard is a convenience, not a reason for a run to fail)."""
    try:
        import ray

        node = ray._private.worker.global_worker.node  # the node object of this driver's session
        return install(node.get_session_dir_path())
    except Exception:  # noqa: BLE001 - no node object, no permission, another Ray layout
        return None
