"""The main job, ``dgsa-bench reproduce``: from nothing to a complete robustness report.

With no options it trains ViT, DViT, DGViT on ``synthetic-vision`` and Transformer, DT, DGT on
``synthetic-text`` over seeds 0, 1 and 2 (``tiny`` preset), evaluates every model clean, on all 19 CIFAR-C
corruptions × 5 severities (generated on the fly) and on every text-noise type × 5 severities, runs the
rollouts (Figure 2 / 3 sets, salient mass, drift on a few corruptions), measures a small Table 9 benchmark
(parameters, FLOPs, training throughput, latency, peak memory) and writes the report (:func:`report.build_report`)
into ``out_dir``. Everything runs on a CPU without network and within minutes.

Layout of ``out_dir``: ``store/`` (the one results store), ``runs/<job>/`` (checkpoints, training state,
``job_done.json``), ``corrupted/<dataset>-first<N>/`` (the corrupted test images,
generated once for all models in the CIFAR-C layout), ``jobs.jsonl`` / ``sweep.json`` (the job list, as
:mod:`robustbench_dgsa.jobs.sweep` writes it), ``timings.json``, and the report itself (``index.html`` …).

It resumes: a finished job (checkpoint + evaluation rows in the store), a finished rollout and a finished
benchmark are skipped, and a half-trained model continues from its last epoch, so re-running after a kill
picks up where it stopped. ``preset="paper"`` with ``data_root`` runs the paper's protocol on real data
(``image_dataset`` default cifar10, ``text_dataset`` default imdb); ``quick=True`` is the smallest size,
for the test suite (1 epoch, 2 corruptions × 2 severities, 64 test examples). With the tiny preset the test
split is cut to its first 200 examples (``max_test`` changes it).

Table 2 (ImageNet-1k): ``preset="paper", image_dataset="imagenet", data_root=...`` trains ViT, DViT and DGViT
at 224 px / patch 16 / batch 64 (the paper preset's ImageNet specials), FFN proj. ×4; ``ffn_ratio="16/3"`` is
the other configuration, for the models with a SwiGLU FFN only (ViT has one row). A missing ImageNet stops the
planning with one line naming the files to put where.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from robustbench_dgsa import store
from robustbench_dgsa.jobs import bench
from robustbench_dgsa.jobs import job as job_runner
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.lists import split_list
from robustbench_dgsa.util.progress import log, log_prefix

DEFAULT_MODELS = ("vit", "dvit", "dgvit", "transformer", "dt", "dgt")
TIMINGS_FILE = "timings.json"

#: quick=True: the smallest main job (test suite)
QUICK = dict(epochs=1, max_train=240, max_test=64, corruptions=("gaussian_noise", "fog"), severities=(1, 3),
             text_noise=("char_swap", "word_dropout"), rollout_examples=16, rollout_corruptions=("fog",),
             bench_steps=2)
#: the default main job: drift on a few corruptions, a few rollout examples; with the tiny preset the test
#: split is cut to 200 examples (95 image / 55 text conditions each), which keeps the job within 5 minutes
FULL = dict(rollout_examples=64, rollout_corruptions=("gaussian_noise", "motion_blur", "fog", "contrast"),
            bench_steps=4, tiny_max_test=200)


@dataclass
class Plan:
    """What one reproduce run does (resolved from the options)."""
    out: Path
    preset: str
    seeds: list[int]
    datasets: dict[str, list[str]]            # modality -> datasets (one or more)
    models: list[str]
    severities: list[int]
    corruptions: list[str]
    text_noise: list[str]
    overrides: dict[str, str]
    data_root: str | None
    rollout_examples: int
    rollout_corruptions: list[str]
    bench_steps: int
    device: str = "auto"
    jobs: list[Any] = field(default_factory=list)


def make_plan(out_dir: str | Path, *, preset: str = "tiny", seeds: Sequence[int] = (0, 1, 2),
              data_root: str | Path | None = None, image_dataset: str | None = None,
              text_dataset: str | None = None, models: Sequence[str] | str | None = None,
              severities: Sequence[int] | None = None, corruptions: str | Sequence[str] | None = None,
              text_noise: str | Sequence[str] | None = None, max_test: int | None = None, quick: bool = False,
              device: str = "auto", ffn_ratio: str | float | None = None,
              overrides: dict[str, Any] | None = None) -> Plan:
    """Resolve the options into a :class:`Plan` (validates names; nothing is run).

    ``None`` means the size's default: every corruption, noise type and severity, or with ``quick`` the
    small QUICK sets; explicit values are always kept (and checked), also with ``quick``. ``ffn_ratio``: the FFN
    expansion ("proj.", e.g. 4 or 16/3) of the models with a SwiGLU FFN (DViT, DGViT, DT, DGT); the others keep
    theirs. ``overrides``: config overrides of every job (``{"train.amp": "off"}``, as ``--set``), applied after
    the ones ``quick`` and ``max_test`` make; like any override they are part of each job's identity."""
    from corruptions.registry import parse_severities, resolve_corruptions
    from corruptions.text import resolve_text_noise

    from robustbench_dgsa.jobs import sweep
    from robustbench_dgsa.config import load_preset
    from robustbench_dgsa.data import DATASETS
    from robustbench_dgsa.models import get_model_config

    load_preset(preset)  # an unknown name fails here, as everywhere
    seeds = sorted(dict.fromkeys(int(s) for s in seeds))
    if not seeds:
        raise UserError("reproduce needs at least one seed")
    if data_root is not None and not Path(data_root).is_dir():
        raise UserError(f"data root not found: {data_root}")
    paper = preset == "paper"
    defaults = {"image": "cifar10" if paper else "synthetic-vision", "text": "imdb" if paper else "synthetic-text"}
    datasets: dict[str, list[str]] = {}
    for modality, given in (("image", image_dataset), ("text", text_dataset)):
        names = split_list(given) or [defaults[modality]]
        if [n.lower() for n in names] == ["none"]:
            continue
        for name in names:
            if name not in DATASETS:
                raise UserError(f"unknown dataset {name!r} (valid: {', '.join(sorted(DATASETS))}, none)")
            if DATASETS[name].modality != modality:
                raise UserError(f"{name!r} is not a{'n image' if modality == 'image' else ' text'} dataset")
        datasets[modality] = list(dict.fromkeys(names))
    if not datasets:
        raise UserError("both image_dataset=none and text_dataset=none: nothing to reproduce",
                        options=("image_dataset", "text_dataset"))
    model_list = split_list(models) or list(DEFAULT_MODELS)
    for m in model_list:
        get_model_config(m)  # raises UserError for an unknown name
    model_list = [m for m in model_list if get_model_config(m).modality in datasets]
    if not model_list:
        raise UserError("none of the models takes the modality of the datasets given")

    sev = parse_severities(list(severities if severities is not None else QUICK["severities"] if quick else
                                range(1, 6)))
    cors = list(resolve_corruptions(corruptions if corruptions is not None else
                                    list(QUICK["corruptions"]) if quick else "all"))
    noise = list(resolve_text_noise(text_noise if text_noise is not None else
                                    list(QUICK["text_noise"]) if quick else "all"))
    # where it runs (device, data root) is the runner's, not the job's: the same jobs resume on another machine
    sizes: dict[str, str] = {}
    if quick:
        sizes.update({"train.epochs": str(QUICK["epochs"]), "data.max_train": str(QUICK["max_train"]),
                      "data.max_test": str(QUICK["max_test"])})
    if max_test is None and preset == "tiny" and not quick:
        max_test = FULL["tiny_max_test"]
    if max_test is not None:
        sizes["data.max_test"] = str(int(max_test))
    size = QUICK if quick else FULL
    plan = Plan(out=Path(out_dir), preset=preset, seeds=seeds, datasets=datasets, models=model_list,
                severities=sev, corruptions=cors, text_noise=noise, overrides={**sizes, **_full_keys(overrides)},
                data_root=str(data_root) if data_root is not None else None,
                rollout_examples=int(size["rollout_examples"]),
                rollout_corruptions=[c for c in size["rollout_corruptions"] if c in cors] or cors[:1],
                bench_steps=int(size["bench_steps"]), device=device)
    plan.jobs = _plan_jobs(plan, ffn_ratio)
    return plan


def _full_keys(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Overrides keyed ``section.name`` (``lr`` -> ``train.lr``), so that a given key replaces a size's own; an
    unknown key is one line here."""
    from robustbench_dgsa.config import resolve_key
    return {".".join(resolve_key(k)): v for k, v in (overrides or {}).items()}


def _plan_jobs(plan: Plan, ffn_ratio: str | float | None) -> list[Any]:
    """The plan's jobs (model -> dataset -> seed); ``ffn_ratio`` as an override of the SwiGLU models' jobs only.
    A dataset that cannot be downloaded and is missing (ImageNet) fails here."""
    from robustbench_dgsa.data.registry import check_files
    from robustbench_dgsa.jobs import sweep
    from robustbench_dgsa.models import get_model_config

    for d in all_datasets(plan):
        check_files(d, plan.data_root)
    jobs = []
    for m in plan.models:
        modality = get_model_config(m).modality
        jobs += sweep.plan([m], plan.seeds, plan.datasets[modality], plan.preset, plan.overrides,
                           ffn_ratio=ffn_ratio)
    return jobs


def all_datasets(plan: Plan) -> list[str]:
    """The plan's datasets, images first."""
    return [d for modality in ("image", "text") for d in plan.datasets.get(modality, [])]


# ------------------------------------------------------------------------------------------- phases
#: presets whose committed campaign was computed in fp32 (``results/evidence``): rebuilding it pins fp32, so
#: its finished jobs are recognised, and any job it trains anew matches them, whatever ``auto`` means here
FP32_PRESETS = ("evidence",)


def pinned_amp(plan: Plan) -> str | None:
    """The precision pin of a plan: "off" for a preset of :data:`FP32_PRESETS` unless its overrides choose
    ``train.amp``; None (each job's ``train.amp``, resolved here) otherwise."""
    from robustbench_dgsa.config import check_overrides
    if plan.preset in FP32_PRESETS and "train.amp" not in check_overrides(dict(plan.overrides or {})):
        return "off"
    return None


def _job_done(plan: Plan, job) -> bool:
    return job_runner.is_finished(plan.out, job, device=plan.device or "auto", amp=pinned_amp(plan))


def corrupted_test_set(plan: Plan, dataset: str, progress: bool = False) -> Path | None:
    """Generate the corrupted test images once for all models and seeds (CIFAR-C layout under
    ``<out>/corrupted/<dataset>``), instead of once per evaluation; frost uses the real textures in
    ``<data root>/corruptions/frost`` when that folder exists (:func:`~robustbench_dgsa.data.locate.frost_dir_for`;
    else the default lookup, which may be procedural). Same images, same random draws (keyed by image index) as
    on-the-fly corruption; the rows say ``source="regenerated"``. None when the test images
    are not RGB (evaluation then corrupts on the fly)."""
    from corruptions.layout import read_manifest, regenerate

    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.data.locate import frost_dir_for
    from robustbench_dgsa.engine.predict import select_test
    from robustbench_dgsa.models import get_model_config
    from robustbench_dgsa.util.progress import track

    model = next(m for m in plan.models if get_model_config(m).modality == "image")
    cfg = resolve_config(get_model_config(model), dataset, plan.preset, overrides=plan.overrides)
    data = _test_split(dataset, plan.data_root)
    y = np.asarray(data.y, dtype=np.int64)
    n = int(select_test(y, cfg.data.max_test, cfg.data.test_subset).max()) + 1
    x = data.read(np.arange(n)).x if getattr(data, "streaming", False) else np.asarray(data.x)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[-1] != 3:
        return None
    out = plan.out / "corrupted" / f"{dataset}-first{n}"
    man = read_manifest(out) if out.is_dir() else None
    if man is not None and man.n == n and list(man.severities) == list(plan.severities) \
            and set(plan.corruptions) <= set(man.corruptions):
        return out
    missing = [c for c in plan.corruptions if man is None or c not in man.corruptions]
    frost = frost_dir_for(None, plan.data_root) if "frost" in missing else None
    regenerate(x[:n], y[:n], out, missing, plan.severities, seed=0, frost=frost,
               progress=(lambda it, total=None, description="": track(it, total, description, enabled=progress)),
               input_description=f"{dataset} test split, first {n} images")
    return out


def _test_split(dataset: str, data_root: str | None, max_images: int | None = None) -> Any:
    """The test split; a streamed dataset's (ImageNet) as its file list (decoded only where read), or its first
    ``max_images`` decoded."""
    from robustbench_dgsa.data import get_info, load_dataset

    if not get_info(dataset).streams:
        return load_dataset(dataset, "test", data_root=data_root)
    if max_images is not None:
        return load_dataset(dataset, "test", data_root=data_root, max_images=max_images)
    return load_dataset(dataset, "test", data_root=data_root, stream=True)


def _train_and_evaluate(plan: Plan, job, progress: bool, corruption_dirs: dict[str, Path | None]) -> dict[str, Any]:
    """One job through the one job runner: train (resuming a half-done run), then evaluate clean + corruptions
    (from the corrupted test set generated once) / text noise."""
    cdir = corruption_dirs.get(job.dataset)
    evaluation = job_runner.EvalSettings(corruptions=plan.corruptions, severities=plan.severities,
                                         text_noise=plan.text_noise, corruption_dir=str(cdir) if cdir else None)
    return job_runner.run_job(plan.out, job, evaluation, device=plan.device, data_root=plan.data_root,
                              progress=progress, amp=pinned_amp(plan))


def _rollout(plan: Plan, job, progress: bool) -> bool:
    """Rollout sets (Figures 2/3), salient mass and drift for one trained model (the first seed only). Returns
    whether it made them (False: already in the store)."""
    from robustbench_dgsa.rollout.runs import rollout_metrics_run

    out = job_runner.job_dir(plan.out, job)
    store_dir = plan.out / "store"
    if store.read_finished(store_dir, f"rollout-{job.id}") is not None:
        return False
    ckpt = out / "checkpoint.safetensors"
    if job.dataset.startswith("synthetic"):
        summary = rollout_metrics_run(ckpt, store_dir, job.dataset, corruptions=plan.rollout_corruptions,
                                      severities=plan.severities, max_examples=plan.rollout_examples,
                                      n_figure=4, device=None, progress=False)
        rid = summary["run_id"]
    else:
        rid = _figure_rollout_set(plan, job, ckpt, store_dir)
    store.mark_finished(store_dir, f"rollout-{job.id}", {"run_id": rid, "job": job.to_dict()})
    return True


def _figure_rollout_set(plan: Plan, job, ckpt: Path, store_dir: Path, k: int = 4) -> str:
    """Real data (no known salient region): only a figure set of the first ``k`` test inputs."""
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    from robustbench_dgsa.engine.predict import preprocess_from_meta
    from robustbench_dgsa.rollout.runs import image_rollout_full, save_rollout_set, text_rollout_full

    model, meta = load_checkpoint(ckpt)
    pre = preprocess_from_meta(meta)
    data = _test_split(job.dataset, plan.data_root, max_images=k)
    run_id = store.new_run_id("rollout")
    common = dict(model=job.model, dataset=job.dataset, seed=job.seed, labels=np.asarray(data.y)[:k],
                  meta={"classes": meta.get("classes"), "config_hash": meta.get("config_hash", ""),
                        "checkpoint": str(ckpt), "indices": list(range(k)), "split": "test"})
    if model.config.modality == "image":
        imgs = np.asarray(data.x)[:k]
        r = image_rollout_full(model, imgs, pre)
        save_rollout_set(store_dir, run_id, kind="image", mode=r.spec, images=imgs, heatmaps=r.heatmaps,
                         preds=r.preds, probs=r.probs, **common)
    else:
        r = text_rollout_full(model, list(data.texts)[:k], pre)
        save_rollout_set(store_dir, run_id, kind="text", mode=r.spec, tokens=r.tokens, scores=r.scores,
                         preds=r.preds, probs=r.probs, **common)
    # a row so the run is known to the store (the report's sources name it)
    store.RunWriter(store_dir, run_id, dict(kind="rollout", model=job.model, dataset=job.dataset, seed=job.seed,
                                            config_hash=str(meta.get("config_hash", "")), split="test")
                    ).add("rollout_examples", float(k), condition="clean", severity=0, n=k, source=r.spec.tag)
    return run_id


def _bench(plan: Plan, model_name: str, job) -> None:
    """Table 9 rows (kind="bench") for one model, measured once (skipped when the store has them)."""
    import torch

    from robustbench_dgsa.engine.predict import resolve_device
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    from robustbench_dgsa.util.provenance import device_description

    store_dir = plan.out / "store"
    run_id = f"bench-{job.id}"
    if store.has_rows(store_dir, run_id):
        return
    ckpt = job_runner.job_dir(plan.out, job) / job_runner.CHECKPOINT
    if not ckpt.is_file():   # the job finished on another machine (its store was copied here): nothing to time
        log(f"[reproduce] no checkpoint of {job.id} here (finished elsewhere): its Table 9 row is not measured")
        return
    model, meta = load_checkpoint(ckpt)
    run_cfg = meta.get("run_config") or {}
    batch = int((run_cfg.get("train") or {}).get("batch_size", 32))
    dev = str(resolve_device(plan.device))
    torch.manual_seed(0)
    m = bench.measure(model, batch_size=batch, steps=plan.bench_steps, device=dev)
    numbers = m.table9()
    src = device_description(dev)
    w = store.RunWriter(store_dir, run_id, dict(kind="bench", model=model_name, dataset=job.dataset, seed=-1,
                                                config_hash=str(meta.get("config_hash", "")), source=src, n=batch))
    w.write_provenance({"kind": "bench", "model": model_name, "dataset": job.dataset, "device": dev,
                        "batch_size": batch, "steps": plan.bench_steps, "config_hash": meta.get("config_hash", ""),
                        "memory_method": m.method, "definitions": bench.__doc__,
                        "load_avg_1m": m.load_avg_1m, "cpu_cores": m.cpu_cores})
    w.add_rows([dict(metric=k, value=v) for k, v in numbers.items()]
               + [dict(metric="load_avg_1m", value=m.load_avg_1m)])


# ------------------------------------------------------------------------------------------- entry point
def reproduce(out_dir: str | Path = "reports/reproduce", *, preset: str = "tiny", seeds: Sequence[int] = (0, 1, 2),
              data_root: str | Path | None = None, image_dataset: str | None = None, text_dataset: str | None = None,
              models: Sequence[str] | str | None = None, severities: Sequence[int] | None = None,
              corruptions: str | Sequence[str] | None = None, text_noise: str | Sequence[str] | None = None,
              max_test: int | None = None, progress: bool = True, quick: bool = False, device: str = "auto",
              threads: int | None = None, workers: int | None = None,
              on_phase: Callable[[str, float], None] | None = None, ffn_ratio: str | float | None = None,
              overrides: dict[str, Any] | None = None) -> Path:
    """Run the main job (see the module docstring); returns the report folder (``out_dir``).

    ``on_phase(name, seconds)`` is called after each phase (corrupt, train+evaluate, rollout, bench, report); the
    same timings are written to ``<out_dir>/timings.json``. With several workers the corrupted test set is made
    in one worker while the text jobs train in the others, so "corrupt" overlaps (and is part of) the wall time
    of "train_evaluate"; "total" is the wall time of the whole run.

    ``threads``: torch CPU threads while the job runs (restored afterwards); default 1 for the tiny preset on a
    CPU — its models are so small that intra-op threads cost more than they give, and on a busy machine spinning
    OpenMP threads slow it down many times — otherwise torch's default. ``workers``: processes that
    train/evaluate independent jobs (and run the rollouts) at once, each with one torch thread; default: one per
    CPU core on a CPU (at most 8) except for the paper preset, else 1. Results do not depend on it (every job seeds
    itself; the benchmark phase always runs alone). ``ffn_ratio``, ``overrides``: see :func:`make_plan`.
    """
    import torch

    from robustbench_dgsa.engine.predict import resolve_device
    resolve_device(device)  # a device this machine lacks is one line before any work: nothing is written
    if threads is None and preset == "tiny" and not (device != "cpu" and torch.cuda.is_available()):
        threads = 1
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        return _reproduce(out_dir, preset=preset, seeds=seeds, data_root=data_root, image_dataset=image_dataset,
                          text_dataset=text_dataset, models=models, severities=severities, corruptions=corruptions,
                          text_noise=text_noise, max_test=max_test, progress=progress, quick=quick, device=device,
                          workers=workers, on_phase=on_phase, ffn_ratio=ffn_ratio, overrides=overrides)
    finally:
        torch.set_num_threads(before)


def _reproduce(out_dir: str | Path, *, preset: str, seeds: Sequence[int], data_root: str | Path | None,
               image_dataset: str | None, text_dataset: str | None, models: Sequence[str] | str | None,
               severities: Sequence[int], corruptions: str | Sequence[str], text_noise: str | Sequence[str],
               max_test: int | None, progress: bool, quick: bool, device: str, workers: int | None,
               on_phase: Callable[[str, float], None] | None, ffn_ratio: str | float | None = None,
               overrides: dict[str, Any] | None = None) -> Path:
    import torch

    from robustbench_dgsa.jobs import sweep
    from robustbench_dgsa.report.folder import check_report_folder

    check_report_folder(Path(out_dir))  # a folder another tool's manifest.json claims: refused before any work
    if workers is None:
        workers = _default_workers(preset, device)
    plan = make_plan(out_dir, preset=preset, seeds=seeds, data_root=data_root, image_dataset=image_dataset,
                     text_dataset=text_dataset, models=models, severities=severities, corruptions=corruptions,
                     text_noise=text_noise, max_test=max_test, quick=quick, device=device, ffn_ratio=ffn_ratio,
                     overrides=overrides)
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    # the job list, in the sweep layout (runs/<job id>/, store/): `dgsa-bench sweep status --dir OUT` reads it
    sweep.write_plan(out, plan.jobs, data_root=plan.data_root, device=device,
                     evaluation=sweep.EvalSettings(corruptions=plan.corruptions, severities=plan.severities,
                                                   text_noise=plan.text_noise))
    timings: dict[str, float] = {}
    t_all = time.monotonic()

    def phase(name: str, t0: float | None, seconds: float | None = None) -> None:
        timings[name] = round(time.monotonic() - t0 if seconds is None else seconds, 2)
        if on_phase is not None:
            on_phase(name, timings[name])

    n_done = sum(_job_done(plan, j) for j in plan.jobs)
    log(f"[reproduce] {len(plan.jobs)} jobs ({', '.join(plan.models)} × seeds {plan.seeds} on "
        f"{', '.join(all_datasets(plan))}; preset {plan.preset}{', quick' if quick else ''}); "
        f"{n_done} already done -> {out}")
    first = {}
    for job in plan.jobs:
        first.setdefault((job.model, job.dataset), job)   # the lowest seed of each model on each dataset
    todo = [j for j in plan.jobs if not _job_done(plan, j)]
    rollouts = {"made": 0, "inside": 0}
    _corrupt_train_rollout(plan, todo, list(first.values()), workers, progress, phase, rollouts)
    t0 = time.monotonic()
    benched = set()
    for (model_name, _), job in first.items():   # Table 9: one row per model (on its first dataset)
        if model_name not in benched:
            benched.add(model_name)
            _bench(plan, model_name, job)
    phase("bench", t0)
    t0 = time.monotonic()
    store.compact(out / "store")
    from robustbench_dgsa.report.build import build_report   # loaded by now when a worker idled (_warm_up)
    title = (f"dgsa-bench reproduce: {', '.join(all_datasets(plan))} — preset {plan.preset}"
             f"{' (quick)' if quick else ''}, seeds {', '.join(map(str, plan.seeds))}")
    build_report(out / "store", out, title=title)
    phase("report", t0)
    timings["total"] = round(time.monotonic() - t_all, 2)
    # "corrupt" runs inside the wall time of "train_evaluate" (beside the text jobs): the phases overlap
    within = {"corrupt": "train_evaluate", **({"rollout": "train_evaluate"} if rollouts["inside"] else {})}
    atomic.write_json(out / TIMINGS_FILE, {"phases": timings, "phase_order": list(timings), "jobs": len(plan.jobs),
                                           "within": within, "rollouts": rollouts["made"],
                                           "torch_threads": torch.get_num_threads(), "workers": workers,
                                           "preset": plan.preset,
                                           "quick": quick, "seeds": plan.seeds, "models": plan.models,
                                           "datasets": plan.datasets})
    log(f"[reproduce] done in {timings['total']:.1f}s: {out / 'index.html'}")
    return out


def _corrupt_train_rollout(plan: Plan, todo: list[Any], firsts: list[Any], workers: int | None, progress: bool,
                           phase: Callable[..., None], rollout_stats: dict[str, int]) -> None:
    """The phases "corrupt", "train_evaluate" and "rollout" in one pool of ``workers`` processes: ``todo`` jobs are
    trained and evaluated, ``firsts`` (one job per model and dataset) get rollouts, each right after its job (so a
    job's results and its rollout land in the store together). ``phase(name, t0, seconds)`` records each: the
    rollout phase is the seconds its rollouts took (summed over the worker processes), most of them inside
    train_evaluate's wall time; ``rollout_stats`` gets how many rollout sets were made (``made``) and how many of
    them inside train_evaluate (``inside``).

    The corrupted test images are made once per image dataset, as the first tasks; the text jobs, which do not
    need them, run beside them when there are several workers; see :func:`_train_all` for the order."""
    image_sets = plan.datasets.get("image", [])
    n_workers = max(1, min(workers or 1, len(todo) or 1))
    first_ids = {j.id for j in firsts}
    one = progress and n_workers == 1
    with _Pool(n_workers) as pool:
        t0 = time.monotonic()
        corrupt = {}
        for ds in image_sets:
            if plan.corruptions and any(j.dataset == ds for j in todo):
                log(f"[reproduce] corrupting the {ds} test images once: {len(plan.corruptions)} corruptions × "
                    f"{len(plan.severities)} severities")
                corrupt[ds] = pool.submit(_timed, corrupted_test_set, plan, ds, one)
        if todo:
            log(f"[reproduce] training and evaluating {len(todo)} jobs"
                f"{f' in {n_workers} processes' if n_workers > 1 else ''}")
        inside = _train_all(pool, n_workers, plan, todo, corrupt, first_ids, one, phase, when_idle=_warm_up)
        phase("train_evaluate", t0)
        after = [pool.result(task) for task in [pool.submit(_job_task, plan, job, False, {}, True, False)
                                                for job in firsts]]  # those not made above
        made = inside + after
        rollout_stats.update(made=sum(n for n, _ in made), inside=sum(n for n, _ in inside))
        phase("rollout", None, sum(sec for _, sec in made))


def _train_all(pool: "_Pool", n_workers: int, plan: Plan, todo: list[Any], corrupt: dict[str, Future],
               first_ids: set[str], one: bool, phase: Callable[..., None],
               when_idle: Callable[[], None] | None = None) -> list[tuple[int, float]]:
    """Every job of ``todo`` through ``pool``, at most ``n_workers`` at a time (plus the corruption tasks
    ``corrupt``): an image dataset's jobs once its corrupted test set exists, before any text job then left (text
    jobs are shorter, so they fill the end, where a worker would otherwise wait for the last long job); until then,
    text jobs. Records the "corrupt" phase when the last corruption task ends; calls ``when_idle`` (once) when a
    worker has nothing left to do while others still run. Returns each job task's result."""
    from concurrent.futures import FIRST_COMPLETED, wait

    waiting = {ds: [j for j in todo if j.dataset == ds] for ds in corrupt}
    text = [j for j in todo if j.dataset not in corrupt]
    ready: list[Any] = []
    running: set[Future] = set(corrupt.values())
    corruption_dirs: dict[str, Path | None] = {}
    results, seconds = [], 0.0
    if not corrupt:
        phase("corrupt", None, 0.0)
    while ready or text or running or waiting:
        for ds, task in list(corrupt.items()):
            if task.done():
                corruption_dirs[ds], took = pool.result(corrupt.pop(ds))
                seconds += took
                ready += waiting.pop(ds)
                if not corrupt:
                    phase("corrupt", None, seconds)
        while (ready or text) and len(running) < n_workers:
            job = ready.pop(0) if ready else text.pop(0)
            task = pool.submit(_job_task, plan, job, one, corruption_dirs, job.id in first_ids)
            running.add(task)
            results.append(task)
        if running and when_idle is not None and len(running) < n_workers and not (ready or text or waiting):
            when_idle()
            when_idle = None
        if running:
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for task in finished:
                pool.result(task)                    # a failure is raised now (the other tasks cancelled)
    return [pool.result(task) for task in results]


def _warm_up() -> None:
    """This process's own slow first steps, taken while a worker core idles at the end of the jobs instead of
    before the pool starts and in the benchmark: the report's libraries (scipy, seaborn, ~0.9 s) and what
    ``torch.optim`` loads on its first optimizer (~0.9 s, the benchmark's first step)."""
    import torch

    import robustbench_dgsa.report.build  # noqa: F401
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])


def _job_task(plan: Plan, job, progress: bool, corruption_dirs: dict[str, Path | None], rollout: bool,
              train: bool = True) -> tuple[int, float]:
    """One worker task: train and evaluate ``job`` (``train``), then (``rollout``) its rollout set; each status
    line names the job (several run at once). Returns (rollout sets made: 0 or 1, seconds they took)."""
    with log_prefix(job_tag(job)):
        if train:
            _train_and_evaluate(plan, job, progress, corruption_dirs)
        if rollout:
            t0 = time.monotonic()
            if _rollout(plan, job, False):
                return 1, time.monotonic() - t0
    return 0, 0.0


def job_tag(job) -> str:
    """``[dvit synthetic-vision seed 1]``: how a status line names its job."""
    return f"[{job.model} {job.dataset} seed {job.seed}]"


def _default_workers(preset: str, device: str) -> int:
    """One worker per CPU core (at most 8) on a CPU, except for the paper's models (one process, all threads);
    one on a GPU."""
    import torch
    if preset == "paper" or (device != "cpu" and torch.cuda.is_available()):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def _init_worker() -> None:
    """A pool worker (after util.procs.worker_init made it die with its parent): one torch thread, warnings as
    the CLI's one-line output."""
    from robustbench_dgsa.util.warnlines import install
    install()
    import torch
    torch.set_num_threads(1)


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    return fn(*args), time.monotonic() - t0


class _Pool:
    """Tasks in this process (one worker: each runs when submitted) or in a pool of fresh processes with one
    torch thread each. ``result`` raises a task's failure after cancelling the tasks not yet started."""

    def __init__(self, workers: int) -> None:
        self.workers, self.pool, self.futures = workers, None, []

    def __enter__(self) -> "_Pool":
        if self.workers > 1:
            import multiprocessing
            # "spawn": fresh interpreters (no forked torch / OpenMP state); workers inherit OMP_NUM_THREADS=1
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            from robustbench_dgsa.util.procs import worker_init
            # workers end with this process, even after kill -9 (armed before their heavy imports)
            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=worker_init,
                                            initargs=(os.getpid(), f"{__name__}:_init_worker"))
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        if self.pool is not None:
            f = self.pool.submit(fn, *args)
        else:                                          # one worker: run now (a failure is raised at once)
            f = Future()
            f.set_result(fn(*args))
        self.futures.append(f)
        return f

    def result(self, f: Future) -> Any:
        try:
            return f.result()
        except BaseException:
            for other in self.futures:
                other.cancel()
            raise

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
