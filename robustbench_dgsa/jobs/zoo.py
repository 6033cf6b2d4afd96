"""Build the model zoo from scratch: train, export float16 weights, evaluate the shipped weights, write cards.

    python -m robustbench_dgsa.jobs.zoo --data-root ../shared/data            # all six models (hours on 2 cores)
    python -m robustbench_dgsa.jobs.zoo --data-root ../shared/data --model dgvit

Per model (``zoo`` preset, seed 0): ViT / DViT / DGViT on CIFAR-10, Transformer / DT / DGT on IMDB.

1. train on the full official training split (``<work>/runs/<model>-<dataset>-s0``; resumes a killed run);
2. export the weights as float16 into ``<out>/<model>-<dataset>.safetensors`` (a suite checkpoint: model config,
   classes, preprocessing in the header);
3. evaluate *the exported file* on the full official test split — clean, and for image models all 19
   corruptions × 5 severities of a CIFAR-10-C-style test set regenerated once into ``<work>/corrupted/`` with
   the frost photographs of ``<data-root>/corruptions/frost`` — into ``<work>/store``;
4. write the card ``<out>/<model>-<dataset>.json`` (:class:`robustbench_dgsa.models.zoo.ZooCard`).

A model whose card matches its weights and whose evaluation rows are in the store is skipped, so the command
resumes after a kill. ``<out>`` defaults to the package's zoo folder (``robustbench_dgsa/zoo``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from robustbench_dgsa.models.zoo import CARD_VERSION, NUMBERS_FROM, ZOO_DIR, ZooCard, card_path, weights_digest
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.provenance import cpu_model
from robustbench_dgsa.util.progress import log

PRESET = "zoo"
SEED = 0
CORRUPTION_SEED = 0
DATASETS = {"image": "cifar10", "text": "imdb"}
MODELS = ("vit", "dvit", "dgvit", "transformer", "dt", "dgt")
COMMAND = "python -m robustbench_dgsa.jobs.zoo --data-root"


@dataclasses.dataclass
class ZooBuild:
    """Where one build reads and writes."""
    data_root: Path
    work: Path
    out: Path
    device: str = "cpu"
    progress: bool = True
    preset: str = PRESET                       # tests build a zoo of tiny models on the synthetic sets
    datasets: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DATASETS))
    refresh_cards: bool = False                # rewrite the cards of finished entries from their records

    @property
    def store(self) -> Path:
        return self.work / "store"


def build_zoo(data_root: str | Path, *, models: Sequence[str] = MODELS, work: str | Path = "zoo-build",
              out: str | Path | None = None, device: str = "cpu", progress: bool = True, preset: str = PRESET,
              datasets: dict[str, str] | None = None, refresh_cards: bool = False) -> list[ZooCard]:
    """Build (or finish building) the zoo entries of ``models``; returns their cards. ``refresh_cards``: rewrite
    the cards of finished entries from the run folder and the store (no training or evaluation is repeated)."""
    from robustbench_dgsa.models import get_model_config
    build = ZooBuild(Path(data_root), Path(work), Path(out) if out is not None else ZOO_DIR, device, progress,
                     preset, dict(datasets or DATASETS), refresh_cards)
    if not build.data_root.is_dir():
        raise UserError(f"data root not found: {build.data_root}")
    for name in models:
        get_model_config(name)                     # unknown names fail before any work
    build.out.mkdir(parents=True, exist_ok=True)
    return [build_entry(build, name) for name in models]


#: the shipped zoo was trained and evaluated in fp32: a build (or a resumed one, or a card refresh) pins it, so
#: its cards stay comparable whatever ``train.amp="auto"`` means on the building machine
ZOO_AMP = "off"


def build_entry(build: ZooBuild, model: str) -> ZooCard:
    """Train -> export -> evaluate -> card for one model (skipped when already complete)."""
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.engine.train import train
    from robustbench_dgsa.models import get_model_config

    cfg = resolve_config(get_model_config(model), build.datasets[get_model_config(model).modality], build.preset,
                         overrides={"data.data_root": str(build.data_root), "train.device": build.device})
    name = f"{model}-{cfg.data.dataset}"
    done = _finished_card(build, name)
    if done is not None and not build.refresh_cards:
        log(f"[zoo] {name}: complete (card matches weights); skipped")
        return done
    t0 = time.monotonic()
    result = train(cfg, SEED, build.work / "runs" / f"{name}-s{SEED}", store_dir=build.store, resume=True,
                   progress=build.progress, amp=ZOO_AMP)
    weights = build.out / f"{name}.safetensors"
    if done is not None:                       # refresh: the same weights and evaluation, a card rebuilt from them
        evaluation = _stored_evaluation(build.store, done.metrics["eval_run_id"])
        corrupted = _corruption_facts(build.work / "corrupted" / f"{build.datasets['image']}-c"
                                      if cfg.model.modality == "image" else None, build.data_root)
        seconds = float(done.training.get("build_seconds") or 0.0)
    else:
        export_fp16(result.checkpoint, weights)
        evaluation, corrupted = _evaluate_shipped(build, weights, cfg.model.modality)
        seconds = time.monotonic() - t0
    card = _card(name, cfg, build, result, weights, evaluation, corrupted, seconds)
    atomic.write_json(card_path(name, build.out), card.to_dict())
    log(f"[zoo] {name}: clean accuracy {card.metrics['clean_accuracy']:.4f}"
        + (f", mCA {card.metrics['mca']:.4f}" if "mca" in card.metrics else "") + f" -> {weights}")
    return card


def _finished_card(build: ZooBuild, name: str) -> ZooCard | None:
    from robustbench_dgsa import store
    from robustbench_dgsa.models.zoo import list_pretrained
    for card in list_pretrained(zoo_dir=build.out):
        weights = build.out / card.weights_file
        if card.name == name and weights.is_file() and weights_digest(weights) == card.weights_sha256 \
                and store.has_rows(build.store, card.metrics.get("eval_run_id")):
            return card
    return None


def export_fp16(checkpoint: Path, dest: Path) -> Path:
    """The checkpoint's weights as float16 (other dtypes kept), same header, written atomically to ``dest``."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    import torch

    with safe_open(str(checkpoint), framework="pt") as f:
        metadata = dict(f.metadata() or {})
    meta = json.loads(metadata.get("meta") or "{}")
    if isinstance(meta.get("run_config", {}).get("data"), dict):
        meta["run_config"]["data"]["data_root"] = None      # the build machine's folder means nothing elsewhere
    metadata["meta"] = json.dumps(meta)
    tensors = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous()
               for k, v in load_file(str(checkpoint)).items()}
    with atomic.atomic_path(dest) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
    return dest


def _corrupted_set(build: ZooBuild, dataset: str) -> Path:
    """The full test split under all 19 corruptions × 5 severities (regenerated once, real frost)."""
    import numpy as np
    from corruptions.layout import read_manifest, regenerate
    from corruptions.registry import resolve_corruptions

    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.data.locate import FROST_SUBDIR, frost_dir_for
    from robustbench_dgsa.util.progress import track

    out = build.work / "corrupted" / f"{dataset}-c"
    names = list(resolve_corruptions("all"))
    man = read_manifest(out) if out.is_dir() else None
    if man is not None and set(names) <= set(man.corruptions):
        return out
    frost = frost_dir_for(None, build.data_root)
    if frost is None:
        raise UserError(f"frost photographs not found: {build.data_root.joinpath(*FROST_SUBDIR)} (the zoo's mCA "
                        "uses the real frost textures)")
    data = load_dataset(dataset, "test", data_root=str(build.data_root))
    regenerate(np.asarray(data.x), np.asarray(data.y), out, names, [1, 2, 3, 4, 5], seed=CORRUPTION_SEED,
               frost=frost, progress=(lambda it, total=None, description="":
                                      track(it, total, description, enabled=build.progress)),
               input_description=f"{dataset} test split, all {len(data.y)} images")
    return out


def _evaluate_shipped(build: ZooBuild, weights: Path, modality: str):
    """The exported file on the whole official test split (not the preset's ``max_test``)."""
    from corruptions.registry import resolve_corruptions
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.engine.evaluate import evaluate
    image = modality == "image"
    n_test = len(load_dataset(build.datasets[modality], "test", data_root=str(build.data_root)).y)
    cdir = _corrupted_set(build, build.datasets["image"]) if image else None
    result = evaluate(weights, data_root=str(build.data_root), max_test=n_test,
                      corruptions=list(resolve_corruptions("all")) if image else None, severities=(1, 2, 3, 4, 5),
                      corruption_dir=cdir, store_dir=build.store, device=build.device, progress=build.progress,
                      amp=ZOO_AMP)
    return result, _corruption_facts(cdir, build.data_root)


def _corruption_facts(cdir: Path | None, data_root: Path) -> dict[str, Any]:
    """What the corrupted test set was: regenerated, seed, frost photographs used (from its manifest)."""
    if cdir is None:
        return {}
    from corruptions.layout import read_manifest
    man = read_manifest(cdir)
    return {"corruption_set": "CIFAR-10-C-style, regenerated by dgsa-bench corrupt (seed "
                              f"{man.data.get('seed')}; the 8 deterministic corruptions follow the reference "
                              "generator exactly, the 11 random ones in distribution)",
            "frost_source": _portable(str(man.frost_source), data_root),
            "frost_files_sha256": man.data.get("frost_files_sha256")}


def _portable(text: str, data_root: Path) -> str:
    """``text`` with the build machine's data folder written as DATA_ROOT."""
    for root in (str(data_root.resolve()), str(data_root)):
        text = text.replace(root, "DATA_ROOT")
    return text


@dataclasses.dataclass
class _StoredEvaluation:
    run_id: str
    table: Any


def _stored_evaluation(store_dir: Path, run_id: str) -> _StoredEvaluation:
    """An evaluation's table (condition, severity, accuracy, n, source) read back from the store."""
    from robustbench_dgsa import store
    rows = store.load_results(store_dir)
    acc = rows[(rows.run_id == run_id) & (rows.metric == "accuracy")]
    if acc.empty:
        raise UserError(f"evaluation {run_id} is not in the store {store_dir}")
    table = acc[["condition", "severity", "value", "n", "source"]].rename(columns={"value": "accuracy"})
    return _StoredEvaluation(run_id, table.reset_index(drop=True))


def _card(name: str, cfg: Any, build: ZooBuild, result: Any, weights: Path, evaluation: Any,
          corrupted: dict[str, Any], seconds: float) -> ZooCard:
    import torch
    from safetensors.torch import load_file
    from robustbench_dgsa.util.provenance import git_state, package_version, package_versions

    tensors = load_file(str(weights))
    commit, dirty = git_state()
    return ZooCard(
        name=name, model=cfg.model.name, dataset=cfg.data.dataset, modality=cfg.model.modality,
        params=int(sum(t.numel() for t in tensors.values())), weights_file=weights.name,
        weights_sha256=weights_digest(weights), weights_bytes=weights.stat().st_size,
        dtype=str(next(iter(tensors.values())).dtype).removeprefix("torch."),
        metrics=_metrics(evaluation, build.data_root) | corrupted,
        training=_training(cfg, build, result, seconds),
        provenance={"package_version": package_version(), "commit": commit, "dirty": dirty,
                    "versions": package_versions(), "torch_threads": torch.get_num_threads(),
                    "date": time.strftime("%Y-%m-%d", time.gmtime())},
        config=cfg.to_dict() | {"data": {k: v for k, v in cfg.to_dict()["data"].items() if k != "data_root"}},
        card_version=CARD_VERSION)


def _metrics(evaluation: Any, data_root: Path) -> dict[str, Any]:
    """Clean accuracy and, for image models, mCA (15 benchmark corruptions × 5) and the 19 × 5 mean."""
    from corruptions.registry import resolve_corruptions
    t = evaluation.table
    clean = t[t.condition == "clean"].iloc[0]
    out: dict[str, Any] = {"clean_accuracy": float(clean.accuracy), "n_test": int(clean.n),
                           "eval_run_id": evaluation.run_id, "test_source": _portable(str(clean.source), data_root)}
    corr = t[t.condition != "clean"]
    if len(corr):
        bench = corr[corr.condition.isin(resolve_corruptions("benchmark"))]
        extra = corr[~corr.condition.isin(resolve_corruptions("benchmark"))]
        out.update(mca=float(bench.accuracy.mean()), mca_conditions=int(len(bench)),
                   mean_accuracy_all19=float(corr.accuracy.mean()), conditions_all19=int(len(corr)),
                   mean_accuracy_extra4=float(extra.accuracy.mean()) if len(extra) else None,
                   corrupted_images_per_condition=int(corr.n.min()),
                   corruption_source=str(corr.source.iloc[0]))
        out["per_corruption"] = {c: round(float(g.accuracy.mean()), 6) for c, g in corr.groupby("condition")}
    return out


def _training(cfg: Any, build: ZooBuild, result: Any, seconds: float) -> dict[str, Any]:
    return {"command": f"{COMMAND} DATA_ROOT --model {cfg.model.name}",   # DATA_ROOT: the build's --data-root
            "preset": build.preset, "seed": SEED, "numbers_from": NUMBERS_FROM,
            "epochs": int(cfg.train.epochs), "train_run_id": result.run_id, "config_hash": result.config_hash,
            "train_seconds": result.final.get("train_seconds"), "build_seconds": round(seconds, 1),
            "n_train": int(result.history[-1]["n_train"]) if result.history else None,
            "val_accuracy": result.final.get("val_accuracy"),
            "machine": f"{platform.machine()}, {cpu_model()}, {os.cpu_count()} cores",
            "torch_threads": _torch_threads(),
            "curve": [{k: h.get(k) for k in ("epoch", "train_loss", "train_accuracy", "val_accuracy", "seconds")}
                      for h in result.history],
            "data": _data_files(cfg.data.dataset, Path(cfg.data.data_root))}


def _torch_threads() -> int:
    import torch
    return int(torch.get_num_threads())


def _data_files(dataset: str, data_root: Path) -> dict[str, Any]:
    """The files the training and test splits were read from (relative to the data root) with SHA-256."""
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.util.provenance import sha256_file
    out: dict[str, Any] = {"dataset": dataset, "files": {}, "source": {}}
    for split in ("train", "test"):
        source = str(load_dataset(dataset, split, data_root=str(data_root)).source)
        out["source"][split] = _portable(source, data_root)
        path = Path(source.split(" (")[0])
        if path.is_file():
            rel = path.resolve().relative_to(data_root.resolve()) if path.resolve().is_relative_to(
                data_root.resolve()) else path.name
            out["files"][str(rel)] = sha256_file(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustbench_dgsa.jobs.zoo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, help="Folder with cifar10 / imdb in their official layouts "
                                                           "and corruptions/frost/.")
    parser.add_argument("--model", default=",".join(MODELS), help="Comma list of models (default: all six).")
    parser.add_argument("--work", default="zoo-build", help="Runs, store and corrupted test set (default "
                                                            "zoo-build).")
    parser.add_argument("--out", default=None, help="Where weights and cards go (default: the package's zoo).")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N.")
    parser.add_argument("--refresh-cards", action="store_true",
                        help="Rewrite the cards of finished entries from their run folders and the store (nothing "
                             "is trained or evaluated again).")
    parser.add_argument("-q", "--quiet", action="store_true", help="No progress bars.")
    args = parser.parse_args(argv)
    try:
        build_zoo(args.data_root, models=[m for m in args.model.split(",") if m.strip()], work=args.work,
                  out=args.out, device=args.device, progress=not args.quiet, refresh_cards=args.refresh_cards)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
