"""Evaluate a checkpoint: clean accuracy, accuracy per (corruption, severity), accuracy under text noise.

    result = evaluate("runs/vit-cifar10-s0/checkpoint.safetensors", corruptions=["fog", "snow"])

Everything goes to the results store (kind="eval"), with model / seed / config_hash taken from the checkpoint:

* ``condition="clean", severity=0``, metric ``accuracy`` (value in [0, 1]) with ``n``;
* per image corruption and severity: ``accuracy``, ``source`` = "official" / "regenerated" (read from a
  CIFAR-C directory, or from an ImageNet-C / Tiny-ImageNet-C folder tree ``<corruption>/<severity>/<wnid>/<file>``:
  matched to the test images by name, or, where its files are other images than the test split's (the published
  Tiny-ImageNet-C), read as an image folder labelled by its ``<wnid>`` folders, ``n`` and the predictions'
  ``index`` then counting its own files) or "on-the-fly" (generated here with :func:`corruptions.api.corrupt`,
  ``corruption_seed``);
* per text-noise type and severity: ``accuracy`` plus the realised ``cer`` and ``wer`` (docs/METHODS.md, Text noise);
* per-example predictions of every condition (``RunWriter.write_predictions``; columns condition, severity,
  index, label, pred), so flip rates and error consistency (docs/METHODS.md, Metrics) need no re-run.

Rows are written together at the end, so a killed evaluation leaves no partial rows behind, and a failure
while writing removes what was written (:meth:`RunWriter.discard`): the store is left as it was found. Images are
corrupted and classified chunk by chunk (bounded memory); on-the-fly randomness is keyed per image index, so
the chunking does not change the result.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
from corruptions.api import corrupt
from corruptions.frost import load_frost_textures
from corruptions.layout import (SUMS_NAME, check_corrupted, condition_files, condition_sums, is_folder_layout,
                                load_corrupted, read_images)
from corruptions.text import TEXT_NOISE_TYPES, add_text_noise, realised_error_rates

from robustbench_dgsa import store
from robustbench_dgsa.engine.threat_models import is_corruptions
from robustbench_dgsa.util.errors import CheckpointError, DataError, UserError
from robustbench_dgsa.data import load_dataset
from robustbench_dgsa.engine.predict import (amp_of, compiled, dataset_info, predict_raw, prepare, preprocess_from_meta,
                                             resolve_device, resolve_precision, warn_if_emulated,
                                             select_test, subset_label, subset_note)
from robustbench_dgsa.models.checkpoint import load_checkpoint
from robustbench_dgsa.util.progress import log, track
from robustbench_dgsa.util.provenance import sha256_file

TABLE_COLUMNS = ["condition", "severity", "accuracy", "n", "cer", "wer", "source"]


@dataclass
class EvalResult:
    run_id: str
    table: pd.DataFrame          # condition, severity, accuracy, n, cer, wer, source
    store_dir: Path | None = None
    examples: str = ""           # which test examples, in words ("first 500 of 10,000", "stratified 100 of ...")
    dataset_family: str | None = None  # cifar10 / cifar100 / imagenet / tiny-imagenet when known (dataset_family)

    def summary(self) -> dict[str, Any]:
        t = self.table
        clean = t[t.condition == "clean"]
        out: dict[str, Any] = {"run_id": self.run_id, "examples": self.examples,
                               "dataset_family": self.dataset_family,
                               "clean_accuracy": float(clean.accuracy.iloc[0]) if len(clean) else None}
        corr = t[t.condition != "clean"]
        if len(corr):
            out["mean_corrupted_accuracy"] = float(corr.accuracy.mean())
        out["table"] = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
                        for row in t.to_dict(orient="records")]
        return out


@dataclass
class EvalSubject:
    """What is evaluated: a model, how raw examples become its input, and how its rows name it.

    ``preprocess`` is :mod:`robustbench_dgsa.engine.predict`'s record (image: mean/std/image_size/in_chans;
    text: vocab/max_len, or a ``tokenizer`` callable). ``num_classes`` None = not known in advance (checked from
    the model's output instead). ``provenance``: extra fields for the run record (checkpoint and its hash, or
    parameter count and weights hash).
    """
    model: Any
    preprocess: dict[str, Any]
    name: str
    modality: str
    num_classes: int | None = None
    config_hash: str = ""
    seed: int = -1
    epoch: int = -1
    trained_on: str | None = None
    classes: list[str] | None = None
    provenance: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalPlan:
    """Which data and conditions: one dataset split (``max_test`` examples chosen as ``subset`` says: the first N
    by default, see :func:`~robustbench_dgsa.engine.predict.select_test`), image corruptions from
    ``corruption_dir`` or on the fly, text noise, all at ``severities``."""
    dataset: str
    split: str = "test"
    data_root: str | Path | None = None
    max_test: int | None = None
    subset: str = "first"
    corruptions: Sequence[str] | None = None
    severities: Sequence[int] = (1, 2, 3, 4, 5)
    corruption_dir: str | Path | None = None
    text_noise: Sequence[str] | None = None
    corruption_seed: int = 0
    frost_dir: str | Path | None = None
    batch_size: int = 256
    chunk: int = 2000
    error_rate_sample: int = 2000
    progress: bool = True
    amp: str = "auto"        # precision of the forward passes (engine.predict.resolve_precision), recorded in rows
    compile: bool = False    # the forward through torch.compile (engine.predict.compiled)


def evaluate(checkpoint: str | Path, *, dataset: str | None = None, data_root: str | Path | None = None,
             split: str = "test", max_test: int | None = None, subset: str | None = None,
             corruptions: Sequence[str] | None = None,
             severities: Sequence[int] = (1, 2, 3, 4, 5), corruption_dir: str | Path | None = None,
             text_noise: Sequence[str] | None = None, corruption_seed: int = 0,
             store_dir: str | Path | None = None, batch_size: int = 256, device: str = "auto",
             progress: bool = True, chunk: int = 2000, error_rate_sample: int = 2000,
             frost_dir: str | Path | None = None, amp: str | None = None, compile_model: bool = False,
             threat_model: str = "corruptions", eps: float | None = None, attack: str | None = None,
             attack_seed: int = 0, eps_ladder: bool = False, min_norm: bool = False) -> Any:
    """Evaluate ``checkpoint`` on ``dataset`` (default: the one it was trained on). See the module docstring.

    ``amp``: the precision of the forward passes (default: the run's ``train.amp``, resolved on this machine:
    "auto" is bf16 where the CPU computes it natively); the resolved precision is recorded in every row and in
    the run record. ``compile_model``: run the forward through ``torch.compile`` (a warning and the plain forward
    where it cannot compile).

    ``store_dir`` defaults to ``<checkpoint folder>/store`` (where ``train`` put its rows by default).
    ``max_test`` and ``subset`` (first N, stratified, auto) default to the run's ``data.max_test`` and
    ``data.test_subset`` when ``dataset`` is the training dataset, else to all / "first".
    ``error_rate_sample``: realised CER/WER are measured on at most this many examples spread evenly over the
    test set (Levenshtein on long reviews is slow); the rows' ``n`` says how many.
    ``frost_dir``: the frost photographs for on-the-fly ``frost`` (default: ``<data_root>/corruptions/frost`` when
    it exists, else the corruption library's default); the source used is recorded in the provenance.

    Loads the checkpoint, then runs the same core as :func:`robustbench_dgsa.engine.benchmark.benchmark`
    (:func:`evaluate_subject`).

    ``threat_model="Linf"`` / ``"L2"`` or a registered threat model (``eps``, ``attack``, ``attack_seed``,
    ``eps_ladder``, ``min_norm``): its attack (AutoAttack for Linf / L2) instead of corruptions (:func:`robustbench_dgsa.engine.adversarial.evaluate_checkpoint`); returns
    its :class:`~robustbench_dgsa.engine.adversarial.AdversarialRun`.
    """
    if not is_corruptions(threat_model) or eps is not None or eps_ladder or min_norm:
        from robustbench_dgsa.engine.adversarial import evaluate_checkpoint
        return evaluate_checkpoint(checkpoint, dataset=dataset, data_root=data_root, max_test=max_test,
                                   threat_model=threat_model, eps=eps, attack=attack, attack_seed=attack_seed,
                                   ladder=eps_ladder, min_norm=min_norm, store_dir=store_dir,
                                   batch_size=batch_size, device=str(resolve_device(device)))
    checkpoint = Path(checkpoint)
    if not checkpoint.exists():
        raise CheckpointError(f"checkpoint not found: {checkpoint}")
    dev = resolve_device(device)
    model, meta = load_checkpoint(checkpoint, map_location=dev)
    run_cfg = meta.get("run_config") or {}
    trained_on = meta.get("dataset")
    dataset = dataset or trained_on
    if not dataset:
        raise CheckpointError(f"checkpoint {checkpoint} does not say which dataset it was trained on; "
                              "name it (dataset=NAME)", options="dataset")
    if max_test is None and dataset == trained_on:
        max_test = (run_cfg.get("data") or {}).get("max_test")
    if subset is None:
        subset = str((run_cfg.get("data") or {}).get("test_subset") or "first") if dataset == trained_on else "first"
    if data_root is None and dataset == trained_on:
        data_root = (run_cfg.get("data") or {}).get("data_root")
    cfg = model.config
    subject = EvalSubject(
        model=model, preprocess=preprocess_from_meta(meta), name=str(meta.get("model") or cfg.name),
        modality=cfg.modality, num_classes=int(cfg.num_classes), config_hash=str(meta.get("config_hash", "")),
        seed=int(meta.get("seed", -1)), epoch=int(meta.get("epoch", -1)), trained_on=trained_on,
        classes=list(meta["classes"]) if meta.get("classes") else None,
        provenance={"checkpoint": str(checkpoint.resolve()), "checkpoint_sha256": sha256_file(checkpoint),
                    "train_run_id": meta.get("run_id")})
    plan = EvalPlan(dataset=dataset, split=split, data_root=data_root, max_test=max_test, subset=subset,
                    corruptions=corruptions, severities=severities, corruption_dir=corruption_dir, text_noise=text_noise,
                    corruption_seed=corruption_seed, frost_dir=frost_dir, batch_size=batch_size, chunk=chunk,
                    error_rate_sample=error_rate_sample, progress=progress,
                    amp=amp or str((run_cfg.get("train") or {}).get("amp") or "auto"), compile=bool(compile_model))
    store_dir = Path(store_dir) if store_dir is not None else checkpoint.parent / "store"
    return evaluate_subject(subject, plan, store_dir, device=dev)


@dataclass
class _EvalData:
    y: np.ndarray          # labels of the selected examples
    idx: np.ndarray        # their indices in the split
    raw_all: Any           # the whole split (uint8 images or texts)
    raw: Any               # the selected examples
    source: str            # the data's own description
    n_classes: int = 0
    examples: str = ""     # which examples, in words (subset_label)
    names: Any = None      # per example of the split, its <wnid>/<file> in a -C folder layout (None: not named)
    classes: tuple = ()    # the split's class names (a -C folder tree's <wnid> folders are looked up in them)


def _load_eval_data(subject: EvalSubject, plan: EvalPlan) -> _EvalData:
    """Load and check the split: modality, number of classes, conditions that fit the modality."""
    info = dataset_info(plan.dataset)
    if info.modality != subject.modality:
        raise UserError(f"{subject.name} is a {subject.modality} model but dataset {plan.dataset!r} is "
                        f"{info.modality}")

    def check_classes(n: int) -> None:
        if subject.num_classes is not None and int(n) != int(subject.num_classes):
            raise UserError(f"model {subject.name} has {subject.num_classes} classes but dataset "
                            f"{plan.dataset!r} has {n}; evaluate it on a dataset with the same classes")
    if info.num_classes:
        check_classes(info.num_classes)
    streamed = {"stream": True} if info.streams and subject.modality == "image" else {}
    data = load_dataset(plan.dataset, plan.split, data_root=plan.data_root, download=False, **streamed)
    check_classes(len(data.classes))
    if (subject.trained_on and plan.dataset != subject.trained_on and subject.classes
            and list(subject.classes) != list(data.classes)):
        log(f"[evaluate] note: class names of {plan.dataset!r} differ from the training data's; labels are "
            "compared by index")
    if plan.corruptions and subject.modality != "image":
        raise UserError("image corruptions apply to image models; use text noise (text_noise=...) for text models",
                        options="text_noise")
    if plan.text_noise and subject.modality != "text":
        raise UserError("text noise applies to text models; use image corruptions (corruptions=...) for image "
                        "models", options="corruptions")
    y_full = np.asarray(data.y, dtype=np.int64)
    idx = select_test(y_full, plan.max_test, plan.subset)
    note = subset_note(y_full, idx)
    if note:
        log(f"[evaluate] note: {note}")
    if streamed:  # a streamed set (ImageNet): decode the chosen images only
        raw = data.read(idx).x
        raw_all = _Chosen(raw, idx)
    else:
        raw_all = np.asarray(data.x) if subject.modality == "image" else list(data.texts)
        raw = raw_all[idx] if subject.modality == "image" else [raw_all[i] for i in idx]
    return _EvalData(y_full[idx], idx, raw_all, raw, str(getattr(data, "source", "") or ""), len(data.classes),
                     subset_label(y_full, idx), getattr(data, "names", None), tuple(data.classes))


class _Chosen:
    """The chosen images of a split read as the whole split (``x_all[indices]``), for a split never decoded whole:
    only the chosen indices (sorted) can be asked for."""

    def __init__(self, x: np.ndarray, idx: np.ndarray) -> None:
        self.x, self.idx = x, np.asarray(idx, dtype=np.int64)

    def __getitem__(self, indices: Any) -> np.ndarray:
        pos = np.searchsorted(self.idx, np.asarray(indices, dtype=np.int64))
        return self.x[pos]


def _check_output_classes(subject: EvalSubject, data: _EvalData, dev) -> None:
    """A model of unknown class count (outside models): one example through it, its logits must be (1, C)."""
    x, mask = prepare(data.raw[:1], subject.preprocess)
    was_training = subject.model.training
    subject.model.eval()
    try:
        with torch.no_grad():
            out = subject.model(x.to(dev), key_padding_mask=mask.to(dev)) if mask is not None else subject.model(
                x.to(dev))
    except (RuntimeError, AssertionError, ValueError, TypeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"model {subject.name} fails on one input of shape {tuple(x.shape)} "
                        f"({_input_words(subject.preprocess)}): {first}; if it expects another input size or "
                        "normalisation, ask for timm's (timm_norm) or give a Preprocess") from None
    finally:
        subject.model.train(was_training)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 1:
        raise UserError(f"model {subject.name} must return logits of shape (N, classes); got "
                        f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    if int(out.shape[1]) != data.n_classes:
        raise UserError(f"model {subject.name} returns {int(out.shape[1])} logits but dataset has "
                        f"{data.n_classes} classes; build it with num_classes={data.n_classes}")


class _Recorder:
    """Collects store rows, per-example predictions and the returned table, one condition at a time."""

    def __init__(self, y: np.ndarray, idx: np.ndarray):
        self.y, self.idx = y, idx
        self.rows: list[dict[str, Any]] = []
        self.preds: list[tuple[str, int, np.ndarray, np.ndarray, np.ndarray]] = []   # condition, severity, idx, y, pred
        self.table: list[dict[str, Any]] = []

    def __call__(self, condition: str, severity: int, pred: np.ndarray, source: str,
                 extra: dict[str, float] | None = None, n_rates: int | None = None,
                 own: tuple[np.ndarray, np.ndarray] | None = None) -> float:
        """``own``: (labels, indices) of a condition whose examples are not the test split's (a -C folder tree
        read as an image folder)."""
        (y, idx), n = (own or (self.y, self.idx)), len((own or (self.y,))[0])
        acc = float((pred == y).mean()) if n else float("nan")
        self.rows.append(dict(condition=condition, severity=severity, metric="accuracy", value=acc, n=n,
                              source=source))
        for name, value in (extra or {}).items():
            self.rows.append(dict(condition=condition, severity=severity, metric=name, value=float(value),
                                  n=n if n_rates is None else n_rates, source=source))
        self.preds.append((condition, severity, idx, y, pred))
        self.table.append({"condition": condition, "severity": severity, "accuracy": acc, "n": n,
                           "cer": (extra or {}).get("cer", np.nan), "wer": (extra or {}).get("wer", np.nan),
                           "source": source})
        return acc

    def predictions(self) -> pd.DataFrame:
        """Every condition's per-example predictions, one block after another (built once: a frame per condition
        cost about a millisecond each)."""
        counts = [len(p[2]) for p in self.preds]
        return pd.DataFrame({
            "condition": np.repeat(np.array([p[0] for p in self.preds], dtype=object), counts),
            "severity": np.repeat(np.array([p[1] for p in self.preds], dtype=np.int8), counts),
            "index": np.concatenate([p[2] for p in self.preds]).astype(np.int32),
            "label": np.concatenate([p[3] for p in self.preds]).astype(np.int16),
            "pred": np.concatenate([p[4] for p in self.preds]).astype(np.int16)})


def evaluate_subject(subject: EvalSubject, plan: EvalPlan, store_dir: str | Path, *,
                     device: str | Any = "auto") -> EvalResult:
    """The one evaluation core: clean, then every corruption × severity, then every text noise × severity; all
    rows, predictions and provenance written to ``store_dir`` at the end (nothing partial on failure)."""
    t_start = time.monotonic()
    dev = resolve_device(device)
    precision = resolve_precision(dev, plan.amp)
    warn_if_emulated(dev, precision)
    severities = _check_severities(plan.severities)
    if Path(store_dir).is_dir():
        store.load_results(store_dir)  # a malformed store is refused before the work, not after it
    data = _load_eval_data(subject, plan)
    frost = _check_conditions(plan, subject, data, severities)  # bad corruption folders / frost: before any work
    if subject.num_classes is None and len(data.y):
        _check_output_classes(subject, data, dev)
    base = dict(kind="eval", model=subject.name, config_hash=subject.config_hash, dataset=plan.dataset,
                split=plan.split, seed=int(subject.seed), epoch=int(subject.epoch), precision=precision)
    record = _Recorder(data.y, data.idx)
    kw = dict(batch_size=plan.batch_size, device=dev, amp=amp_of(precision), chunk=plan.chunk,
              forward=compiled(subject.model, plan.compile, "the evaluation forward"))
    pre, model = subject.preprocess, subject.model

    pred, _ = predict_raw(model, data.raw, pre, **kw)
    acc = record("clean", 0, pred, data.source)
    log(f"[evaluate] {subject.name} seed {subject.seed} on {plan.dataset}/{plan.split} ({data.examples} examples): "
        f"clean accuracy {acc:.4f} ({precision})")
    frost_source = (_run_corruptions(record, subject, plan, data, severities, dev, kw, frost)
                    if plan.corruptions else "")
    if plan.text_noise:
        _run_text_noise(record, subject, plan, data, severities, kw)

    store_dir = Path(store_dir)
    run_id = store.new_run_id("eval")
    writer = store.RunWriter(store_dir, run_id, base=base)
    try:  # a failure while writing removes what this run wrote: the store is left as it was found
        _write_run(writer, record, subject, plan, data, severities, dev, frost_source, t_start)
        store.compact(store_dir)
    except BaseException:
        writer.discard()
        raise
    out = pd.DataFrame(record.table, columns=TABLE_COLUMNS)
    if len(out) > 1:
        log(f"[evaluate] {len(out) - 1} corrupted conditions: mean accuracy "
            f"{out[out.condition != 'clean'].accuracy.mean():.4f} -> {store_dir}")
    return EvalResult(run_id, out, store_dir, data.examples, dataset_family(plan.dataset, plan.corruption_dir))


def recorded_result(store_dir: str | Path, run_id: str) -> EvalResult | None:
    """The :class:`EvalResult` of evaluation run ``run_id`` as the store holds it (its run record and every row
    written whole: :func:`_write_run` writes the record first, then all rows at once), None when it is not
    there complete. What a job reuses instead of evaluating its checkpoint a second time."""
    import json
    store_dir = Path(store_dir)
    rows_file = store.rows_path(store_dir, run_id)
    try:
        record = json.loads(store.run_record_path(store_dir, run_id).read_text(encoding="utf-8"))
        raw = rows_file.read_bytes()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not raw.endswith(b"\n") or not isinstance(record, dict) or record.get("kind") != "eval":
        return None                                  # rows torn by a kill, or not an evaluation
    table: dict[tuple[str, int], dict[str, Any]] = {}
    for row in store.load_results(store_dir).query("run_id == @run_id").to_dict(orient="records"):
        cell = table.setdefault((row["condition"], int(row["severity"])), {
            "condition": row["condition"], "severity": int(row["severity"]), "accuracy": np.nan, "n": -1,
            "cer": np.nan, "wer": np.nan, "source": row["source"]})
        if row["metric"] in ("accuracy", "cer", "wer"):
            cell[row["metric"]] = float(row["value"])
        if row["metric"] == "accuracy":
            cell["n"] = int(row["n"])
    if not table or ("clean", 0) not in table:
        return None
    out = pd.DataFrame(list(table.values()), columns=TABLE_COLUMNS)
    return EvalResult(run_id, out, store_dir, str(record.get("examples") or ""), record.get("dataset_family"))


def _input_words(pre: dict[str, Any]) -> str:
    """The input convention of an image preprocess record, in words (run records, reports, errors)."""
    if pre.get("modality") != "image":
        return "token ids"
    if all(float(m) == 0.0 for m in pre["mean"]) and all(float(v) == 1.0 for v in pre["std"]):
        size = pre.get("image_size")
        return "raw [0, 1] input" + (f", resized to {size}x{size}" if size else ", at the data's own size")
    return (f"normalised input: mean {[round(float(m), 4) for m in pre['mean']]}, std "
            f"{[round(float(v), 4) for v in pre['std']]}, size {pre.get('image_size') or 'as the data'}")


def dataset_family(dataset: str, corruption_dir: str | Path | None) -> str | None:
    """cifar10 / cifar100 / imagenet / tiny-imagenet when known: the dataset's own name, else the corruption
    folder's (official ``CIFAR-100-C``, ``Tiny-ImageNet-C``, ..., or a regenerated set whose manifest says
    CIFAR-100-C-style, ImageNet-C-style, ...); None when unknown."""
    name = str(dataset).lower()
    if name in ("cifar10", "cifar100", "imagenet", "tiny-imagenet"):
        return name
    if corruption_dir is None:
        return None
    d = Path(corruption_dir)
    words = d.name.upper()
    try:
        import json
        words += " " + str(json.loads((d / "manifest.json").read_text(encoding="utf-8")).get("description", ""))
    except (OSError, ValueError, AttributeError):
        pass
    words = words.upper().replace("_", "-")
    if "TINY-IMAGENET-C" in words or "TINYIMAGENET-C" in words:
        return "tiny-imagenet"
    if "IMAGENET-C" in words:
        return "imagenet"
    if "CIFAR-100-C" in words or "CIFAR100-C" in words:
        return "cifar100"
    if "CIFAR-10-C" in words or "CIFAR10-C" in words:
        return "cifar10"
    return None


def _write_run(writer: "store.RunWriter", record: "_Recorder", subject: "EvalSubject", plan: "EvalPlan",
               data: "_EvalData", severities: list[int], dev, frost_source: str, t_start: float) -> None:
    """Predictions, provenance, then all rows at once."""
    from robustbench_dgsa.util.paths import relative_to
    writer.write_predictions(plan.split, record.predictions())
    writer.write_provenance({"kind": "eval", **subject.provenance, "model": subject.name, "seed": subject.seed,
                             "config_hash": subject.config_hash, "dataset": plan.dataset,
                             "trained_on": subject.trained_on, "split": plan.split, "max_test": plan.max_test,
                             "test_subset": plan.subset, "examples": data.examples,
                             "input": _input_words(subject.preprocess),
                             "dataset_family": dataset_family(plan.dataset, plan.corruption_dir),
                             "n": int(len(data.y)), "data_source": data.source,
                             "data_root": str(plan.data_root or ""),
                             "corruptions": list(plan.corruptions or []), "severities": list(severities),
                             # relative to the store (the report reads its manifest from there)
                             "corruption_dir": relative_to(plan.corruption_dir, writer.store_dir)
                             if plan.corruption_dir else "",
                             "corruption_seed": int(plan.corruption_seed),
                             "text_noise": list(plan.text_noise or []), "device": str(dev),
                             "precision": resolve_precision(dev, plan.amp), "compiled": bool(plan.compile),
                             "frost_source": frost_source,
                             "wall_seconds": round(time.monotonic() - t_start, 3)})
    writer.add_rows(record.rows)


def _check_conditions(plan: EvalPlan, subject: EvalSubject, data: _EvalData, severities: list[int]):
    """Everything the corrupted conditions need, checked before any evaluation: each requested corruption and
    severity of ``plan.corruption_dir`` (listed, manifest SHA-256, uint8 images, labels that cover and match the
    test examples: :func:`corruptions.layout.check_corrupted`), or the frost photographs for on-the-fly frost.
    Returns the frost textures (None when not needed)."""
    if not plan.corruptions or subject.modality != "image":
        return None
    if not plan.corruption_dir:
        return _frost_textures(plan.frost_dir, plan.data_root) if "frost" in plan.corruptions else None
    d = Path(plan.corruption_dir)
    _corruption_source(d)
    if is_folder_layout(d):
        for c in plan.corruptions:
            for s in severities:
                _folder_selection(d, c, s, data, plan)
        return None
    for c in plan.corruptions:
        y_c = check_corrupted(d, c, severities, verify=True)
        _check_dir_labels(d, c, y_c, data.idx, data.y)
    return None


def _check_dir_labels(corruption_dir: Path, corruption: str, y_c: np.ndarray | None, idx: np.ndarray,
                      y: np.ndarray) -> None:
    """The labels of a corruption folder's block cover the selected test examples and equal their labels."""
    if y_c is None:
        raise DataError(f"{corruption_dir}: {corruption} has no labels, so its images cannot be matched to the "
                        "test split")
    y_c = np.asarray(y_c, dtype=np.int64)
    if len(y_c) <= int(idx.max(initial=-1)):
        raise DataError(f"{corruption_dir}: {corruption} has {len(y_c)} images per severity, fewer than the test "
                        f"split needs ({int(idx.max()) + 1})")
    if not np.array_equal(y_c[idx], y):
        raise DataError(f"{corruption_dir}: labels of {corruption} do not match the test split of the dataset "
                        "(wrong dataset or a different image order)")


def _run_corruptions(record: _Recorder, subject: EvalSubject, plan: EvalPlan, data: _EvalData,
                     severities: list[int], dev, kw: dict[str, Any], frost=None) -> str:
    """Every corruption × severity, from ``plan.corruption_dir`` or on the fly (``frost``: the textures checked
    by :func:`_check_conditions`); returns the frost source."""
    corruptions = list(plan.corruptions or [])
    cells = [(c, s) for c in corruptions for s in severities]
    source = _corruption_source(plan.corruption_dir) if plan.corruption_dir else "on-the-fly"
    model, pre = subject.model, subject.preprocess
    for c, s in track(cells, description="corruptions", enabled=plan.progress):
        if plan.corruption_dir and is_folder_layout(plan.corruption_dir):
            names, own = _folder_selection(Path(plan.corruption_dir), c, s, data, plan)
            pred = _predict_from_folder(model, pre, Path(plan.corruption_dir), c, s, names, **kw)
            record(c, s, pred, source, own=own)
            continue
        if plan.corruption_dir:
            pred = _predict_from_dir(model, pre, Path(plan.corruption_dir), c, s, data.idx, data.y, **kw)
        else:
            pred = _predict_on_the_fly(model, pre, data.raw_all, data.idx, c, s, plan.corruption_seed, dev,
                                       frost=frost if c == "frost" else None, **kw)
        record(c, s, pred, source)
    return str(getattr(frost, "source", "")) if frost is not None else ""


def _run_text_noise(record: _Recorder, subject: EvalSubject, plan: EvalPlan, data: _EvalData,
                    severities: list[int], kw: dict[str, Any]) -> None:
    unknown = [t for t in plan.text_noise or [] if t not in TEXT_NOISE_TYPES]
    if unknown:
        raise UserError(f"unknown text noise type(s) {', '.join(unknown)} "
                        f"(valid: {', '.join(TEXT_NOISE_TYPES)})")
    cells = [(t, s) for t in plan.text_noise or [] for s in severities]
    raw_key = _texts_key(data.raw, data.idx)
    for t, s in track(cells, description="text noise", enabled=plan.progress):
        noisy, rates = _noisy_texts(data.raw, raw_key, t, s, plan.corruption_seed, data.idx, plan.error_rate_sample)
        pred, _ = predict_raw(subject.model, noisy, subject.preprocess, **kw)
        record(t, s, pred, "on-the-fly", {"cer": rates["cer"], "wer": rates["wer"]},
               n_rates=int(rates["n_measured"]))


# Noisy texts and their realised CER/WER depend only on the texts, the noise, the seed and the indices, not on
# the model: a process that evaluates several models on one test set (a sweep or reproduce worker) computes
# them once (on 20 Newsgroups' long documents they cost more than the model). Memory is bounded: test sets of
# at most 8 M characters, at most 256 entries and 500 M characters in all (oldest dropped first).
_NOISE_CACHE: dict[tuple, tuple[list[str], dict[str, float]]] = {}
_NOISE_CACHE_MAX_CHARS, _NOISE_CACHE_ENTRIES, _NOISE_CACHE_TOTAL_CHARS = 8_000_000, 256, 500_000_000


def _texts_key(texts: list[str], idx: np.ndarray) -> str | None:
    if sum(map(len, texts)) > _NOISE_CACHE_MAX_CHARS:
        return None
    h = hashlib.sha256(np.ascontiguousarray(idx, dtype=np.int64).tobytes())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _noisy_texts(raw: list[str], raw_key: str | None, noise: str, severity: int, seed: int, idx: np.ndarray,
                 sample: int) -> tuple[list[str], dict[str, float]]:
    """Noisy texts and their realised CER/WER (Levenshtein, on at most ``sample`` evenly spread examples)."""
    key = (raw_key, noise, int(severity), int(seed), int(sample))
    if raw_key is not None and key in _NOISE_CACHE:
        return _NOISE_CACHE[key]
    noisy = add_text_noise(raw, noise, severity, seed=seed, indices=idx)
    rates = realised_error_rates(raw, noisy, max_examples=sample)
    if raw_key is not None:
        size = lambda entry: sum(map(len, entry[0]))  # noqa: E731
        while _NOISE_CACHE and (len(_NOISE_CACHE) >= _NOISE_CACHE_ENTRIES or sum(
                size(e) for e in _NOISE_CACHE.values()) + sum(map(len, noisy)) > _NOISE_CACHE_TOTAL_CHARS):
            _NOISE_CACHE.pop(next(iter(_NOISE_CACHE)))
        _NOISE_CACHE[key] = (noisy, rates)
    return noisy, rates


def _check_severities(severities: Sequence[int]) -> list[int]:
    """The corruption library's one severity rule (1..5, a list, a range or all), as a UserError."""
    from corruptions.errors import CorruptionError
    from corruptions.registry import parse_severities
    try:
        return parse_severities(list(severities) if isinstance(severities, tuple) else severities)
    except CorruptionError as e:
        raise UserError(str(e)) from None


def _corruption_source(corruption_dir: str | Path) -> str:
    """"regenerated" when the directory carries the suite's manifest.json, else "official"."""
    d = Path(corruption_dir)
    if not d.is_dir():
        raise DataError(f"corruption directory not found: {d}")
    return "regenerated" if (d / "manifest.json").exists() else "official"


def _predict_from_dir(model, pre, corruption_dir: Path, corruption: str, severity: int, idx: np.ndarray,
                      y: np.ndarray, *, chunk: int, **kw) -> np.ndarray:
    # regenerated sets: file and labels checked against manifest.json (SHA-256, cached); a mismatch is one line
    x_c, y_c = load_corrupted(corruption_dir, corruption, severity, verify=True)
    _check_dir_labels(corruption_dir, f"{corruption} severity {severity}", y_c, idx, y)
    pred, _ = predict_raw(model, np.asarray(x_c)[idx], pre, chunk=chunk, **kw)
    return pred


def _folder_selection(corruption_dir: Path, corruption: str, severity: int, data: _EvalData, plan: EvalPlan
                      ) -> tuple[list[str], tuple[np.ndarray, np.ndarray] | None]:
    """Which ``<wnid>/<file>`` files of one condition of a -C folder tree to read, checked before any work.

    Where the tree holds the selected test images by name (ImageNet-C, and every regenerated tree, are made from
    the validation files and keep their names), exactly those, labelled as the clean images: returns
    ``(names, None)``. Where it holds none of them (the published Tiny-ImageNet-C was made from other crops than
    Tiny-ImageNet's val, hendrycks/robustness#39), the tree is read as an image folder, as the reference
    ``test.py`` does: every file (the first / stratified ``max_test`` of them), labelled by its ``<wnid>`` folder
    among the dataset's classes; returns ``(names, (labels, positions))``. Some but not all: a DataError. A
    regenerated condition's files must be listed in its SHA256SUMS (vouched for by the manifest).
    """
    here = corruption_dir / corruption / str(severity)
    files, wnids = condition_files(corruption_dir, corruption, severity)
    sums = condition_sums(corruption_dir, corruption, severity)
    if sums is not None and set(files) - set(sums):
        raise DataError(f"{here}: {sorted(set(files) - set(sums))[0]} is not in its {SUMS_NAME} (left from another "
                        "run?)")
    have = set(files)
    wanted = [data.names[i] for i in data.idx] if data.names is not None else []
    found = sum(n in have for n in wanted)
    if wanted and found == len(wanted):
        return wanted, None
    if found:
        missing = next(n for n in wanted if n not in have)
        raise DataError(f"{here}: {len(wanted) - found} of the {len(wanted)} test images are missing (e.g. "
                        f"{missing}); was it made from the same validation images?")
    index = {c: k for k, c in enumerate(data.classes)}
    unknown = sorted(set(wnids) - set(index))
    if unknown:
        raise DataError(f"{here}: class folder {unknown[0]} is not a class of dataset {plan.dataset!r}")
    y = np.array([index[w] for w in wnids], dtype=np.int64)
    pos = select_test(y, plan.max_test, plan.subset)
    return [files[k] for k in pos], (y[pos], pos)


def _predict_from_folder(model, pre, corruption_dir: Path, corruption: str, severity: int, names: list[str], *,
                         chunk: int, **kw) -> np.ndarray:
    """Predictions for ``names`` of one condition folder, read chunk by chunk (each file once; a regenerated one
    checked against its SHA-256 while it is read)."""
    sums = condition_sums(corruption_dir, corruption, severity)
    preds = []
    for start in range(0, len(names), chunk):
        x = read_images(corruption_dir, corruption, severity, names[start:start + chunk], sums)
        p, _ = predict_raw(model, x, pre, chunk=chunk, **kw)
        preds.append(p)
    return np.concatenate(preds) if preds else np.zeros(0, dtype=np.int64)


def _frost_textures(frost_dir: str | Path | None, data_root: str | Path | None):
    from robustbench_dgsa.data.locate import frost_dir_for
    return load_frost_textures(frost_dir_for(frost_dir, data_root))


def _predict_on_the_fly(model, pre, x_all: np.ndarray, idx: np.ndarray, corruption: str, severity: int,
                        seed: int, dev, *, chunk: int, frost=None, **kw) -> np.ndarray:
    preds = []
    cdev = str(dev) if dev.type == "cuda" else None
    for s in range(0, len(idx), chunk):
        part = idx[s:s + chunk]
        xb = x_all[part]
        gray = xb.ndim == 3 or xb.shape[-1] == 1
        if gray:  # the CIFAR-C corruptions are defined on RGB: replicate, corrupt, back to one channel (mean)
            xb = np.repeat(xb.reshape(*xb.shape[:3], 1), 3, axis=-1)
        xc = corrupt(xb, corruption, severity, seed=seed, indices=part, device=cdev, frost=frost)
        if gray:
            xc = np.round(np.asarray(xc, dtype=np.float32).mean(axis=-1)).astype(np.uint8).reshape(x_all[part].shape)
        p, _ = predict_raw(model, xc, pre, chunk=chunk, **kw)
        preds.append(p)
    return np.concatenate(preds) if preds else np.zeros(0, dtype=np.int64)
