"""Where and when a figure was measured: date (UTC), git commit (``+dirty`` when the tree differs
outside ``bench/results``), CPU, the vector instruction set torch's kernels use, cores, memory,
GPU, library versions and the 1-minute load average. Every suite stamps what it writes."""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

# The libraries' switches that hold their kernels to one instruction set (docs/user_guide.md,
# "Reproducibility"): a seed's run repeats across CPUs only with the same kernels.
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def load1() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _git(*args: str) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read only: never refresh the index
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit() -> str:
    """Short hash of HEAD, ``+dirty`` when anything tracked or untracked (not ignored) differs,
    ``bench/results`` (what the suites write) and a worktree's ``rl_system/envs`` link (how a bare
    worktree of this repository imports its ``envs/``, :mod:`bench.compare_checkouts`) excepted;
    ``unknown`` outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown"
    status = _git("status", "--porcelain", "--", ".", f":(exclude){RESULTS.relative_to(ROOT).as_posix()}",
                  ":(exclude)rl_system/envs")
    return head + ("+dirty" if status else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_kernels() -> str:
    """The vector instruction set torch's CPU kernels use ("AVX512", "AVX2", ...), with any of
    :data:`KERNEL_VARS` that are set: which kernels made a figure."""
    import torch

    held = " ".join(f"{k}={os.environ[k]}" for k in KERNEL_VARS if k in os.environ)
    return torch.backends.cpu.get_cpu_capability() + (f" ({held})" if held else "")


def where_it_ran() -> dict[str, str]:
    """``commit`` and ``cpu_kernels`` for a training run's row: rows merged from several sittings
    keep their own."""
    return {"commit": git_commit(), "cpu_kernels": cpu_kernels()}


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def version(module: str) -> str | None:
    """``module.__version__`` ("unknown" without one), or None when it does not import."""
    try:
        return getattr(importlib.import_module(module), "__version__", "unknown")
    except Exception:  # noqa: BLE001 - a missing or broken package is just "not installed"
        return None


def gpu() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001
        pass
    return None


def stamp(*modules: str) -> dict[str, Any]:
    """Where and when the figures were measured; ``modules`` adds their versions (``"mujoco"``,
    ...). The caller adds ``load_1m_after`` when the run ends."""
    st = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "cpu": cpu_model(),
        "cpu_kernels": cpu_kernels(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpu": gpu(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": version("torch"),
        "ray": version("ray"),
        "gymnasium": version("gymnasium"),
        "numpy": version("numpy"),
        "load_1m_before": load1(),
    }
    st.update({m: version(m) for m in modules})
    return st


def _load_str(v: Any) -> str:
    return "?" if v is None else f"{v:.2f}"


def is_busy(st: dict) -> bool:
    """Other work on the machine: a 1-minute load above half the cores before the run, or above
    the cores + 2 after it (the training runs themselves keep about the cores busy)."""
    cores = st.get("cores") or 1
    before, after = st.get("load_1m_before"), st.get("load_1m_after")
    return (before is not None and before > 0.5 * cores) or (after is not None and after > cores + 2)


def stamp_line(st: dict, mode: str = "full", elapsed_s: float | None = None) -> str:
    """The stamp as one Markdown sentence, flagged where the machine was busy or the run was not full."""
    mem = f", {st['memory_gib']:g} GiB" if st.get("memory_gib") is not None else ""
    gpu_name = st.get("gpu") or "no GPU"
    took = f"; the run took {elapsed_s / 60:.1f} min" if elapsed_s is not None else ""
    line = (f"Measured {st['date_utc']} at commit `{st['commit']}` on {st['cpu']} ({st['cores']} cores{mem}, "
            f"{gpu_name}); Python {st['python']}, torch {st['torch']}, Ray {st['ray']}, gymnasium {st['gymnasium']}; "
            f"1-minute load average {_load_str(st.get('load_1m_before'))} before, "
            f"{_load_str(st.get('load_1m_after'))} after{took}.")
    if is_busy(st):
        line += " **The machine was busy: the figures are pessimistic.**"
    if mode != "full":
        line += f" **{mode} mode: tiny budgets, not README figures.**"
    return line
