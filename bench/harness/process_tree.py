"""A child process's cost, its orphans included: run a command to its end and give its wall s, the
CPU s of its process tree and where that CPU went. Ray's processes outlive the driver that started
them; making this process the children's subreaper (Linux) brings them back here, where they are
reaped and counted (``bench/bench_marl.py``'s *process* columns)."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.harness.stamp import ROOT

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux): Ray's processes, orphaned when
    their parent exits, are then reaped here and their CPU time reaches ``RUSAGE_CHILDREN``."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def reap_orphans(timeout_s: float = 30.0) -> tuple[dict[str, float], list[str]]:
    """Wait for the descendants left behind (Ray's, after its driver exits), up to ``timeout_s``:
    ``({name: CPU s of the reaped processes of that name}, names of those still running)``."""
    reaped: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            # Peek first (WNOWAIT) so that the zombie's name can still be read, then reap it.
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped, []
        if info is None:
            time.sleep(0.2)
            continue
        name = _comm(info.si_pid)
        _, _, usage = os.wait4(info.si_pid, 0)
        reaped[name] = reaped.get(name, 0.0) + _cpu(usage)
    left = [_comm(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == os.getpid()]
    return reaped, left


def _ppid(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def run_child(cmd: list[str], log: Path) -> dict[str, Any]:
    """Run ``cmd`` (output to ``log``), raise on failure; its wall s, the CPU s of its process tree,
    and where that CPU went: the command itself (with the descendants it waited for) and the
    orphans reaped here, by name, and any still running after the wait (their CPU is missing)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    reaped, left = reap_orphans()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}; the end of {log}:\n{tail}")
    return {"process_wall_s": wall, "process_cpu_s": _cpu(after) - _cpu(before),
            "cpu_by_process": {"command": _cpu(usage), **reaped}, "still_running": left}
