"""OpenMP's wait policy for a run's processes, chosen from the cores that are free when it starts.

Torch's CPU builds run their intra-op parallelism (and MKL's) on GNU OpenMP. A thread that
reaches a parallel region's barrier first spins ``GOMP_SPINCOUNT`` times (300,000 by default)
before it sleeps. On a machine to itself that is what a learner on two threads wants: its partner
is woken at once, and an update of many small steps stays cheap. Where another process holds a
core, the spinning thread burns the time slice its partner needs, and keeps the scheduler from
moving the partner to the core it spins on: ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once) is then
the fast policy. Measured on a 2-core VM in whole runs (``python -m bench.bench_threads --runs``,
docs/lab/results.md, 2026-12-07): idle, passive waits cost the two-thread throughput CartPole a
third of its speed and MinAtar 13-15%; beside one busy process, spinning cost every config 2-3x.
No spin count wins both.

So :func:`set_default` looks before torch loads: where the other processes on the machine keep
less than :data:`BUSY_CORES` busy, libgomp's own spin (``GOMP_SPINCOUNT=300000``, what torch
does unconfigured); otherwise passive. A run's Ray actors inherit the choice (an embedded Ray
starts from the driver's environment). The sample spans the command line's own imports, so it
costs no start-up time. A variable the user set (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``) is
left alone. A job joining a cluster cannot see its nodes' load: its actors wait passively
(:func:`joined_ray_init`). Torch-free on purpose.
"""

from __future__ import annotations

import os
import time

WAIT_POLICY = "OMP_WAIT_POLICY"
SPIN_COUNT = "GOMP_SPINCOUNT"
PASSIVE = "PASSIVE"
LIBGOMP_SPIN = "300000"
"""libgomp's spin count where neither variable is set, written out so that the choice shows."""
BUSY_CORES = 0.5
"""Cores the machine's other processes keep busy at which a run's threads wait passively."""
MIN_SAMPLE_S = 0.05

_window: tuple[float, int, float] | None = None  # (wall s, busy ticks, own CPU s) when the sample began
_chosen: tuple[str, str] | None = None  # the variable and value set_default put there (not the user)
_busy_at_start: float | None = None


def _busy_ticks() -> int | None:
    """Clock ticks the machine's cores spent busy since boot (``/proc/stat``), None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def begin_sample() -> None:
    """Start measuring the machine's load (the command line calls this before its imports)."""
    global _window
    ticks = _busy_ticks()
    _window = None if ticks is None else (time.monotonic(), ticks, _own_cpu_s())


def other_busy_cores() -> float | None:
    """Cores that processes other than this one kept busy since :func:`begin_sample` (at least
    :data:`MIN_SAMPLE_S` of it, waited for where less has passed); None where unknown."""
    if _window is None:
        begin_sample()
        if _window is None:
            return None
    t0, ticks0, own0 = _window
    time.sleep(max(0.0, MIN_SAMPLE_S - (time.monotonic() - t0)))
    ticks = _busy_ticks()
    if ticks is None:
        return None
    elapsed = time.monotonic() - t0
    others_s = (ticks - ticks0) / os.sysconf("SC_CLK_TCK") - (_own_cpu_s() - own0)
    return max(0.0, others_s / elapsed)


def user_set() -> bool:
    """Whether the environment holds a wait policy that :func:`set_default` did not put there."""
    return any(var in os.environ and _chosen != (var, os.environ[var]) for var in (WAIT_POLICY, SPIN_COUNT))


def set_default() -> str:
    """This process's (and the processes it starts') wait policy, where the environment has none;
    returns what they run with, in words (:func:`describe`)."""
    global _chosen, _busy_at_start
    if WAIT_POLICY in os.environ or SPIN_COUNT in os.environ:
        return describe()
    _busy_at_start = other_busy_cores()
    idle = _busy_at_start is not None and _busy_at_start < BUSY_CORES
    _chosen = (SPIN_COUNT, LIBGOMP_SPIN) if idle else (WAIT_POLICY, PASSIVE)
    os.environ[_chosen[0]] = _chosen[1]
    return describe()


def describe() -> str:
    """The wait policy in this process's environment and where it came from, in words (a run's
    debug log says it)."""
    if not user_set() and _chosen is not None:
        seen = "unknown" if _busy_at_start is None else f"{_busy_at_start:.2f}"
        why = f"chosen: other processes kept {seen} cores busy at start"
    else:
        why = "from the environment" if WAIT_POLICY in os.environ or SPIN_COUNT in os.environ else "libgomp's default"
    if WAIT_POLICY in os.environ:
        return f"OpenMP waits: {WAIT_POLICY}={os.environ[WAIT_POLICY]} ({why})"
    return f"OpenMP waits: {SPIN_COUNT}={os.environ.get(SPIN_COUNT, LIBGOMP_SPIN)} ({why})"


def joined_ray_init() -> dict[str, object]:
    """``ray.init`` keywords for joining a cluster, whose processes did not start from this
    environment and whose load this process cannot see: a passive wait as the job's runtime
    environment, unless the user's environment sets the policy (a job submitted with a runtime
    environment runs its driver with those variables, and Ray refuses a second value for one)."""
    return {} if user_set() else {"runtime_env": {"env_vars": {WAIT_POLICY: PASSIVE}}}



def threads_may_spin() -> bool:
    """Whether this process's environment lets OpenMP threads spin: ``GOMP_SPINCOUNT`` set above 0
    and no passive wait policy. A run's actors inherit it from :func:`set_default` (the machine
    was idle at start) or from the user (who says the cores are to spare): either way a second
    thread finds a free core. Unset (a library caller, a job joining a cluster): not known."""
    try:
        spin = int(os.environ.get(SPIN_COUNT, "0")) > 0
    except ValueError:
        spin = False
    return spin and os.environ.get(WAIT_POLICY, "").upper() != PASSIVE
