"""A stored failure's traceback names files by module path, never by this host's folders."""

from __future__ import annotations

import json
import os
import sys

import pytest

from kernelfarm.core.gpu import model_slug
from kernelfarm.core.tracebacks import portable_traceback


def raised_in_json() -> BaseException:
    try:
        json.loads("{")  # raises inside the standard library's json package
    except ValueError as exc:
        return exc
    raise AssertionError("json.loads('{') did not raise")


def test_files_are_named_by_their_path_below_the_import_root() -> None:
    text = portable_traceback(raised_in_json(), frames=10)
    assert f"json{os.sep}decoder.py" in text and "JSONDecodeError" in text
    assert __file__ not in text and os.path.dirname(json.__file__) not in text


def test_the_farms_files_are_named_by_module_path_however_it_is_installed() -> None:
    """An editable install imports kernelfarm through a finder, not sys.path: its folder is a root anyway."""
    try:
        model_slug("!!!")  # raises inside kernelfarm/core/gpu.py
    except ValueError as exc:
        text = portable_traceback(exc, frames=10)
    assert 'File "kernelfarm/core/gpu.py"' in text.replace(os.sep, "/"), text


def test_a_file_under_no_import_root_is_named_by_its_file_name() -> None:
    text = portable_traceback(raised_in_json(), frames=10, roots=[])
    assert '"test_tracebacks.py"' in text and '"decoder.py"' in text
    assert not any(line.strip().startswith('File "/') for line in text.splitlines()), text


def test_the_root_folder_names_no_file() -> None:
    text = portable_traceback(raised_in_json(), frames=10, roots=[os.sep, *sys.path])
    assert not any(line.strip().startswith('File "/') for line in text.splitlines()), text


def test_a_chained_cause_is_portable_too() -> None:
    try:
        try:
            json.loads("{")
        except ValueError as inner:
            raise RuntimeError("reference failed") from inner
    except RuntimeError as outer:
        text = portable_traceback(outer, frames=10)
    assert "direct cause" in text and "RuntimeError: reference failed" in text
    assert not any(line.strip().startswith('File "/') for line in text.splitlines()), text


@pytest.mark.parametrize("frames", [1, 2])
def test_only_the_innermost_frames_are_kept(frames: int) -> None:
    text = portable_traceback(raised_in_json(), frames=frames)
    files = [line.strip() for line in text.splitlines() if line.strip().startswith("File ")]
    assert len(files) == frames
    assert f"json{os.sep}decoder.py" in files[-1]  # where it was raised, not where the test called json
