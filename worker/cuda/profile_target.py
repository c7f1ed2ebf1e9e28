"""The program ncu profiles: launch each candidate of a batch once (``python -m`` entry point).

python -m kernelfarm.worker.cuda.profile_target JOB.json               # a batch, now
python -m kernelfarm.worker.cuda.profile_target --wait DIR DEVICE PID  # a standby: get ready, then
                                                                       # wait for DIR/job.json

Each candidate is loaded and launched by its backend's loader, as the measuring child does: the cuda
backend's cubin loader, or the loader a batch names (the triton backend's).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import psutil

from kernelfarm.worker.measuring.loader import KernelLoader

logger = logging.getLogger(__name__)

# How often a standby looks for its batch, and checks that the worker that started it still lives.
POLL_SECONDS = 0.005
PARENT_CHECK_SECONDS = 1.0


def main(job_path: str) -> int:
    import cupy as cp

    from kernelfarm.worker.measuring.catalogue import KernelCatalogue
    from kernelfarm.worker.measuring.verifier import poison

    job = json.loads(Path(job_path).read_text())
    cp.cuda.Device(int(job.get("device", 0))).use()
    catalogue = KernelCatalogue(refs=job.get("refs", {}))
    loader = make_loader(job.get("loader"))
    launched: list[int] = []
    data_key = None
    buffers: dict = {}
    for index, target in enumerate(job["targets"]):
        try:
            spec = catalogue.spec(target["kernel"], target.get("kernel_version"), target.get("bundle"))
            kernel = loader.implementation(spec)
            key = (target["kernel"], json.dumps(target["problem"], sort_keys=True), target["seed"])
            if key != data_key:
                buffers = {}
                cp.get_default_memory_pool().free_all_blocks()
                buffers = kernel.make_inputs(target["problem"], int(target["seed"]))
                data_key = key
            run = loader.load(target["cubin"], spec, target["config"], target["problem"]).bind(
                buffers, target["problem"]
            )
            for name in kernel.outputs():
                poison(buffers[name])
            cp.cuda.Stream.null.synchronize()
            run()
            cp.cuda.Stream.null.synchronize()
            launched.append(index)
        except Exception as exc:  # skip a failing candidate; the rest of the batch still counts
            logger.warning("profile target %d failed: %s", index, exc)
            if "illegal" in str(exc).lower() or "launch failure" in str(exc).lower():
                break  # the context is poisoned: nothing after this can run
        Path(job["launched"]).write_text(json.dumps(launched))
    Path(job["launched"]).write_text(json.dumps(launched))
    return 0


def make_loader(ref: dict | None) -> KernelLoader:
    """The backend's loader named in a batch (``{"ref": "module:Class", "kwargs": {...}}``); the
    cuda backend's cubin loader when none is named."""
    if not ref:
        from kernelfarm.worker.cuda.loader import CubinLoader

        return CubinLoader()
    module, _, name = str(ref["ref"]).partition(":")
    loader = getattr(importlib.import_module(module), name)(**ref.get("kwargs", {}))
    if not isinstance(loader, KernelLoader):
        raise TypeError(f"{ref['ref']} is not a KernelLoader")
    return loader


def standby(directory: str, device: int, parent_pid: int) -> int:
    """Do everything a batch needs before its targets are known (the interpreter and CuPy under
    ncu, the CUDA context), then wait for ``directory/job.json`` and run it."""
    import cupy as cp

    from kernelfarm.worker.measuring.session import warm_libraries

    importlib.import_module("kernelfarm.kernels.registry")  # now, not while the batch waits
    cp.cuda.Device(device).use()
    # The context, and the libraries the targets' inputs use. ncu profiles none of these kernels
    # (its filter takes only the entry names of the farm's kernels).
    warm_libraries()
    named = Path(directory) / "loader.json"
    if named.is_file():  # a backend's own loader: warm it too (the triton backend's imports torch)
        make_loader(json.loads(named.read_text())).warm()
    # ready, with this process's pid: the worker parks ncu's processes, not this one
    (Path(directory) / "ready.tmp").write_text(str(os.getpid()))
    (Path(directory) / "ready.tmp").rename(Path(directory) / "ready")
    job = Path(directory) / "job.json"
    checked = time.monotonic()
    while not job.is_file():
        time.sleep(POLL_SECONDS)
        if time.monotonic() - checked > PARENT_CHECK_SECONDS:
            checked = time.monotonic()
            if not Path(directory).is_dir() or not psutil.pid_exists(parent_pid):
                # the worker is gone or closed this standby: launch nothing, and continue our ncu
                # (its processes share our process group), which the worker parked (stopped) while we
                # wait, so that it sees us exit and exits too
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(os.getpgrp(), signal.SIGCONT)
                return 0
    return main(str(job))


if __name__ == "__main__":
    if sys.argv[1] == "--wait":
        sys.exit(standby(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    sys.exit(main(sys.argv[1]))
