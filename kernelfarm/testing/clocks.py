"""Fast clocks for farms under test, so a lost worker or message is noticed in seconds.

The defaults are tuned for real GPUs (heartbeat 2 s, lease 15 s); these are passed to every component
of a test farm as environment overrides.
"""

from __future__ import annotations

FAST_TIMINGS = {
    "KERNELFARM_HEARTBEAT_SECONDS": "0.5",
    "KERNELFARM_LEASE_SECONDS": "4",
    "KERNELFARM_WORKER_TTL_SECONDS": "4",
    "KERNELFARM_REAP_INTERVAL_SECONDS": "1",
    "KERNELFARM_REDISPATCH_AFTER_SECONDS": "6",
}
