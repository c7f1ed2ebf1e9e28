"""``triton``: per-shape Triton configs in the layout vLLM uses for its fused-MoE configs.

One JSON file per device and kernel, named ``<kernel>,device_name=<DEVICE_NAME>.json`` where
DEVICE_NAME is the device name with spaces as underscores (``torch.cuda.get_device_name()``
``.replace(" ", "_")``, as vLLM names its files). The file maps a shape key (the problem,
``M=4096,N=4096,K=4096``) to the config: tunable parameters in upper case (``BLOCK_SIZE_M``: the
names of the kernel's ``tl.constexpr`` arguments), ``num_warps`` and ``num_stages`` as they are.
"""

from __future__ import annotations

import json
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports.model import BestExport

# Launch options of triton.Config rather than meta-parameters of the kernel: kept in lower case.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def device_file_name(kernel: str, device_name: str) -> str:
    return f"{kernel},device_name={device_name.replace(' ', '_')}.json"


def triton_config(config: dict[str, Any]) -> dict[str, Any]:
    return {(name if name in LAUNCH_OPTIONS else name.upper()): value for name, value in config.items()}


def write(export: BestExport) -> dict[str, str]:
    """File name → file text, one file per GPU model."""
    files: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in export.entries:
        name = device_file_name(export.kernel, entry.gpu_name or entry.gpu_model)
        files.setdefault(name, {})[entry.problem_key] = triton_config(entry.config)
    return {name: json.dumps(shapes, indent=2, sort_keys=True) + "\n" for name, shapes in sorted(files.items())}


def parse_shape_key(key: str) -> dict[str, Any]:
    """``M=4096,dtype=bf16`` → ``{"M": 4096, "dtype": "bf16"}``; a bare ``4096`` (vLLM's batch-size
    keys) → ``{"": 4096}``."""
    shape: dict[str, Any] = {}
    for item in key.split(","):
        name, sep, value = item.partition("=")
        if not sep:
            name, value = "", name
        shape[name.strip()] = int(value) if value.strip().lstrip("-").isdigit() else value.strip()
    return shape


def read(text: str) -> dict[str, dict[str, Any]]:
    """A device file: shape key → config (as written, launch options included)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not a Triton config file: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InvalidInput("a Triton config file maps shape keys to config objects")
    return data
