"""What a worker advertises and which queues it consumes (core/capabilities.py, worker/tasks.py): the
uploaded-Python opt-in only when started with it, one queue per capability, the same route computed by
the coordinator."""

from __future__ import annotations

import pytest

from kernelfarm.core.capabilities import (
    UPLOADED_PYTHON,
    capability_queue,
    capability_queues,
    missing,
    plugin_capability,
    routed_model,
)
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.settings import Settings
from kernelfarm.worker.capabilities import worker_capabilities


@pytest.mark.parametrize("opted_in", [False, True])
def test_uploaded_python_is_advertised_only_with_the_opt_in(opted_in: bool) -> None:
    assert (UPLOADED_PYTHON in worker_capabilities(Settings(worker_allow_uploaded_python=opted_in))) is opted_in


def test_the_coordinators_route_is_a_queue_only_capable_workers_consume() -> None:
    model = "nvidia-h100-80gb-hbm3"
    needs = plugin_capability("my-kernels", "1.2.0")
    assert routed_model(model, []) == model  # nothing required: the model's own queue
    route = queue_for(routed_model(model, [needs]))
    assert route == capability_queue(queue_for(model), [needs])
    assert route in capability_queues(queue_for(model), [needs, UPLOADED_PYTHON])
    assert route not in capability_queues(queue_for(model), [plugin_capability("my-kernels", "1.1.0")])
    assert missing([needs], [plugin_capability("my-kernels", "1.1.0")]) == [needs]
    assert missing([needs], [needs, UPLOADED_PYTHON]) == []
