"""Test-only clock skew for one process: put this directory first on PYTHONPATH and set
KERNELFARM_TEST_CLOCK_SKEW_SECONDS. Python imports ``sitecustomize`` at start-up, before any
application code, so kombu, Celery and logging all read the skewed wall clock via time.time().

Why not libfaketime: it intercepts clock_nanosleep, which Python 3.11's time.sleep uses, and with
an offset sleeps hang (+6 h) or fail with EINVAL (-6 h), so it cannot run a worker at all.
datetime.now() is not skewed (C code reading the system clock directly); nothing in a worker's
lease handling reads it: leases are stamped and judged by the database's now().
"""

from __future__ import annotations

import os
import time

_skew = float(os.environ.get("KERNELFARM_TEST_CLOCK_SKEW_SECONDS", "0") or 0)
if _skew:
    _real_time, _real_time_ns = time.time, time.time_ns

    def _skewed_time() -> float:
        return _real_time() + _skew

    def _skewed_time_ns() -> int:
        return _real_time_ns() + int(_skew * 1e9)

    time.time = _skewed_time
    time.time_ns = _skewed_time_ns
