"""The command line: one module per command, every parser built without importing what the commands run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from regokite.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_building_every_parser_imports_no_metrics() -> None:
    """`regokite admission` points prometheus_client at a multiprocess directory before importing it, so
    nothing a parser needs may import it first (a command module imports what it wires inside its run)."""
    code = "import sys; from regokite import cli; cli.build_parser(); print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_each_command_is_the_module_named_for_it() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {m.__name__.rpartition(".")[2] for m in COMMANDS} == set(sub.choices)
    for name, parser in sub.choices.items():
        kinds = [a for a in parser._actions if a.dest == "manifests_kind"]  # `regokite manifests KIND`
        for leaf in kinds[0].choices.values() if kinds else [parser]:
            assert leaf.get_default("func").__module__ == f"regokite.commands.{name}"
