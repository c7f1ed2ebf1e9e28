"""The program ncu profiles: launch each candidate of a batch once (``python -m`` entry point)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

logger = logging.getLogger(__name__)


def main(job_path: str) -> int:
    import cupy as cp

    from worker.cuda.child import resolve_spec
    from worker.cuda.verify import poison

    job = json.loads(Path(job_path).read_text())
    cp.cuda.Device(int(job.get("device", 0))).use()
    launched: list[int] = []
    data_key = None
    buffers: dict = {}
    for index, target in enumerate(job["targets"]):
        try:
            spec = resolve_spec(target["kernel"], job.get("refs", {}))
            kernel = spec.cuda
            assert kernel is not None
            key = (target["kernel"], json.dumps(target["problem"], sort_keys=True), target["seed"])
            if key != data_key:
                buffers = {}
                cp.get_default_memory_pool().free_all_blocks()
                buffers = kernel.make_inputs(target["problem"], int(target["seed"]))
                data_key = key
            launch = kernel.launch(target["config"], target["problem"])
            function = cp.RawModule(path=target["cubin"]).get_function(kernel.entry)
            if launch.shared_bytes > 48 << 10:
                function.max_dynamic_shared_size_bytes = launch.shared_bytes
            for name in kernel.outputs():
                poison(buffers[name])
            cp.cuda.Stream.null.synchronize()
            function(
                launch.grid,
                launch.block,
                tuple(kernel.arguments(buffers, target["problem"])),
                shared_mem=launch.shared_bytes,
            )
            cp.cuda.Stream.null.synchronize()
            launched.append(index)
        except Exception as exc:  # skip a failing candidate; the rest of the batch still counts
            logger.warning("profile target %d failed: %s", index, exc)
            if "illegal" in str(exc).lower() or "launch failure" in str(exc).lower():
                break  # the context is poisoned: nothing after this can run
        Path(job["launched"]).write_text(json.dumps(launched))
    Path(job["launched"]).write_text(json.dumps(launched))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
