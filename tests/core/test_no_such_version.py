"""NoSuchVersion names the versions a kernel has, a long list by its ends."""

from __future__ import annotations

from kernelfarm.core.errors import NoSuchVersion, NotFound


def test_it_lists_the_versions_there_are() -> None:
    error = NoSuchVersion("user-axpb", 99, [1, 2, 3])
    assert isinstance(error, NotFound)  # a 404, and every caller that catches NotFound still does
    assert str(error) == "kernel 'user-axpb' has no version 99 (its versions: 1, 2, 3)"


def test_a_long_list_is_shown_by_its_ends() -> None:
    error = NoSuchVersion("user-axpb", 99, range(1, 41))
    assert str(error) == "kernel 'user-axpb' has no version 99 (its versions: 1, 2, 3, ..., 38, 39, 40)"
