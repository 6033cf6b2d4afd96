"""``dgsa-bench train``: options -> :func:`robustbench_dgsa.jobs.train_runs.train_runs` -> JSON summary."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import app
from .render import echo_json


def _overrides(epochs: int | None, batch_size: int | None, lr: float | None, device: str | None,
               download: bool, set_: list[str] | None, compile_model: bool = False) -> dict[str, Any]:
    """The config overrides the options give (``section.key`` -> value); ``--set`` last."""
    from robustbench_dgsa.config import parse_set_options
    ov: dict[str, Any] = {}
    for key, value in (("train.epochs", epochs), ("train.batch_size", batch_size), ("train.lr", lr),
                       ("train.device", device)):
        if value is not None:
            ov[key] = value
    if download:
        ov["data.download"] = True
    if compile_model:
        ov["train.compile"] = True
    ov.update(parse_set_options(set_))
    return ov


@app.command("train")
def train_command(
    model: Optional[str] = opt.model(None, help="Registered model(s): one or a comma list (vit,dgvit); see "
                                                "`dgsa-bench models`. Required unless --module."),
    dataset: str = opt.dataset(...),
    preset: str = typer.Option("tiny", "--preset", help="Hyperparameter preset: tiny (seconds), small (minutes on a "
                               "CPU), evidence (the committed campaign's), zoo (the shipped models) or paper (the "
                               "paper's protocol)."),
    seed: Optional[str] = opt.seed(None, help="Training seeds: one (3), a list (0,2,7) or a range (0-4), one run "
                                              "each (default 0)."),
    out: Path = opt.out(..., help="Output folder; with several models or seeds one subfolder "
                                  "<model>-<dataset>-s<seed> each."),
    epochs: Optional[int] = typer.Option(None, "--epochs", min=1, max=opt.config_max("train.epochs"),
                                         help="Override train.epochs."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, max=opt.config_max("train.batch_size"),
                                             help="Override train.batch_size."),
    lr: Optional[float] = opt.positive_float(None, "--lr", help="Override train.lr (in (0, 10]).",
                                         le=opt.config_max("train.lr")),
    set_: Optional[list[str]] = opt.set_(),
    config: Optional[Path] = typer.Option(None, "--config",
                                          help="TOML/JSON config file with model, train and data tables."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    download: bool = typer.Option(False, "--download", help="Download the dataset if missing (needs internet)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store (default: <out>/store)."),
    resume: bool = typer.Option(False, "--resume", help="Continue a killed run from its last epoch."),
    device: Optional[str] = opt.device(None, help=f"Default: the config's. {opt.DEVICE_HELP}"),
    nproc: Optional[int] = typer.Option(None, "--nproc", min=1, max=1024,
                                        help="Train data-parallel in N local processes (one per GPU on CUDA, gloo "
                                             "on the CPU), as `torchrun --standalone --nproc-per-node N -m "
                                             "robustbench_dgsa train ...` does; the batch size stays the global "
                                             "one."),
    data_workers: Optional[int] = typer.Option(None, "--data-workers", min=0, max=256,
                                               help="DataLoader worker processes that decode a streamed dataset "
                                                    "(imagenet), per process (default min(8, CPUs); 0: decode in "
                                                    "the main process)."),
    compile_model: bool = opt.compile_(),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
    module: Optional[str] = typer.Option(None, "--module", help="Instead of --model: pkg.mod:factory, a function "
                                         "returning an nn.Module (images in, logits out; called with num_classes, "
                                         "and image_size / in_chans where it takes them), trained like the "
                                         "suite's models (seeds, resume, store rows)."),
    name: Optional[str] = typer.Option(None, "--name", help="With --module: the model's name in the store "
                                       "(default: the factory's name)."),
) -> None:
    """Train models (per model and seed): checkpoint every epoch, rows in the results store, clean test
    accuracy. Under torchrun or srun (or with --nproc) one run trains data-parallel across the processes."""
    from robustbench_dgsa.jobs.train_runs import is_main_process, train_runs

    seeds = opt.parse_seeds(seed)
    if (model is None) == (module is None):
        raise UserError("give --model (registered models) or --module (pkg.mod:factory), one of the two")
    if name is not None and module is None:
        raise UserError("--name goes with --module")
    if module is not None:
        from robustbench_dgsa.models.registry import module_config
        model_list: list = [module_config(module, name)]
    else:
        model_list = opt.split_list(model)
    if not model_list:
        raise UserError("--model needs at least one model name")
    opt.check_data_root(data_root)
    opt.check_output_dir(out, "--out")      # also: no symbolic link inside (<out>/store, run folders, rows)
    opt.check_output_dir(store, "--store", store=True)
    opt.check_outputs({"--out": out}, {"--store": store})
    summary = train_runs(model_list, dataset, seeds, out, preset=preset, config_file=config, data_root=data_root,
                         overrides=_overrides(epochs, batch_size, lr, device, download, set_, compile_model),
                         store=store, resume=resume, progress=not quiet, nproc=nproc,
                         relaunch=_without_nproc(opt.command_line()), data_workers=data_workers)
    if json_ and summary is not None and is_main_process():
        echo_json(summary, nonfinite="null", sort_keys=True)


def _without_nproc(argv: list[str]) -> list[str]:
    """This command line without ``--nproc N`` (what each launched process runs)."""
    args, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            args.append(a)
    return args
