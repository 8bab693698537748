"""The command and group classes of every ``rizz`` command (typer's ``cls=``).

``--help`` is a flag: it takes no value, yet typer's rich help prints ``<bool>`` beside it, as
beside any bool option not declared with ``metavar=""`` (rizz's own flags are). typer makes the
help option itself, so these classes give it that ``metavar`` when they hand it out; nothing
else about a command changes.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group"]


def _no_value_shown(option: Any) -> Any:
    if option is not None:
        option.metavar = ""
    return option


class Command(TyperCommand):
    """A ``rizz`` command: its ``--help`` shows no value type."""

    def get_help_option(self, ctx: Any) -> Any:
        return _no_value_shown(super().get_help_option(ctx))


class Group(TyperGroup):
    """A ``rizz`` command group (``rizz``, ``rizz policy``, ``rizz streams``): its ``--help`` shows no value type."""

    def get_help_option(self, ctx: Any) -> Any:
        return _no_value_shown(super().get_help_option(ctx))
