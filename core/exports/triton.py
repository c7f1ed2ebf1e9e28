"""``triton``: per-shape Triton configs in the layout vLLM uses for its fused-MoE configs.

One JSON file per device and kernel, named ``<kernel>,device_name=<DEVICE_NAME>.json`` where
DEVICE_NAME is the device name with spaces as underscores (``torch.cuda.get_device_name()``
``.replace(" ", "_")``, as vLLM names its files). The file maps a shape key (the problem,
``M=4096,N=4096,K=4096``) to the config: tunable parameters in upper case (``BLOCK_SIZE_M``: the
names of the kernel's ``tl.constexpr`` arguments), ``num_warps`` and ``num_stages`` as they are.

What cannot be written faithfully is refused (InvalidInput) rather than written wrong: two parameters
that upper-case alike (``bs``, ``BS``: Triton would get one value), two GPU models whose entries land
in one file under one shape key, and a device name that is no plain file name (``a/b``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports import is_plain_file_name
from kernelfarm.core.exports.model import BestExport

# Launch options of triton.Config rather than meta-parameters of the kernel: kept in lower case.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# A shape key's integer: ASCII digits. str.isdigit() also takes "²" (int() raises) and "٣" (int() reads
# 3: another shape), and stripping every "-" took "--5" (int() raises).
ASCII_INTEGER = re.compile(r"-?[0-9]+")


def device_file_name(kernel: str, device_name: str) -> str:
    return f"{kernel},device_name={device_name.replace(' ', '_')}.json"


def triton_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as a ``triton.Config``'s keyword arguments: meta-parameters upper-cased.

    Raises:
        InvalidInput: two parameters upper-case alike (``bs``, ``BS``): one value would be lost.
    """
    converted: dict[str, Any] = {}
    original: dict[str, str] = {}
    for name, value in config.items():
        key = name if name in LAUNCH_OPTIONS else name.upper()
        if key in original:
            raise InvalidInput(
                f"parameters {original[key]!r} and {name!r} are both {key!r} in a Triton config (meta-parameters "
                "are the parameters' names in upper case); the json export keeps them apart"
            )
        original[key], converted[key] = name, value
    return converted


def write(export: BestExport) -> dict[str, str]:
    """File name → file text, one file per GPU model.

    Raises:
        InvalidInput: a config :func:`triton_config` refuses, a device name that cannot name a file, or
            two GPU models with one file name measured on one problem (one would hide the other).
    """
    files: dict[str, dict[str, dict[str, Any]]] = {}
    written_by: dict[tuple[str, str], str] = {}  # (file name, shape key) → the GPU model it came from
    for entry in export.entries:
        device = entry.gpu_name or entry.gpu_model
        name = device_file_name(export.kernel, device)
        if not is_plain_file_name(name):
            raise InvalidInput(
                f"GPU model {entry.gpu_model!r} (device name {device!r}) gives the file name {name!r}, which is not "
                "a plain file name (it has a '/', '\\' or NUL)"
            )
        first = written_by.setdefault((name, entry.problem_key), entry.gpu_model)
        if first != entry.gpu_model:
            raise InvalidInput(
                f"GPU models {first!r} and {entry.gpu_model!r} would both write {entry.problem_key!r} into {name}: "
                "export them one at a time (--gpu)"
            )
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
        value = value.strip()
        shape[name.strip()] = int(value) if ASCII_INTEGER.fullmatch(value) else value
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
