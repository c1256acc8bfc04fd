"""``rl-system rollouts inspect FILE``: a plain-text report of one rollout archive (``archive.py``):
file, rows, sizes, compression, schema and per-column statistics computed by ``pyarrow.compute``."""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from rl_system.rollout.archive_read import ID_COLUMNS, ArchiveError, _load, _values

__all__ = ["column_stats", "inspect_archive", "cmd_rollouts_inspect"]


def _type_name(t: pa.DataType) -> str:
    if isinstance(t, pa.FixedShapeTensorType):
        return f"tensor<{t.value_type}>[{','.join(map(str, t.shape))}]"
    return str(t)


def column_stats(table: pa.Table) -> list[dict[str, Any]]:
    """Per column: ``name``, ``type``, ``elements``; numeric: ``min``/``max``/``mean``/``std``
    (population, over all elements of tensor columns) and ``nan`` (floats); bool: ``true_frac``;
    integer scalar columns: ``distinct`` (and ``values`` when there are at most 6)."""
    out = []
    for name, col in zip(table.column_names, table.columns):
        v = _values(col)
        s: dict[str, Any] = {"name": name, "type": _type_name(col.type), "elements": len(v)}
        vt = v.type
        if len(v) == 0:
            pass
        elif pa.types.is_boolean(vt):
            s["true_frac"] = pc.sum(v).as_py() / len(v)
        elif pa.types.is_integer(vt) or pa.types.is_floating(vt):
            if pa.types.is_float16(vt):
                v = v.cast(pa.float32())
            mm = pc.min_max(v)
            s.update(min=mm["min"].as_py(), max=mm["max"].as_py(), mean=pc.mean(v).as_py(),
                     std=pc.stddev(v).as_py())
            if pa.types.is_floating(vt):
                s["nan"] = pc.sum(pc.is_nan(v).cast(pa.int64())).as_py()
            if pa.types.is_integer(vt) and not isinstance(col.type, pa.FixedShapeTensorType):
                s["distinct"] = pc.count_distinct(v).as_py()
                if s["distinct"] <= 6:
                    s["values"] = sorted(pc.unique(v).to_pylist())
        elif name in ID_COLUMNS or pa.types.is_string(vt) or pa.types.is_large_string(vt):
            s["distinct"] = pc.count_distinct(v).as_py()
        out.append(s)
    return out


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def _num(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    return f"{x:.4g}"


def inspect_archive(uri_or_path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> str:
    """A plain-text report: file, rows, sizes, compression ratio, schema and per-column statistics."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table, file_bytes, comp = _load(uri_or_path, filesystem)
    mem = table.nbytes
    md = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    lines = [
        f"archive      {os.fspath(uri_or_path)}",
        f"format       Arrow IPC file (Feather v2), buffer compression: {comp}"
        + (f", {md['rl_system.rollout.archive']}" if "rl_system.rollout.archive" in md else ""),
        f"rows         {table.num_rows:,} in {table.num_columns} columns, {table.column(0).num_chunks if table.num_columns else 0} record batches",
        f"file size    {_human(file_bytes)} ({file_bytes:,} bytes)",
        f"in memory    {_human(mem)} ({mem:,} bytes, uncompressed Arrow buffers)",
        f"compression  {mem / file_bytes:.2f}x" if file_bytes else "compression  n/a",
    ]
    if "rl_system.round" in md:
        lines.append(f"round        {md['rl_system.round']}")
    if "rl_system.rollouts" in md:
        try:
            metas = json.loads(md["rl_system.rollouts"])
            lines.append(f"rollouts     {len(metas)}: " + ", ".join(
                f"worker {m.get('worker_id')} v{m.get('version')}" for m in metas[:16])
                + (", ..." if len(metas) > 16 else ""))
        except (ValueError, AttributeError):
            pass

    rt = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for head, just in (("column", "left"), ("type", "left"), ("min", "right"), ("max", "right"),
                       ("mean", "right"), ("std", "right"), ("nan", "right"), ("true %", "right"),
                       ("distinct", "left")):
        rt.add_column(head, justify=just, no_wrap=True)
    for s in column_stats(table):
        distinct = ""
        if "distinct" in s:
            distinct = str(s["distinct"])
            if "values" in s and s["name"] in ID_COLUMNS:
                distinct += " {" + ", ".join(map(str, s["values"])) + "}"
        rt.add_row(s["name"], s["type"], _num(s.get("min")), _num(s.get("max")), _num(s.get("mean")),
                   _num(s.get("std")), _num(s.get("nan")) if s.get("nan") else ("0" if "nan" in s else ""),
                   f"{100 * s['true_frac']:.2f}" if "true_frac" in s else "", distinct)
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None, force_terminal=False, highlight=False,
            emoji=False, markup=False, soft_wrap=False).print(rt)
    body = "\n".join(line.rstrip() for line in buf.getvalue().splitlines())
    return "\n".join(lines) + "\n\n" + body.strip("\n") + "\n"


def cmd_rollouts_inspect(path: str) -> int:
    """``rl-system rollouts inspect FILE``: print the report (0) or one error line to stderr (2)."""
    try:
        report = inspect_archive(path)
    except ArchiveError as e:
        print(f"rl-system: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(report)
    return 0
