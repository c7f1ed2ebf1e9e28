"""A table cell shows the server's text as it is, never as the terminal or rich would read it."""

from __future__ import annotations

from kernelfarm.commands.jobs import cells


def test_control_characters_in_a_cell_are_shown_escaped() -> None:
    assert cells("ok \x1b]0;PWNED\x07\x1b[2J") == ["ok \\x1b]0;PWNED\\x07\\x1b[2J"]


def test_rich_markup_in_a_cell_is_text() -> None:
    assert cells("[/x]", 3) == ["\\[/x]", "3"]
