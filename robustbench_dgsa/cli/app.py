"""The Typer application object. Command modules register themselves on it (see cli/__init__.py)."""
import typer

app = typer.Typer(
    name="dgsa-bench",
    help="Robustness benchmarking for attention mechanisms: ViT/DViT/DGViT and Transformer/DT/DGT, "
         "CIFAR-C corruptions, text noise, significance tests, attention rollout and reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
