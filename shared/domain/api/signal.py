"""Signals an operator sends to a Process, and the spec's signal policy.

— docs/behaviour.md#signals; the spellings: docs/wire-format.md#signal-spellings.
"""

from __future__ import annotations

from typing import Self

from shared.domain.api.closed_set import ClosedSet, UnknownValueError, label_of
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.wire import UInt32, WireStruct

__all__ = ["ProcessSignal", "SighupStrategy", "SignalPolicy"]


class ProcessSignal(ClosedSet):
    """A Unix-style signal, sent as the ``tatara.pleme.io/signal`` annotation.

    Wire spelling is the canonical ``SIG…`` name; :meth:`parse` also accepts the short
    alias and any letter case.
    """

    SIGHUP = "SIGHUP"
    SIGTERM = "SIGTERM"
    SIGKILL = "SIGKILL"
    SIGUSR1 = "SIGUSR1"
    SIGUSR2 = "SIGUSR2"
    SIGSTOP = "SIGSTOP"
    SIGCONT = "SIGCONT"

    @property
    def short(self) -> str:
        """The alias without the leading ``SIG``, e.g. ``HUP``."""
        return self.value.removeprefix("SIG")

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse a signal name: ASCII-upper-case, then match canonical or short form.

        No trimming. Raises :class:`UnknownValueError` ``unknown signal: <UPPERCASED>``.
        """
        upper = text.upper() if text.isascii() else "".join(c.upper() if c.isascii() else c for c in text)
        for member in cls:
            if upper in (member.value, member.short):
                return member
        raise UnknownValueError(label_of(cls), upper)


class SighupStrategy(ClosedSet):
    """What SIGHUP does to a Running/Attested Process. Default ``Reconverge``."""

    RECONVERGE = "Reconverge"
    RESTART = "Restart"
    NOOP = "Noop"

    def sighup_target(self) -> ProcessPhase | None:
        """Reconverge → Reconverging, Restart → Exiting, Noop → None."""
        if self is SighupStrategy.RECONVERGE:
            return ProcessPhase.RECONVERGING
        if self is SighupStrategy.RESTART:
            return ProcessPhase.EXITING
        return None


class SignalPolicy(WireStruct):
    """``spec.signals``. Every field defaults; every field is always written."""

    sigterm_grace_seconds: UInt32 = 480
    """Seconds to wait after SIGTERM before escalating to SIGKILL."""
    sigkill_force: bool = True
    """Whether a forced reap is allowed."""
    sighup_strategy: SighupStrategy = SighupStrategy.RECONVERGE
    start_suspended: bool = False
    """Require SIGCONT before the Process moves past Forking."""
