"""core/printable.terminal_text: text a server sent or an upload held, printed on many lines, keeps its
line breaks and tabs and shows every other control or format character escaped, as one_line does. A
kernel description of escape sequences, printed raw, retitled and cleared the terminal of `kernel show`."""

from __future__ import annotations

import pytest

from kernelfarm.core.printable import one_line, terminal_text

PROBED = "hello \u001b]0;PWNED\u0007\u001b[2J\u001b[31mRED"


def test_the_probe_s_escape_sequences_are_shown_escaped() -> None:
    assert terminal_text(PROBED) == "hello \\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mRED"


def test_line_breaks_tabs_and_printable_text_in_any_script_are_kept() -> None:
    text = "first line\n\tindented: é, 漢字, ∑, 🙂\nlast"
    assert terminal_text(text) == text


@pytest.mark.parametrize(
    "char",
    ["\r", "\x00", "\x08", "\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\u200b", "\u202e", "\ufeff", "\ud800", "\x0b"],
    ids=repr,
)
def test_every_other_character_one_line_escapes_is_escaped_alike(char: str) -> None:
    """A carriage return would overwrite a line shown, \\x9b is the one-byte CSI of a C1 terminal, U+202E
    reverses what follows: each as its Python escape, exactly as one_line shows it."""
    assert terminal_text(f"a{char}b") == one_line(f"a{char}b") != f"a{char}b"
