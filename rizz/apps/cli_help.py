"""The command and group classes of every ``rizz`` command (typer's ``cls=``).

``--help`` shows no value type typer makes up. By itself typer's rich help prints a value's
Python type in angle brackets (``<str>``, ``<path>``, ``<int range>``, ``<list[str]>``) and
an argument in braces, by its parameter's name, in the usage line (``rizz run [OPTIONS]
{stream}``); beside a flag (a bool option that takes no value) it prints ``<bool>`` unless
the flag is declared with ``metavar=""`` (rizz's are). These classes, when a command is made:

- name each argument by its metavar, by default its name in capitals (``STREAM``,
  ``RUN_DIR``), in the usage line as click does (``rizz run [OPTIONS] STREAM``; ``[NAME]``
  when optional, ``NAME...`` when it takes several) and in the arguments table, with no type
  column beside it (its help says what it is);
- give an option declared without a metavar a readable one from its type: ``PATH``, ``N``
  (an integer), ``NUMBER``, ``TEXT`` (rizz's options declare their own, e.g. ``SPEC``,
  ``RUN_DIR``, ``TOKENS``; this is the fallback);
- give typer's own ``--help``, which typer makes, ``metavar=""``: it is a flag;
- accept ``-h`` wherever ``--help`` works (:data:`HELP_OPTION_NAMES`, click's
  ``help_option_names``), unless a command's own ``context_settings`` name others.

Nothing else about a command changes: its parameters parse as declared.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = ["Command", "Group", "HELP_OPTION_NAMES"]

#: The options that print a command's help: every ``rizz`` command and group takes both.
HELP_OPTION_NAMES = ["-h", "--help"]


def _with_short_help(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` of a command or group with :data:`HELP_OPTION_NAMES` in its ``context_settings``
    (kept as given when they name their own)."""
    settings = dict(kwargs.get("context_settings") or {})
    settings.setdefault("help_option_names", list(HELP_OPTION_NAMES))
    return {**kwargs, "context_settings": settings}


def _no_value_shown(option: Any) -> Any:
    if option is not None:
        option.metavar = ""
    return option


class _Argument(TyperArgument):
    """An argument shown by its metavar alone: no type column, and click's usage form."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name if self.required else f"[{name}]"


def _type_metavar(option: TyperOption) -> str:
    """A readable metavar for an option declared without one, from its annotated type."""
    desc = getattr(option, "type_descriptor", None)  # typer's view of the annotation (what it prints as <type>)
    if desc is None:
        return "VALUE"
    if desc.is_path or desc.is_file:
        return "PATH"
    return {int: "N", float: "NUMBER"}.get(desc.annotation, "TEXT")


def _readable(params: list[Any]) -> None:
    """Give ``params`` (a command's, as typer made them) the metavars the module docstring says."""
    for param in params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "value").upper() + ("..." if param.nargs != 1 else "")
            param.__class__ = _Argument
        elif isinstance(param, TyperOption) and param.metavar is None and not param.is_flag:
            param.metavar = _type_metavar(param)


class Command(TyperCommand):
    """A ``rizz`` command: readable metavars, no value type beside ``--help``, and ``-h``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **_with_short_help(kwargs))
        _readable(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        return _no_value_shown(super().get_help_option(ctx))


class Group(TyperGroup):
    """A ``rizz`` command group (``rizz``, ``rizz policy``, ``rizz streams``): its ``--help`` shows no value type; ``-h`` too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **_with_short_help(kwargs))

    def get_help_option(self, ctx: Any) -> Any:
        return _no_value_shown(super().get_help_option(ctx))
