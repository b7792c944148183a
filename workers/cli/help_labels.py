"""How agentctl's help names what a parameter takes: its metavar when it declares one
(TOOL=POLICY), else a word for its type (TEXT, INTEGER, PATH, or its choices), and nothing
for a flag; never a Python type as typer prints one (`<str>`, `<bool>`, `<list[str]>`).

Typer builds every parameter as its own TyperOption or TyperArgument and gives no hook for
the label, so `label_values` re-types each one, once, as the subclass below that differs in
nothing but the label.
"""

from __future__ import annotations

from typer._click import Command, Context
from typer.core import TyperArgument, TyperOption

# typer's type names (inside its angle brackets) as other command lines spell them.
_WORDS = {
    "str": "TEXT",
    "int": "INTEGER",
    "int range": "INTEGER",
    "float": "NUMBER",
    "float range": "NUMBER",
    "dir": "DIRECTORY",
    "file": "FILE",
    "path": "PATH",
}


def _word(param: TyperArgument | TyperOption, ctx: Context) -> str:
    name = param.display_type(ctx).removeprefix("<").removesuffix(">")
    if name.startswith("list[") and name.endswith("]"):
        name = name[len("list[") : -1]  # repeatable: each value is one of these
    return _WORDS.get(name, name)


class _Argument(TyperArgument):
    def display_type_rich(self, ctx: Context) -> str | None:
        # The name column shows the metavar already: this column says what it holds.
        return _word(self, ctx)


class _Option(TyperOption):
    def display_type_rich(self, ctx: Context) -> str | None:
        if self.is_flag or self.count:
            return None
        return self.metavar or _word(self, ctx)


def label_values(command: Command) -> None:
    """Label the values of `command`, its help option and every command under it."""
    help_option = command.get_help_option(Context(command))
    for param in [*command.params, *([help_option] if help_option else [])]:
        if isinstance(param, TyperOption):
            param.__class__ = _Option
        elif isinstance(param, TyperArgument):
            param.__class__ = _Argument
    for sub in getattr(command, "commands", {}).values():
        label_values(sub)
