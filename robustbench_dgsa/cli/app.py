"""The Typer application object. Command modules register themselves on it (see cli/__init__.py)."""
import inspect
from typing import Any, List, Optional

import typer

from .options import PlainFlagsGroup, VocabularyCommand, set_debug


class App(typer.Typer):
    """Typer whose commands get the shared vocabulary's hidden old spellings (see cli/options.py); its commands
    and groups show boolean flags without a value type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("cls", PlainFlagsGroup)
        super().__init__(*args, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", VocabularyCommand)

        def register(f: Any) -> Any:
            # the command list shows the help's first paragraph as one reflowed line (the docstring's own line
            # breaks would otherwise show as ragged breaks in `dgsa-bench --help`)
            short = kwargs.get("short_help") or one_paragraph(kwargs.get("help") or inspect.getdoc(f) or "")
            return typer.Typer.command(self, *args, **{**kwargs, "short_help": short or None})(f)
        return register


def one_paragraph(text: str) -> str:
    """The first paragraph of a help text with its line breaks and runs of spaces made single spaces."""
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


app = App(
    name="dgsa-bench",
    help="Robustness benchmarking for attention mechanisms: ViT/DViT/DGViT and Transformer/DT/DGT, "
         "CIFAR-C corruptions, text noise, significance tests, attention rollout and reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from robustbench_dgsa import __version__
        typer.echo(f"dgsa-bench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(None, "--version", callback=_print_version, is_eager=True,
                                           help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show the Python traceback of an error (also accepted "
                                                      "after the command)."),
    plugin: Optional[List[str]] = typer.Option(
        None, "--plugin", metavar="MODULE",
        help="Import MODULE first: a plugin registering attention mechanisms / models / threat models (repeatable). "
             "Installed "
             "plugins (entry point group dgsa_bench.plugins) and DGSA_BENCH_PLUGINS load without it; processes the "
             "command starts (sweep workers, SLURM tasks, DDP ranks) load the same plugins."),
) -> None:
    if debug:
        set_debug(True)
    from robustbench_dgsa.util.plugins import add_plugins
    add_plugins(plugin or [])
