"""Kernel Tuner cache files read as JSON, without building a landscape (core/landscape.py does that, and
imports numpy for its search space): for a process that only asks a file what it recorded, such as
``kernelfarm worker`` finding its replay GPU's queue before it execs Celery.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelfarm.core.errors import InvalidInput


def read_json_tolerant(path: Path) -> dict[str, Any]:
    """The JSON object of a Kernel Tuner cache file, plain or gzip, terminated or not.

    Raises:
        InvalidInput: the file cannot be read, or is not one (not gzip or UTF-8 JSON, or not an
            object), with the reason: a file given by mistake (`kernelfarm bench-strategies
            README.md`) raised a JSON traceback.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:  # missing, a folder, no permission: not a question of its format
        raise InvalidInput(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8").strip()
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            # An unterminated Kernel Tuner cache: entries end with "},"; close the cache and the file.
            data = json.loads(text.rstrip().rstrip(",") + "}}")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{path}: not a Kernel Tuner cache file ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: not a Kernel Tuner cache file")
    return data


def check_format(path: Path, data: dict[str, Any]) -> None:
    """Raises:
    InvalidInput: ``data`` (read from ``path``) lacks a field of the Kernel Tuner cache format.
    """
    for name in ("tune_params_keys", "tune_params", "cache"):
        if name not in data:
            raise InvalidInput(f"{path}: missing field {name!r} of the Kernel Tuner cache format")


def recorded_device(data: dict[str, Any]) -> str:
    """The GPU a cache file was recorded on, as its landscape names it."""
    return str(data.get("device_name", "unknown"))


def one_device(device_names: Iterable[str]) -> str:
    """The one GPU that a replay worker's recordings were made on.

    Raises:
        ValueError: they name several (or none).
    """
    devices = set(device_names)
    if len(devices) != 1:
        raise ValueError(f"one replay worker replays one GPU model; these files record {sorted(devices)}")
    return devices.pop()


def recorded_gpu(paths: Iterable[Path]) -> str:
    """The GPU the replay recordings ``paths`` were made on, read from the files alone.

    Raises:
        InvalidInput: a file is not a Kernel Tuner cache file.
        ValueError: they name several GPUs.
    """
    names = []
    for path in paths:
        data = read_json_tolerant(path)
        check_format(path, data)
        names.append(recorded_device(data))
    return one_device(names)
