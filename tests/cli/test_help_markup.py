"""Every option's and command's help survives Rich's markup: a bracketed word (``[adversarial]``) that is not escaped
would vanish from ``--help`` (it reads as a style tag)."""
from __future__ import annotations

import click
import typer
from rich.text import Text

from robustbench_dgsa.cli.app import app


def _commands(cmd: click.Command, path: str = ""):
    yield path or "dgsa-bench", cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, f"{path} {name}".strip())


def test_no_help_text_loses_a_bracketed_word_to_rich_markup():
    root = typer.main.get_command(app)
    lost = []
    for where, cmd in _commands(root):
        texts = [(where, cmd.help or "")] + [(f"{where} {p.name}", getattr(p, "help", None) or "")
                                              for p in cmd.params]
        for name, text in texts:
            if "[" in text and Text.from_markup(text).plain != text.replace("\\[", "["):
                lost.append(f"{name}: {text[:80]}")
    assert not lost, lost
