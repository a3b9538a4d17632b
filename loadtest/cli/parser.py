"""An argparse parser whose errors help: the error once, a suggestion, the usage line."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any, NoReturn

from loadtest.errors import UsageError

__all__ = ["Parser"]


class Parser(argparse.ArgumentParser):
    """Errors as one short paragraph: the error once, a suggestion, the usage line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{_usage_line(self)}")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse lists the choices of a mistyped command (loadtest rnu) or flag value
        # (--fail-on faild) but does not say which was meant; the closest one is added.
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            choices = [str(c) for c in action.choices or ()]
            close = difflib.get_close_matches(str(value), choices, n=1)
            if not close:
                raise
            raise argparse.ArgumentError(
                action, f"{exc.message}; did you mean {close[0]}?"
            ) from None

    def refuse_unknown(self, words: Sequence[str]) -> None:
        """``unknown`` for the words that look like flags this parser does not have."""
        known = {o for a in self._actions for o in a.option_strings}
        # argparse takes unique prefixes (--dur for --duration): those are not strays.
        strays = [w for w in words if w.startswith("-") and not _known(w, known)]
        if strays:
            self.unknown(strays)

    def unknown(self, extras: Sequence[str]) -> NoReturn:
        """Refuse unrecognized arguments, suggesting the closest known flag."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        # Compared without dashes: every flag shares "--", which would make any two alike.
        known = {o.lstrip("-"): o for a in self._actions for o in a.option_strings}
        for word in extras:
            if word.startswith("-"):
                typed = word.split("=", 1)[0].lstrip("-")
                close = difflib.get_close_matches(typed, list(known), n=1)
                if close:
                    message += f"; did you mean {known[close[0]]}?"
                    break
        self.error(message)


def _known(word: str, known: set[str]) -> bool:
    if _is_number(word):
        return True  # a negative value, left to the flag's own check
    flag = word.split("=", 1)[0]
    if any(k.startswith(flag) for k in known):
        return True
    # -vq: short switches run together, as argparse allows.
    return not flag.startswith("--") and all(f"-{c}" in known for c in flag[1:])


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _usage_line(p: argparse.ArgumentParser) -> str:
    # argparse wraps the usage over many lines; one line keeps the error one paragraph.
    return " ".join(p.format_usage().split()) + f" (more: {p.prog} --help)"
