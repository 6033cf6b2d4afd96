"""``dgsa-bench train``, ``dgsa-bench evaluate`` and ``dgsa-bench sweep plan|run|run-one|status|slurm``."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import App, app


def slug(name: str) -> str:
    """A file-name-safe form of a dataset name (generic sources are paths)."""
    import re
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "data"


def _overrides(epochs: int | None, batch_size: int | None, lr: float | None, device: str | None,
               data_root: Path | None, download: bool, set_: list[str] | None) -> dict[str, Any]:
    from ..config import parse_set_options
    ov: dict[str, Any] = {}
    if epochs is not None:
        ov["train.epochs"] = epochs
    if batch_size is not None:
        ov["train.batch_size"] = batch_size
    if lr is not None:
        ov["train.lr"] = lr
    if device is not None:
        ov["train.device"] = device
    if download:
        ov["data.download"] = True
    ov.update(parse_set_options(set_))
    return ov


def _check_data_root(data_root: Path | None) -> None:
    if data_root is not None and not Path(data_root).is_dir():
        raise UserError(f"data root not found: {data_root}")


def _dump(obj: Any) -> None:
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        if isinstance(o, Path):
            return str(o)
        if hasattr(o, "item"):
            return clean(o.item())
        return o
    typer.echo(json.dumps(clean(obj), indent=2, sort_keys=True))


# --- train -------------------------------------------------------------------------------------------------

@app.command("train")
def train_command(
    model: str = opt.model(...),
    dataset: str = opt.dataset(...),
    preset: str = typer.Option("tiny", "--preset", help="Hyperparameter preset: tiny, small or paper."),
    seed: Optional[str] = opt.seed(None, help="Training seeds: one (3), a list (0,2,7) or a range (0-4), one run "
                                              "each (default 0)."),
    out: Path = opt.out(..., help="Output folder; with several seeds one subfolder <model>-<dataset>-s<seed>."),
    epochs: Optional[int] = typer.Option(None, "--epochs", min=1, help="Override train.epochs."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Override train.batch_size."),
    lr: Optional[float] = opt.positive_float(None, "--lr", help="Override train.lr (> 0)."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Config override section.key=value (repeatable)."),
    config: Optional[Path] = typer.Option(None, "--config",
                                          help="TOML/JSON config file with model, train and data tables."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    download: bool = typer.Option(False, "--download", help="Download the dataset if missing (needs internet)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store (default: <out>/store)."),
    resume: bool = typer.Option(False, "--resume", help="Continue a killed run from its last epoch."),
    device: Optional[str] = opt.device(None, help=f"Default: the config's. {opt.DEVICE_HELP}"),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
) -> None:
    """Train a model (per seed): checkpoint every epoch, rows in the results store, clean test accuracy."""
    from ..config import load_config_file, resolve_config
    from ..models import get_model_config
    from robustbench_dgsa.engine.train import train

    seed_list = opt.parse_seeds(seed)
    _check_data_root(data_root)
    opt.check_output_dir(out, "--out")
    opt.check_output_dir(store, "--store")
    file_ov = load_config_file(config) if config else None
    cfg = resolve_config(get_model_config(model), dataset, preset, file_overrides=file_ov,
                         overrides=_overrides(epochs, batch_size, lr, device, data_root, download, set_))
    if data_root is not None:
        cfg.data.data_root = str(data_root)
    from robustbench_dgsa.engine.predict import dataset_info
    dataset_info(cfg.data.dataset)  # unknown name -> one clear line before anything starts
    store_dir = store if store is not None else out / "store"
    results = []
    for s in seed_list:
        run_out = out if len(seed_list) == 1 else out / f"{model}-{slug(cfg.data.dataset)}-s{s}"
        r = train(cfg, s, run_out, store_dir=store_dir, resume=resume, progress=not quiet)
        results.append({"seed": s, "run_id": r.run_id, "checkpoint": str(r.checkpoint), "out": str(run_out),
                        "config_hash": r.config_hash, "final": r.final, "history": r.history})
    if json_:
        _dump({"model": model, "dataset": cfg.data.dataset, "preset": preset, "store": str(store_dir), "runs": results})


# --- evaluate ----------------------------------------------------------------------------------------------

@app.command("evaluate")
def evaluate_command(
    checkpoint: Path = opt.checkpoint(...),
    dataset: Optional[str] = opt.dataset(None, help="Default: the checkpoint's dataset."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    corruption: Optional[str] = opt.corruption(),
    severity: Optional[str] = opt.severity(),
    corruption_dir: Optional[Path] = typer.Option(
        None, "--corruption-dir", help="Official or regenerated CIFAR-C folder (<corruption>.npy + labels.npy); "
                                       "default: corrupt on the fly."),
    corruption_seed: int = typer.Option(0, "--corruption-seed", min=0,
                                        help="Seed of on-the-fly corruptions / text noise."),
    frost_dir: Optional[Path] = typer.Option(None, "--frost-dir",
                                             help="Frost photographs for on-the-fly frost (default: "
                                                  "<data-root>/corruptions/frost when present)."),
    text_noise: Optional[str] = opt.text_noise(),
    max_examples: Optional[int] = opt.max_examples(help="Use the first N test examples."),
    split: str = typer.Option("test", "--split", help="test (default), train, or a dataset's own split such as "
                                                      "test-exact (cifar10: the 1,017 exact-pixel test images)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store (default: <checkpoint folder>/store)."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, help="Evaluation batch size."),
    device: str = opt.device(),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
) -> None:
    """Accuracy of a checkpoint: clean, per corruption and severity, and under text noise (into the store)."""
    from robustbench_dgsa.engine.evaluate import evaluate

    corruptions = opt.parse_corruptions(corruption)
    severities = opt.parse_severities(severity)
    noise = opt.parse_text_noise(text_noise)
    _check_data_root(data_root)
    if corruption_dir is not None and not corruption_dir.is_dir():
        raise UserError(f"corruption directory not found: {corruption_dir}")
    opt.check_output_dir(store, "--store")
    res = evaluate(checkpoint, dataset=dataset, data_root=data_root, split=split, max_test=max_examples,
                   corruptions=corruptions, severities=severities,
                   corruption_dir=corruption_dir, text_noise=noise,
                   corruption_seed=corruption_seed, store_dir=store, batch_size=batch_size, device=device,
                   progress=not quiet, frost_dir=frost_dir)
    if json_:
        _dump({"checkpoint": str(checkpoint), "store": str(res.store_dir), **res.summary()})
    else:
        from rich.console import Console
        from rich.table import Table
        t = Table(title=f"evaluation {res.run_id}")
        for col in ("condition", "severity", "accuracy", "n", "cer", "wer", "source"):
            t.add_column(col)
        for r in res.table.itertuples(index=False):
            fmt = lambda v: "" if v != v else f"{v:.4f}"  # noqa: E731 - NaN -> blank
            src = r.source if len(r.source) <= 32 else r.source[:31] + "…"
            t.add_row(r.condition, str(r.severity), f"{r.accuracy:.4f}", str(r.n), fmt(r.cer), fmt(r.wer), src)
        Console().print(t)  # a result table: stdout


# --- sweep -------------------------------------------------------------------------------------------------

sweep_app = App(help="Sweeps of models x datasets x seeds into one results store: plan, run "
                             "(local pool), run-one (one job), status, slurm (sbatch array or submitit).",
                        no_args_is_help=True)
app.add_typer(sweep_app, name="sweep")


@sweep_app.command("plan")
def sweep_plan(
    sweep_dir: Path = typer.Argument(..., help="Sweep folder (created)."),
    models: list[str] = opt.models(...),
    datasets: list[str] = opt.datasets(...),
    seed: str = opt.seed("0-4"),
    preset: str = typer.Option("tiny", "--preset", help="tiny, small or paper."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Config override key=value (every job)."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    download: bool = typer.Option(False, "--download", help="Download datasets if missing."),
    corruption: Optional[str] = opt.corruption(help="Evaluate under these corruptions: names, groups, benchmark, "
                                                    "extra or all."),
    severity: Optional[str] = opt.severity(),
    corruption_dir: Optional[Path] = typer.Option(None, "--corruption-dir", help="CIFAR-C folder to read from."),
    text_noise: Optional[str] = opt.text_noise(),
    corruption_seed: int = typer.Option(0, "--corruption-seed", min=0, help="Seed of on-the-fly corruptions."),
    device: str = opt.device(),
    json_: bool = opt.json_(help="Print the jobs as JSON on stdout."),
) -> None:
    """Write jobs.jsonl (stable job ids) and sweep.json; planning again adds only new jobs."""
    from ..config import parse_set_options
    from robustbench_dgsa.jobs.sweep import EvalSettings, plan, write_plan
    ev = EvalSettings(corruptions=opt.parse_corruptions(corruption) or [],
                      severities=opt.parse_severities(severity),
                      corruption_dir=str(corruption_dir.resolve()) if corruption_dir else None,
                      text_noise=opt.parse_text_noise(text_noise) or [], corruption_seed=corruption_seed)
    seeds = opt.parse_seeds(seed)
    _check_data_root(data_root)
    if corruption_dir is not None and not corruption_dir.is_dir():
        raise UserError(f"corruption directory not found: {corruption_dir}")
    opt.check_output_dir(sweep_dir, "SWEEP_DIR")
    jobs = plan(opt.split_list(models), seeds, opt.split_list(datasets), preset, parse_set_options(set_))
    merged = write_plan(sweep_dir, jobs, data_root=str(data_root.resolve()) if data_root else None,
                        download=download, evaluation=ev, device=device)
    if json_:
        _dump({"sweep_dir": str(sweep_dir), "jobs": [j.to_dict() for j in merged]})
    else:
        typer.echo(f"{len(merged)} jobs in {sweep_dir / 'jobs.jsonl'} ({len(jobs)} from this plan)")


@sweep_app.command("run")
def sweep_run(
    sweep_dir: Path = typer.Argument(..., help="Sweep folder written by `sweep plan`."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", min=1,
                                          help="Parallel jobs (default: 1, or one per GPU)."),
    devices: Optional[str] = typer.Option(None, "--devices", help="GPU ids for the workers, e.g. 0,1,2,3."),
    json_: bool = opt.json_(help="Print the summary as JSON on stdout."),
    progress: bool = typer.Option(False, "--progress", help="Progress bars for in-process jobs."),
) -> None:
    """Run every unfinished job (finished ones are skipped; half-trained ones resume)."""
    from robustbench_dgsa.jobs.sweep import run
    summary = run(sweep_dir, workers=workers, devices=opt.split_list(devices) or None, progress=progress)
    if json_:
        _dump(summary)
    else:
        typer.echo(f"ran {len(summary['ran'])}, skipped {len(summary['skipped'])} finished, "
                   f"failed {len(summary['failed'])}")
    if summary["failed"]:
        raise typer.Exit(1)


@sweep_app.command("run-one")
def sweep_run_one(
    sweep_dir: Path = typer.Argument(..., help="Sweep folder."),
    index: int = typer.Option(..., "--index", min=0, help="Line number in jobs.jsonl (0-based), e.g. "
                                                         "$SLURM_ARRAY_TASK_ID."),
    json_: bool = opt.json_(help="Print the job record as JSON on stdout."),
) -> None:
    """Run one job (what each Slurm array task calls)."""
    from robustbench_dgsa.jobs.sweep import run_one
    record = run_one(sweep_dir, index, progress=False)
    if json_:
        _dump(record)


@sweep_app.command("status")
def sweep_status(sweep_dir: Path = typer.Argument(...),
                 json_: bool = opt.json_(help="Print the status as JSON on stdout.")) -> None:
    """Finished / failed / pending jobs."""
    from robustbench_dgsa.jobs.sweep import status
    st = status(sweep_dir)
    if json_:
        _dump(st)
    else:
        typer.echo(f"finished {len(st['finished'])}, failed {len(st['failed'])}, pending {len(st['pending'])}")
        for jid in st["failed"]:
            typer.echo(f"  failed: {jid}")


@sweep_app.command("slurm")
def sweep_slurm(
    sweep_dir: Path = typer.Argument(..., help="Sweep folder."),
    submitit_: bool = typer.Option(False, "--submitit", help="Submit through submitit (pip install "
                                                            "'robustbench-dgsa\\[slurm]') instead of writing a script."),
    time_limit: str = typer.Option("24:00:00", "--time", help="Time limit per job (HH:MM:SS)."),
    gpus: int = typer.Option(1, "--gpus", min=0, help="GPUs per job (0 for CPU jobs)."),
    cpus: int = typer.Option(8, "--cpus", min=1, help="CPUs per job."),
    mem: str = typer.Option("32G", "--mem", help="Memory per job."),
    partition: Optional[str] = typer.Option(None, "--partition"),
    account: Optional[str] = typer.Option(None, "--account"),
    max_parallel: Optional[int] = typer.Option(None, "--max-parallel", min=1, help="At most N array tasks at once."),
    setup: Optional[list[str]] = typer.Option(None, "--setup", help="Shell line run before the job, e.g. "
                                                                    "'source .venv/bin/activate' (repeatable)."),
) -> None:
    """Write slurm/sweep.sbatch (submit with sbatch), or submit with --submitit."""
    from robustbench_dgsa.jobs.sweep import submit_submitit, write_slurm_script
    if submitit_:
        h, m, s = (list(map(int, time_limit.split(":"))) + [0, 0])[:3] if time_limit.count(":") == 2 else (0, 0, 0)
        minutes = h * 60 + m + (1 if s else 0) or 24 * 60
        mem_gb = int("".join(ch for ch in mem if ch.isdigit()) or 32)
        ids = submit_submitit(sweep_dir, time_limit_min=minutes, gpus=gpus, cpus=cpus, mem_gb=mem_gb,
                              partition=partition, account=account, max_parallel=max_parallel)
        typer.echo(f"submitted {len(ids)} jobs: {', '.join(ids)}")
        return
    path = write_slurm_script(sweep_dir, time_limit=time_limit, gpus=gpus, cpus=cpus, mem=mem, partition=partition,
                              account=account, max_parallel=max_parallel, setup=setup or ())
    typer.echo(f"wrote {path}; submit with: sbatch {path}")
