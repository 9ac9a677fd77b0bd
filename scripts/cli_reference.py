"""The CLI reference page, generated from regokite's own argparse parsers (never copied by hand).

A mkdocs hook (`hooks:` in mkdocs.yml): the page `reference/cli.md` holds
the marker below, replaced at build time by one section per command with its
usage and a table of its options per group. Run directly, it prints the
generated Markdown.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from regokite.cli import build_parser

MARKER = "<!-- cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|").replace("\n", " ")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    shown = action.metavar or (action.dest.upper() if action.nargs != 0 else None)
    if isinstance(shown, tuple):
        shown = " ".join(shown)
    if action.choices and not action.metavar and action.nargs != 0:
        shown = "{" + ",".join(map(str, action.choices)) + "}"
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    return f"{names} `{shown}`" if shown and action.nargs != 0 else names


def _default(action: argparse.Action) -> str:
    value: Any = action.default
    if action.nargs == 0 or value is None or value is argparse.SUPPRESS or value == []:
        return ""
    return f"`{value}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help as `--help` prints it (`%(default)s` expanded); nothing when it only repeats the default."""
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    text = re.sub(r" ?\(default: [^()]*\)$", "", text)  # the default has its own column
    return "" if text.startswith("default: ") else text


def _options_table(parser: argparse.ArgumentParser, group: argparse._ArgumentGroup) -> list[str]:
    actions = [
        a
        for a in group._group_actions
        if a.help != argparse.SUPPRESS and a.dest != "help" and not isinstance(a, argparse._SubParsersAction)
    ]
    if not actions:
        return []
    rows = ["| option | default | what |", "| --- | --- | --- |"]
    rows += [f"| {_cell(_flags(a))} | {_cell(_default(a))} | {_cell(_help(parser, a))} |" for a in actions]
    return rows


def _text(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _command(name: str, summary: str, parser: argparse.ArgumentParser, depth: int = 2) -> list[str]:
    usage = parser.format_usage().removeprefix("usage: ").strip()
    heading = "#" * depth
    out = [f"{heading} `regokite {name}`", "", summary[:1].upper() + summary[1:] + ".", "", "```text", usage, "```", ""]
    for group in parser._action_groups:
        table = _options_table(parser, group)
        if not table:
            continue
        title = group.title if group.title not in ("options", "optional arguments") else "options"
        out += [f"**{_text(title)}**", ""]
        if group.description:
            out += [_text(group.description), ""]
        out += [*table, ""]
    summaries = _summaries(parser)
    for sub, subparser in _subcommands(parser).items():  # `regokite manifests admission`, ...
        out += _command(f"{name} {sub}", summaries.get(sub, ""), subparser, min(depth + 1, 4))
    return out


def reference() -> str:
    """Every command's usage and options, from `regokite.cli.build_parser()`."""
    root = build_parser()
    lines = ["## Global options", "", "Given before the command (`regokite --log-level debug admission ...`).", ""]
    for group in root._action_groups:
        lines += _options_table(root, group)
    lines.append("")
    summaries = _summaries(root)
    for name, parser in sorted(_subcommands(root).items()):
        lines += _command(name, summaries.get(name, ""), parser)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """mkdocs hook: fill the marker of the page that has it."""
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown


if __name__ == "__main__":
    print(reference())
