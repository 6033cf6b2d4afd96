"""``dgsa-bench train``, ``dgsa-bench evaluate`` and ``dgsa-bench sweep plan|run|run-one|status|slurm``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import App, app


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
    from robustbench_dgsa.util.jsonio import to_jsonable
    typer.echo(json.dumps(to_jsonable(obj, nonfinite="null"), indent=2, sort_keys=True))


# --- train -------------------------------------------------------------------------------------------------

@app.command("train")
def train_command(
    model: str = opt.model(..., help="Registered model(s): one or a comma list (vit,dgvit); see `dgsa-bench "
                                     "models`."),
    dataset: str = opt.dataset(...),
    preset: str = typer.Option("tiny", "--preset", help="Hyperparameter preset: tiny (seconds), small (minutes on a CPU), zoo (the shipped models) or paper (the paper's protocol)."),
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
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Config override section.key=value (repeatable)."),
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
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
) -> None:
    """Train models (per model and seed): checkpoint every epoch, rows in the results store, clean test
    accuracy. Under torchrun or srun (or with --nproc) one run trains data-parallel across the processes."""
    from ..config import load_config_file, resolve_config
    from ..models import get_model_config
    from robustbench_dgsa.engine.train import train
    from robustbench_dgsa.util.paths import safe_name

    seed_list = opt.parse_seeds(seed)
    model_list = opt.split_list(model)
    if not model_list:
        raise UserError("--model needs at least one model name")
    _check_data_root(data_root)
    opt.check_output_dir(out, "--out")      # also: no symbolic link inside (<out>/store, run folders, rows)
    opt.check_output_dir(store, "--store")
    file_ov = load_config_file(config) if config else None
    cfgs = []
    for m in model_list:  # every config checked before the first run starts
        cfg = resolve_config(get_model_config(m), dataset, preset, file_overrides=file_ov,
                             overrides=_overrides(epochs, batch_size, lr, device, data_root, download, set_))
        if data_root is not None:
            cfg.data.data_root = str(data_root)
        cfgs.append((m, cfg))
    from robustbench_dgsa.engine.predict import dataset_info
    dataset_info(cfgs[0][1].data.dataset)  # unknown name -> one clear line before anything starts
    if nproc is not None and nproc > 1:
        return _launch(nproc, [cfg for _, cfg in cfgs])
    store_dir = store if store is not None else out / "store"
    several = len(seed_list) * len(cfgs) > 1
    results = []
    for m, cfg in cfgs:
        for s in seed_list:
            run_out = out / safe_name(f"{m}-{cfg.data.dataset}-s{s}") if several else out
            r = _train_one(train, cfg, s, run_out, store_dir=store_dir, resume=resume, progress=not quiet)
            results.append({"model": m, "seed": s, "run_id": r.run_id, "checkpoint": str(r.checkpoint),
                            "out": str(run_out), "config_hash": r.config_hash, "final": r.final,
                            "history": r.history})
    if json_ and _is_main_process():
        _dump({"model": ",".join(model_list), "dataset": cfgs[0][1].data.dataset, "preset": preset,
               "store": str(store_dir), "runs": results})


def _train_one(train: Any, *args: Any, **kwargs: Any) -> Any:
    """One training run; a lost process group gets the hint to resume."""
    from robustbench_dgsa.engine.distributed import PeerFailure
    try:
        return train(*args, **kwargs)
    except PeerFailure as e:
        raise PeerFailure(f"{e} (the same command with --resume)") from None


def _is_main_process() -> bool:
    from robustbench_dgsa.engine.distributed import env_world
    found = env_world()
    return found is None or found[0] == 0


def _launch(nproc: int, cfgs: list[Any]) -> None:
    """``train --nproc N``: this same command without --nproc, in N local processes (torch.distributed.run)."""
    from robustbench_dgsa.engine import distributed
    if distributed.env_world() is not None:
        raise UserError("--nproc starts its own processes; under torchrun or srun leave it out (the launcher "
                        "already started one process per rank)")
    for cfg in cfgs:
        distributed.check_global_batch(cfg.train.batch_size, nproc)
    args, skip = [], False
    for a in opt.command_line():
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            args.append(a)
    distributed.launch(nproc, args)


# --- evaluate ----------------------------------------------------------------------------------------------

def _check_store_links(store: Optional[Path], checkpoint: Optional[Path]) -> None:
    """The store evaluate writes into (--store, else <checkpoint folder>/store) holds no symbolic link."""
    default = checkpoint.parent / "store" if checkpoint is not None else None
    if store is None and default is not None and default.is_symlink():
        raise UserError(f"{default} (the default results store) is a symbolic link; give --store DIR or remove "
                        f"the link")
    if store is None and default is not None:
        opt.check_no_links(default, "--store")


@app.command("evaluate")
def evaluate_command(
    checkpoint: Optional[Path] = opt.checkpoint(None, help="checkpoint.safetensors written by train (or use "
                                                             "--pretrained / --timm / --module)."),
    pretrained: Optional[str] = opt.pretrained(help="Instead of --checkpoint: a shipped trained model (see "
                                                    "`dgsa-bench models --pretrained`), by entry name "
                                                    "(dgvit-cifar10) or bare model name (dgvit)."),
    dataset: Optional[str] = opt.dataset(None, help="Default: the checkpoint's dataset."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    corruption: Optional[str] = opt.corruption(),
    severity: Optional[str] = opt.severity(),
    corruption_dir: Optional[Path] = typer.Option(
        None, "--corruption-dir", help="Official or regenerated CIFAR-C folder (<corruption>.npy + labels.npy) or "
                                       "ImageNet-C-style tree (<corruption>/<severity>/<wnid>/); default: on-the-fly."),
    corruption_seed: int = typer.Option(0, "--corruption-seed", min=0, max=opt.SEED_MAX,
                                        help="Seed of on-the-fly corruptions / text noise."),
    frost_dir: Optional[Path] = typer.Option(None, "--frost-dir",
                                             help="Frost photographs for on-the-fly frost (default: "
                                                  "<data-root>/corruptions/frost when present)."),
    text_noise: Optional[str] = opt.text_noise(),
    max_examples: Optional[int] = opt.max_examples(help="Use N test examples (which: --subset)."),
    subset: Optional[str] = typer.Option(None, "--subset", help="Which --max-examples test examples: first (the "
                                         "first N in official order, as RobustBench's n_examples; default), "
                                         "stratified (class-stratified, seed 0) or auto (the first N unless they "
                                         "miss a class). A checkpoint evaluated on its own dataset keeps its run's "
                                         "choice."),
    split: str = typer.Option("test", "--split", help="test (default), train, or a dataset's own split such as "
                                                      "test-exact (cifar10: the 1,017 exact-pixel test images)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store (default: <checkpoint folder>/store; "
                                         f"for --pretrained / --timm / --module: {opt.DEFAULT_STORE})."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, max=opt.config_max("train.batch_size"),
                                   help="Evaluation batch size."),
    device: str = opt.device(),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
    timm_name: Optional[str] = opt.timm(),
    module: Optional[str] = typer.Option(None, "--module", help="Instead of --checkpoint: pkg.mod:factory, a "
                                         "function returning an nn.Module (its input: images in [0, 1])."),
    weights: Optional[Path] = opt.weights(),
    random_init: bool = opt.random_init(),
    seed: Optional[str] = opt.seed(None, help="Seed of the --random-init weights (default 0; recorded and put "
                                              "into the model's name)."),
    timm_norm: bool = opt.timm_norm(),
    name: Optional[str] = typer.Option(None, "--name", help="Model name in the store for --timm/--module "
                                       "(default: the timm name or factory, plus -random-init-s<seed>; the weights "
                                       "hash is appended when the store holds that name for other weights)."),
    model_args: Optional[str] = opt.model_args(),
) -> None:
    """Accuracy of a checkpoint (or of a timm / any importable model): clean, per corruption and severity, and
    under text noise (into the store)."""
    from robustbench_dgsa.engine.evaluate import evaluate

    corruptions = opt.parse_corruptions(corruption)
    severities = opt.parse_severities(severity)
    noise = opt.parse_text_noise(text_noise)
    _check_data_root(data_root)
    if corruption_dir is not None and not corruption_dir.is_dir():
        raise UserError(f"corruption directory not found: {corruption_dir}")
    checkpoint, store = _evaluated_checkpoint(checkpoint, pretrained, timm_name, module, store)
    if timm_name is None and module is None:
        if weights is not None or random_init or name is not None or model_args or timm_norm or seed is not None:
            raise UserError("--weights, --random-init, --seed, --timm-norm, --name and --model-args go with --timm "
                            "or --module, not --checkpoint / --pretrained")
        res = evaluate(checkpoint, dataset=dataset, data_root=data_root, split=split, max_test=max_examples,
                       subset=subset, corruptions=corruptions, severities=severities, corruption_dir=corruption_dir,
                       text_noise=noise, corruption_seed=corruption_seed, store_dir=store, batch_size=batch_size,
                       device=device, progress=not quiet, frost_dir=frost_dir)
    else:
        if seed is not None and not random_init:
            raise UserError("--seed goes with --random-init (the seed of the random weights)")
        res = _evaluate_external(timm_name, module, weights, random_init, opt.parse_one_seed(seed or "0"), name,
                                 opt.parse_model_args(model_args), timm_norm=timm_norm,
                                 dataset=dataset, data_root=data_root, split=split, max_examples=max_examples,
                                 subset=subset or "first", corruption=corruptions, severity=severities,
                                 corruption_dir=corruption_dir, text_noise=noise, seed=corruption_seed,
                                 store=store if store is not None else opt.DEFAULT_STORE, batch_size=batch_size,
                                 device=device, progress=not quiet, frost_dir=frost_dir)
    if json_:
        _dump({"checkpoint": str(checkpoint or timm_name or module), "store": str(res.store_dir), **_summary(res)})
    else:
        _print_eval_table(res)


def _evaluated_checkpoint(checkpoint: Optional[Path], pretrained: Optional[str], timm_name: Optional[str],
                          module: Optional[str], store: Optional[Path]) -> tuple[Optional[Path], Optional[Path]]:
    """Exactly one model option; --pretrained NAME becomes the shipped checkpoint, its store the default one; the
    store folder checked (no links inside)."""
    if sum(x is not None for x in (checkpoint, pretrained, timm_name, module)) != 1:
        raise UserError("give exactly one of --checkpoint, --pretrained, --timm or --module")
    if pretrained is not None:
        from robustbench_dgsa.models.zoo import pretrained_checkpoint
        checkpoint = pretrained_checkpoint(pretrained.strip())[1]
        store = store if store is not None else opt.DEFAULT_STORE  # never a folder inside the installed package
    opt.check_output_dir(store, "--store")
    _check_store_links(store, checkpoint)
    return checkpoint, store


def _summary(res: Any) -> dict[str, Any]:
    """The result summary, with the ImageNet-C mCE (``imagenet_c``) on ImageNet-C."""
    mce = _imagenet_c_mce(res)
    return {**res.summary(), **({"imagenet_c": mce} if mce else {})}


def _imagenet_c_mce(res: Any) -> dict[str, Any] | None:
    """On ImageNet-C: the standard mCE (AlexNet's published errors) beside mCA, from the result table."""
    if res.dataset_family != "imagenet" or not (res.table.condition != "clean").any():
        return None
    from robustbench_dgsa.analysis.metrics import imagenet_c_ce
    _, summary = imagenet_c_ce(res.table[res.table.condition != "clean"])
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in summary.items()}


def _print_eval_table(res: Any) -> None:
    from rich.console import Console
    from rich.table import Table
    examples = getattr(res, "examples", "")
    t = Table(title=f"evaluation {res.run_id}" + (f" ({examples} test examples)" if examples else ""))
    for col in ("condition", "severity", "accuracy", "n", "cer", "wer", "source"):
        t.add_column(col)
    for r in res.table.itertuples(index=False):
        fmt = lambda v: "" if v != v else f"{v:.4f}"  # noqa: E731 - NaN -> blank
        src = r.source if len(r.source) <= 32 else r.source[:31] + "…"
        t.add_row(r.condition, str(r.severity), f"{r.accuracy:.4f}", str(r.n), fmt(r.cer), fmt(r.wer), src)
    Console().print(t)  # a result table: stdout
    mce = _imagenet_c_mce(res)
    if mce:
        value = f"{mce['mCE']:.2f}%" if mce["mCE"] is not None else f"n/a (missing: {mce['missing']})"
        Console(highlight=False).print(f"ImageNet-C mCE (AlexNet-normalised): {value}; mCA {100 * mce['mCA']:.2f}% "
                                       f"over {mce['n_corruptions']} of the 15 corruptions")


def _evaluate_external(timm_name: str | None, module: str | None, weights: Path | None, random_init: bool,
                       init_seed: int, name: str | None, model_args: dict[str, Any], *, timm_norm: bool,
                       dataset: str | None, store: Path, **kw: Any):
    """``evaluate --timm/--module``: load the model, then the library's benchmark() (same core as checkpoints)."""
    from robustbench_dgsa.engine.benchmark import benchmark
    from robustbench_dgsa.engine.evaluate import EvalResult
    from robustbench_dgsa.models.external import load_module_model, load_timm_model

    if dataset is None:
        raise UserError("--timm/--module need --dataset (the model carries no training dataset)")
    if module is not None and random_init:
        raise UserError("--random-init goes with --timm (a --module factory builds its own weights)")
    if timm_name is not None:
        model_args.setdefault("num_classes", _num_classes(dataset, kw.get("data_root")))
        ext = load_timm_model(timm_name, weights=weights, random_init=random_init, seed=init_seed,
                              timm_norm=timm_norm, **model_args)
    else:
        ext = load_module_model(module, weights=weights, timm_norm=timm_norm, **model_args)
    rows = benchmark(ext, dataset, name=name, store=store, **kw)
    return EvalResult(rows.attrs["run_id"], rows.attrs["table"], store, rows.attrs["examples"],
                      rows.attrs.get("dataset_family"))


def _num_classes(dataset: str, data_root: Path | None) -> int:
    from robustbench_dgsa.data import get_info, load_dataset
    n = get_info(dataset).num_classes
    return int(n) if n else len(load_dataset(dataset, "test", data_root=data_root).classes)


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
    preset: str = typer.Option("tiny", "--preset", help="Hyperparameter preset: tiny, small, zoo or paper."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Config override key=value (every job)."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    download: bool = typer.Option(False, "--download", help="Download datasets if missing."),
    corruption: Optional[str] = opt.corruption(help="Evaluate under these corruptions: names, groups, benchmark, "
                                                    "extra or all."),
    severity: Optional[str] = opt.severity(),
    corruption_dir: Optional[Path] = typer.Option(None, "--corruption-dir", help="CIFAR-C folder to read from."),
    text_noise: Optional[str] = opt.text_noise(),
    corruption_seed: int = typer.Option(0, "--corruption-seed", min=0, max=opt.SEED_MAX,
                                        help="Seed of on-the-fly corruptions."),
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
    workers: Optional[int] = typer.Option(None, "--workers", "-j", min=1, max=opt.MAX_WORKERS,
                                          help="Parallel jobs (default: 1, or one per GPU)."),
    devices: Optional[str] = typer.Option(None, "--devices", help="GPU ids for the workers, e.g. 0,1,2,3."),
    json_: bool = opt.json_(help="Print the summary as JSON on stdout."),
    progress: bool = typer.Option(False, "--progress", help="Progress bars for in-process jobs."),
) -> None:
    """Run every unfinished job (finished ones are skipped; half-trained ones resume)."""
    from robustbench_dgsa.jobs.sweep import run
    device_ids = opt.check_gpu_ids(_device_list(devices)) or None
    opt.check_no_links(sweep_dir, "SWEEP_DIR")  # runs/<job>/ and store/ are written into
    summary = run(sweep_dir, workers=workers, devices=device_ids, progress=progress)
    if json_:
        _dump(summary)
    else:
        typer.echo(f"ran {len(summary['ran'])}, skipped {len(summary['skipped'])} finished, "
                   f"failed {len(summary['failed'])}")
    if summary["failed"]:
        raise typer.Exit(1)


def _device_list(devices: str | None) -> list[str]:
    """``--devices`` as a list, repeats kept (check_gpu_ids refuses them; split_list would drop them)."""
    ids = [d.strip() for d in (devices or "").split(",")] if devices is not None else []
    if devices is not None and not all(ids):
        raise UserError(f"--devices: blank item in {devices!r}; separate GPU ids with single commas")
    return ids


@sweep_app.command("run-one")
def sweep_run_one(
    sweep_dir: Path = typer.Argument(..., help="Sweep folder."),
    index: int = typer.Option(..., "--index", min=0, max=10**9, help="Line number in jobs.jsonl (0-based), e.g. "
                                                         "$SLURM_ARRAY_TASK_ID."),
    json_: bool = opt.json_(help="Print the job record as JSON on stdout."),
) -> None:
    """Run one job (what each Slurm array task calls)."""
    from robustbench_dgsa.jobs.sweep import run_one
    opt.check_no_links(sweep_dir, "SWEEP_DIR")
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
                                                            "'robustbench-dgsa\\[slurm]') instead of writing a script. "
                                                            "submitit pickles each job into SWEEP_DIR/slurm/submitit/ "
                                                            "(made private, mode 0700) and the compute node unpickles "
                                                            "it: the one pickle in the suite; the default sbatch "
                                                            "script has none."),
    time_limit: str = typer.Option("24:00:00", "--time", help="Time limit per job, any Slurm format: MM, MM:SS, "
                                                               "HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."),
    gpus: int = typer.Option(1, "--gpus", min=0, max=1024, help="GPUs per job (0 for CPU jobs)."),
    cpus: int = typer.Option(8, "--cpus", min=1, max=100_000, help="CPUs per job (≥ 1)."),
    mem: str = typer.Option("32G", "--mem", help="Memory per job: a number with unit K, M, G or T (no unit = MB, "
                                                 "as in Slurm), e.g. 500M, 32G."),
    partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition."),
    account: Optional[str] = typer.Option(None, "--account", help="Slurm account."),
    max_parallel: Optional[int] = typer.Option(None, "--max-parallel", min=1, max=10**6,
                                               help="At most N array tasks at once."),
    setup: Optional[list[str]] = typer.Option(None, "--setup", help="Shell line run before the job, e.g. "
                                                                    "'source .venv/bin/activate' (repeatable)."),
) -> None:
    """Write slurm/sweep.sbatch (submit with sbatch), or submit with --submitit."""
    from robustbench_dgsa.jobs.slurm import ResourceError, submit_submitit, write_slurm_script
    options = dict(time_limit=time_limit, gpus=gpus, cpus=cpus, mem=mem, partition=partition, account=account,
                   max_parallel=max_parallel, setup=setup or ())
    try:
        if submitit_:
            ids = submit_submitit(sweep_dir, **options)
            typer.echo(f"submitted {len(ids)} jobs: {', '.join(ids)}")
            return
        path = write_slurm_script(sweep_dir, **options)
    except ResourceError as e:
        raise UserError(f"--{e.key.replace('_', '-')}: {e.detail}") from None
    import shlex
    typer.echo(f"wrote {path}; submit with: sbatch {shlex.quote(str(path))}")
