"""tatara up's progress table: redrawn in place on a terminal, printed once per change elsewhere."""

from __future__ import annotations

import io

from tools.up import Screen


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, as a shell's stdout does."""

    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_table_is_printed_only_when_it_changed() -> None:
    out = io.StringIO()
    screen = Screen(out)
    for text in ("NAME  PHASE\na     Running\n", "NAME  PHASE\na     Running\n", "NAME  PHASE\na     Attested\n"):
        screen.show(text)
    screen.close()
    assert out.getvalue().count("NAME  PHASE") == 2
    assert "\x1b[" not in out.getvalue(), "no terminal control codes in a log or a pipe"


def test_on_a_terminal_the_table_is_redrawn_in_place() -> None:
    out = Terminal()
    screen = Screen(out)
    screen.show("NAME  PHASE\na     Running")
    screen.show("NAME  PHASE\na     Attested")
    screen.close()
    written = out.getvalue()
    first, last = written.split("NAME  PHASE")[1], written.rsplit("NAME  PHASE", 1)[1]
    assert ("Running" in first, "Attested" in last) == (True, True)
    assert "\x1b[1A" in written, "the second table moves the cursor back over the first"
