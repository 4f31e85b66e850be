"""`mlgoodput --help` is answered without argparse; its lines must match the real parsers."""

from __future__ import annotations

import argparse
import subprocess
import sys

from mlgoodput import cli


def test_fast_help_lists_every_subcommand_with_its_help() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    real = {a.dest: a.help for a in sub._choices_actions}
    text = cli.fast_help()
    assert text is not None, "a module in cli._COMMANDS has no line in cli._SUMMARY"
    listed = {name: help_ for rows in cli._SUMMARY.values() for name, help_ in rows}
    assert listed == real
    for name, help_ in real.items():
        assert any(line.split() == [name, *str(help_).split()] for line in text.splitlines()), name


def test_help_and_version_run_without_importing_argparse() -> None:
    code = (
        "import sys; sys.argv = ['mlgoodput', '--help']; from mlgoodput.cli import main; rc = main();"
        " assert 'argparse' not in sys.modules, 'argparse was imported'; print('RC', rc)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "RC 0" in res.stdout and "commands:" in res.stdout, res.stderr
