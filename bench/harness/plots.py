"""Figures for the docs, drawn the same way everywhere (:mod:`bench.publish.figures` uses them): an Agg
canvas without pyplot or a display, about 800 px wide, stored as an optimised 256-colour palette
PNG (:func:`compact`), and one error type whose message is the line the command prints.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "img"
WIDTH_PX = 800
MAX_BYTES = 120_000  # what the tests hold each picture to
OURS, PEER, OTHER, THIRD, FOURTH = "tab:blue", "tab:orange", "tab:green", "tab:gray", "tab:purple"


class FigureError(RuntimeError):
    """A figure that cannot be drawn (its source missing or empty): one line."""


# --------------------------------------------------------------------------- drawing and saving


def new_figure(width_in: float = 8.0, height_in: float = 4.5) -> Any:
    """An empty figure on an Agg canvas, constrained layout, small fonts."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def compact(png: bytes) -> bytes:
    """``png`` as a 256-colour palette PNG, optimised: plots are lines and flat colours, so the
    palette loses nothing visible and the file shrinks about threefold."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()


def save_png(fig: Any, path: Path, width_px: int = WIDTH_PX) -> Path:
    """Write ``fig`` to ``path`` about ``width_px`` wide, compacted (:func:`compact`)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=width_px / fig.get_figwidth(), facecolor="white")
    return compact_file(path, buf.getvalue())


def compact_file(path: Path, png: bytes | None = None) -> Path:
    """Compact the PNG at ``path`` in place (or write ``png`` there compacted)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(compact(png if png is not None else path.read_bytes()))
    return path


def provenance_note(fig: Any, text: str) -> None:
    """The figure's provenance in small grey type at its bottom right (the layout makes room)."""
    fig.supxlabel(text, x=0.995, ha="right", fontsize=6, color="0.45")


def log_axis(ax: Any, fmt: Any) -> None:
    """A log x axis ticked at 1, 2 and 5 times the powers of ten, labelled by ``fmt``."""
    from matplotlib.ticker import LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(fmt)
    ax.xaxis.set_minor_formatter(NullFormatter())


def seconds_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda x, _pos: f"{x:g} s")


def steps_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    def fmt(x: float, _pos: Any) -> str:
        return f"{x / 1e6:g}M" if abs(x) >= 1e6 else f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"

    return FuncFormatter(fmt)

