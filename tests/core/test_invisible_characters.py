"""invisible_character refuses what prints as nothing or as another name: every default-ignorable code
point (Unicode's Default_Ignorable_Code_Point, whatever its category), blank characters, space separators
other than the space, and everything it refused before (control, format, separator, unassigned,
private-use characters); ordinary names in any script pass."""

from __future__ import annotations

import sys

import pytest

from kernelfarm.core.store.text import DEFAULT_IGNORABLE, invisible_character

# What the outside probe sent as token names and got a 201 for (categories Lo, Mn and So).
PROBED = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u034f", "\u17b4", "\u17b5", "\u2800"]
REFUSED_BEFORE = ["\u200b", "\u202e", "\x7f", "\x85", "\u2028", "\u2029", "\u0378", "\ue000", "\ufeff", "\U000e0041"]
SPACE_LOOKALIKES = ["\u00a0", "\u2003", "\u202f", "\u205f", "\u3000"]


@pytest.mark.parametrize("char", PROBED + REFUSED_BEFORE + SPACE_LOOKALIKES, ids=lambda c: f"U+{ord(c):04X}")
def test_a_character_that_prints_as_nothing_or_a_space_is_named(char: str) -> None:
    assert invisible_character(f"ali{char}ce") == f"U+{ord(char):04X}"
    assert invisible_character(f"alice{char}") == f"U+{ord(char):04X}"


def test_every_default_ignorable_code_point_is_refused() -> None:
    for low, high in DEFAULT_IGNORABLE:
        for code in range(low, high + 1):
            assert invisible_character(chr(code)) == f"U+{code:04X}"


def test_the_table_is_unicodes_default_ignorable_code_points() -> None:
    """Checked against an independent implementation of the property (the regex module's tables)."""
    regex = pytest.importorskip("regex")
    pattern = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    theirs = {code for code in range(sys.maxunicode + 1) if pattern.match(chr(code))}
    ours = {code for low, high in DEFAULT_IGNORABLE for code in range(low, high + 1)}
    assert ours == theirs, (sorted(ours - theirs)[:10], sorted(theirs - ours)[:10])


@pytest.mark.parametrize(
    "text",
    ["alice", "alice bob", "café", "naïve-2", "한글", "日本語", "Ωmega", "ci:nightly/run_3", "NVIDIA H100 80GB HBM3"],
)
def test_names_in_any_script_pass(text: str) -> None:
    assert invisible_character(text) is None
