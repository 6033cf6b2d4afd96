"""``dgsa-bench sweep plan|run|run-one|status|slurm``: each options -> one function of
:mod:`robustbench_dgsa.jobs.sweep` (or :mod:`robustbench_dgsa.jobs.slurm`) -> one line or JSON."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import App, app
from .render import echo_json


def _dump(obj: Any) -> None:
    echo_json(obj, nonfinite="null", sort_keys=True)


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
    preset: str = typer.Option("tiny", "--preset", help="Hyperparameter preset: tiny, small, evidence, zoo or "
                                                             "paper."),
    set_: Optional[list[str]] = opt.set_("Config override section.key=value of every job (repeatable), e.g. "
                                         "--set train.epochs=30; part of each job's identity."),
    ffn_ratio: Optional[str] = opt.ffn_ratio(),
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
    from robustbench_dgsa.config import parse_set_options
    from robustbench_dgsa.jobs.sweep import EvalSettings, plan_sweep
    ev = EvalSettings(corruptions=opt.parse_corruptions(corruption) or [],
                      severities=opt.parse_severities(severity),
                      corruption_dir=str(corruption_dir.resolve()) if corruption_dir else None,
                      text_noise=opt.parse_text_noise(text_noise) or [], corruption_seed=corruption_seed)
    seeds = opt.parse_seeds(seed)
    opt.check_data_root(data_root)
    opt.check_corruption_dir(corruption_dir)
    opt.check_output_dir(sweep_dir, "SWEEP_DIR")
    merged, jobs = plan_sweep(sweep_dir, opt.split_list(models), seeds, opt.split_list(datasets), preset,
                              parse_set_options(set_), data_root=str(data_root.resolve()) if data_root else None,
                              download=download, evaluation=ev, device=device, ffn_ratio=ffn_ratio)
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
    gpus: Optional[int] = typer.Option(None, "--gpus", min=0, max=1024,
                                       help="GPUs of a one-process job (default 1; 0 for CPU jobs). A multi-process "
                                            "job gives its GPUs with --gpus-per-node instead."),
    cpus: int = typer.Option(8, "--cpus", min=1, max=100_000, help="CPUs per job, per process in a multi-process "
                                                                   "job (≥ 1)."),
    mem: str = typer.Option("32G", "--mem", help="Memory per job, per node in a multi-process job: a number with "
                                                 "unit K, M, G or T (no unit = MB, as in Slurm), e.g. 500M, 32G."),
    nodes: int = typer.Option(1, "--nodes", min=1, max=100_000,
                              help="Nodes per job: each job becomes one data-parallel (DDP) training of NODES x "
                                   "processes per node, started by srun (needs --gpus-per-node or "
                                   "--tasks-per-node when > 1). The preset's batch size is the global batch and "
                                   "must divide by the process count."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", min=0, max=1024,
                                                help="GPUs per node of a multi-process job, one process (rank) per "
                                                     "GPU, nccl (default: none = one process, as without "
                                                     "--nodes)."),
    tasks_per_node: Optional[int] = typer.Option(None, "--tasks-per-node", min=1, max=100_000,
                                                 help="CPU processes per node of a multi-process job (gloo; for "
                                                      "CPU clusters); with --gpus-per-node it may only repeat that "
                                                      "number."),
    partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition."),
    account: Optional[str] = typer.Option(None, "--account", help="Slurm account."),
    max_parallel: Optional[int] = typer.Option(None, "--max-parallel", min=1, max=10**6,
                                               help="At most N array tasks at once."),
    setup: Optional[list[str]] = typer.Option(None, "--setup", help="Shell line run before the job, e.g. "
                                                                    "'source .venv/bin/activate' (repeatable)."),
) -> None:
    """Write slurm/sweep.sbatch (submit with sbatch), or submit with --submitit.

    One array task per job. With --nodes / --gpus-per-node / --tasks-per-node
    each array task is itself a data-parallel training: srun starts
    NODES x GPUS_PER_NODE ranks (or TASKS_PER_NODE CPU ranks), which meet at
    the first node of the allocation (MASTER_ADDR; MASTER_PORT from the job id).
    With --submitit the same layout is a multi-task submitit job.
    E.g. --nodes 2 --gpus-per-node 4 trains every job on 8 GPUs."""
    from robustbench_dgsa.jobs.slurm import ResourceError, submit_submitit, write_slurm_script
    options = dict(time_limit=time_limit, gpus=gpus, cpus=cpus, mem=mem, partition=partition, account=account,
                   max_parallel=max_parallel, setup=setup or (), nodes=nodes, gpus_per_node=gpus_per_node,
                   tasks_per_node=tasks_per_node)
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
