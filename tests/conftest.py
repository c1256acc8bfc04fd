"""Shared fixtures: one real local Ray session for the whole test run (starting Ray costs seconds)."""

from __future__ import annotations

import pytest
import ray


@pytest.fixture(scope="session")
def ray_session():
    if not ray.is_initialized():
        # 4 logical CPUs on a 2-core box: rounds are synchronous, so a learner and two workers
        # never compete for long; the same choice the embedded mode of the CLI makes.
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
