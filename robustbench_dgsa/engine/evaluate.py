"""Evaluate a checkpoint: clean accuracy, accuracy per (corruption, severity), accuracy under text noise.

    result = evaluate("runs/vit-cifar10-s0/checkpoint.safetensors", corruptions=["fog", "snow"])

Everything goes to the results store (kind="eval"), with model / seed / config_hash taken from the checkpoint:

* ``condition="clean", severity=0``, metric ``accuracy`` (value in [0, 1]) with ``n``;
* per image corruption and severity: ``accuracy``, ``source`` = "official" / "regenerated" (read from a
  CIFAR-C directory) or "on-the-fly" (generated here with :func:`corruptions.api.corrupt`, ``corruption_seed``);
* per text-noise type and severity: ``accuracy`` plus the realised ``cer`` and ``wer`` (SPEC §5);
* per-example predictions of every condition (``RunWriter.write_predictions``; columns condition, severity,
  index, label, pred), so flip rates and error consistency (SPEC §6) need no re-run.

Rows are written together at the end, so a killed evaluation leaves no partial rows behind. Images are
corrupted and classified chunk by chunk (bounded memory); on-the-fly randomness is keyed per image index, so
the chunking does not change the result.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa import store
from robustbench_dgsa.util.errors import CheckpointError, DataError, UserError
from robustbench_dgsa.engine.predict import predict_raw, preprocess_from_meta, resolve_device, select_test
from robustbench_dgsa.util.progress import log, track

TABLE_COLUMNS = ["condition", "severity", "accuracy", "n", "cer", "wer", "source"]


@dataclass
class EvalResult:
    run_id: str
    table: pd.DataFrame          # condition, severity, accuracy, n, cer, wer, source
    store_dir: Path | None = None

    def summary(self) -> dict[str, Any]:
        t = self.table
        clean = t[t.condition == "clean"]
        out: dict[str, Any] = {"run_id": self.run_id,
                               "clean_accuracy": float(clean.accuracy.iloc[0]) if len(clean) else None}
        corr = t[t.condition != "clean"]
        if len(corr):
            out["mean_corrupted_accuracy"] = float(corr.accuracy.mean())
        out["table"] = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
                        for row in t.to_dict(orient="records")]
        return out


def evaluate(checkpoint: str | Path, *, dataset: str | None = None, data_root: str | Path | None = None,
             split: str = "test", max_test: int | None = None, corruptions: Sequence[str] | None = None,
             severities: Sequence[int] = (1, 2, 3, 4, 5), corruption_dir: str | Path | None = None,
             text_noise: Sequence[str] | None = None, corruption_seed: int = 0,
             store_dir: str | Path | None = None, batch_size: int = 256, device: str = "auto",
             progress: bool = True, chunk: int = 2000, error_rate_sample: int = 2000,
             frost_dir: str | Path | None = None) -> EvalResult:
    """Evaluate ``checkpoint`` on ``dataset`` (default: the one it was trained on). See the module docstring.

    ``store_dir`` defaults to ``<checkpoint folder>/store`` (where ``train`` put its rows by default).
    ``max_test`` defaults to the run's ``data.max_test`` when ``dataset`` is the training dataset.
    ``error_rate_sample``: realised CER/WER are measured on at most this many examples spread evenly over the
    test set (Levenshtein on long reviews is slow); the rows' ``n`` says how many.
    ``frost_dir``: the frost photographs for on-the-fly ``frost`` (default: ``<data_root>/corruptions/frost`` when
    it exists, else the corruption library's default); the source used is recorded in the provenance.
    """
    t_start = time.monotonic()
    checkpoint = Path(checkpoint)
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    if not checkpoint.exists():
        raise CheckpointError(f"checkpoint not found: {checkpoint}")
    dev = resolve_device(device)
    model, meta = load_checkpoint(checkpoint, map_location=dev)
    pre = preprocess_from_meta(meta)
    run_cfg = meta.get("run_config") or {}
    trained_on = meta.get("dataset")
    dataset = dataset or trained_on
    if not dataset:
        raise CheckpointError(f"checkpoint {checkpoint} does not say which dataset it was trained on; "
                              "pass --dataset")
    if max_test is None and dataset == trained_on:
        max_test = (run_cfg.get("data") or {}).get("max_test")
    if data_root is None and dataset == trained_on:
        data_root = (run_cfg.get("data") or {}).get("data_root")
    store_dir = Path(store_dir) if store_dir is not None else checkpoint.parent / "store"
    severities = _check_severities(severities)

    # --- data ----------------------------------------------------------------------------------------------
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.engine.predict import dataset_info
    info = dataset_info(dataset)
    cfg = model.config
    if info.modality != cfg.modality:
        raise UserError(f"checkpoint holds a {cfg.modality} model ({cfg.name}) but dataset {dataset!r} is "
                        f"{info.modality}")

    def check_classes(n: int) -> None:
        if int(n) != int(cfg.num_classes):
            raise UserError(f"checkpoint {checkpoint.name} was trained for {cfg.num_classes} classes but dataset "
                            f"{dataset!r} has {n}; evaluate it on a dataset with the same classes")
    if info.num_classes:
        check_classes(info.num_classes)
    data = load_dataset(dataset, split, data_root=data_root, download=False)
    check_classes(len(data.classes))
    if dataset != trained_on and meta.get("classes") and list(meta["classes"]) != list(data.classes):
        log(f"[evaluate] note: class names of {dataset!r} differ from the training data's; labels are "
            "compared by index")
    y_full = np.asarray(data.y, dtype=np.int64)
    idx = select_test(y_full, max_test)
    y = y_full[idx]
    if cfg.modality == "image":
        raw_all = np.asarray(data.x)
    else:
        raw_all = list(data.texts)
    if corruptions and cfg.modality != "image":
        raise UserError("image corruptions apply to image models; use --text-noise for text models")
    if text_noise and cfg.modality != "text":
        raise UserError("text noise applies to text models; use --corruptions for image models")

    frost_source = ""
    run_id = store.new_run_id("eval")
    base = dict(kind="eval", model=str(meta.get("model") or cfg.name), config_hash=str(meta.get("config_hash", "")),
                dataset=dataset, split=split, seed=int(meta.get("seed", -1)), epoch=int(meta.get("epoch", -1)))
    rows: list[dict[str, Any]] = []
    preds_frames: list[pd.DataFrame] = []
    table: list[dict[str, Any]] = []
    kw = dict(batch_size=batch_size, device=dev, amp="auto")

    def record(condition: str, severity: int, pred: np.ndarray, source: str, extra: dict[str, float] | None = None,
               n_rates: int | None = None):
        acc = float((pred == y).mean()) if len(y) else float("nan")
        rows.append(dict(condition=condition, severity=severity, metric="accuracy", value=acc, n=len(y),
                         source=source))
        for name, value in (extra or {}).items():
            rows.append(dict(condition=condition, severity=severity, metric=name, value=float(value),
                             n=len(y) if n_rates is None else n_rates, source=source))
        preds_frames.append(pd.DataFrame({"condition": condition, "severity": np.int8(severity),
                                          "index": idx.astype(np.int32), "label": y.astype(np.int16),
                                          "pred": pred.astype(np.int16)}))
        table.append({"condition": condition, "severity": severity, "accuracy": acc, "n": len(y),
                      "cer": (extra or {}).get("cer", np.nan), "wer": (extra or {}).get("wer", np.nan),
                      "source": source})

    # --- clean ---------------------------------------------------------------------------------------------
    clean_source = str(getattr(data, "source", "") or "")
    raw = raw_all[idx] if cfg.modality == "image" else [raw_all[i] for i in idx]
    pred, _ = predict_raw(model, raw, pre, chunk=chunk, **kw)
    record("clean", 0, pred, clean_source)
    log(f"[evaluate] {base['model']} seed {base['seed']} on {dataset}/{split} ({len(y)} examples): "
        f"clean accuracy {table[-1]['accuracy']:.4f}")

    # --- image corruptions ---------------------------------------------------------------------------------
    if corruptions:
        cells = [(c, s) for c in corruptions for s in severities]
        source = _corruption_source(corruption_dir) if corruption_dir else "on-the-fly"
        frost = None
        if not corruption_dir and "frost" in corruptions:
            frost = _frost_textures(frost_dir, data_root)
            frost_source = str(getattr(frost, "source", ""))
        for c, s in track(cells, description="corruptions", enabled=progress):
            if corruption_dir:
                pred = _predict_from_dir(model, pre, Path(corruption_dir), c, s, idx, y, chunk=chunk, **kw)
            else:
                pred = _predict_on_the_fly(model, pre, raw_all, idx, c, s, corruption_seed, dev, chunk=chunk,
                                           frost=frost if c == "frost" else None, **kw)
            record(c, s, pred, source)

    # --- text noise ----------------------------------------------------------------------------------------
    if text_noise:
        from corruptions.text import TEXT_NOISE_TYPES, add_text_noise, realised_error_rates
        unknown = [t for t in text_noise if t not in TEXT_NOISE_TYPES]
        if unknown:
            raise UserError(f"unknown text noise type(s) {', '.join(unknown)} "
                            f"(valid: {', '.join(TEXT_NOISE_TYPES)})")
        cells = [(t, s) for t in text_noise for s in severities]
        for t, s in track(cells, description="text noise", enabled=progress):
            noisy = add_text_noise(raw, t, s, seed=corruption_seed, indices=idx)
            pred, _ = predict_raw(model, noisy, pre, chunk=chunk, **kw)
            # Realised CER/WER (Levenshtein) on at most `error_rate_sample` evenly spread examples.
            rates = realised_error_rates(raw, noisy, max_examples=error_rate_sample)
            record(t, s, pred, "on-the-fly", {"cer": rates["cer"], "wer": rates["wer"]},
                   n_rates=int(rates["n_measured"]))

    # --- store: predictions, provenance, then all rows at once --------------------------------------------
    writer = store.RunWriter(store_dir, run_id, base=base)
    writer.write_predictions(split, pd.concat(preds_frames, ignore_index=True))
    from robustbench_dgsa.util.provenance import sha256_file
    writer.write_provenance({"kind": "eval", "checkpoint": str(checkpoint.resolve()),
                             "checkpoint_sha256": sha256_file(checkpoint), "train_run_id": meta.get("run_id"),
                             "model": base["model"], "seed": base["seed"], "config_hash": base["config_hash"],
                             "dataset": dataset, "trained_on": trained_on, "split": split, "max_test": max_test,
                             "n": int(len(y)), "data_source": clean_source, "data_root": str(data_root or ""),
                             "corruptions": list(corruptions or []), "severities": list(severities),
                             "corruption_dir": str(corruption_dir or ""), "corruption_seed": int(corruption_seed),
                             "text_noise": list(text_noise or []), "device": str(dev),
                             "frost_source": frost_source,
                             "wall_seconds": round(time.monotonic() - t_start, 3)})
    writer.add_rows(rows)
    store.compact(store_dir)
    out = pd.DataFrame(table, columns=TABLE_COLUMNS)
    if len(out) > 1:
        log(f"[evaluate] {len(out) - 1} corrupted conditions: mean accuracy "
            f"{out[out.condition != 'clean'].accuracy.mean():.4f} -> {store_dir}")
    return EvalResult(run_id, out, store_dir)


def _check_severities(severities: Sequence[int]) -> list[int]:
    out = []
    for s in severities:
        s = int(s)
        if not 1 <= s <= 5:
            raise UserError(f"severity must be between 1 and 5, got {s}")
        out.append(s)
    if not out:
        raise UserError("no severities given")
    return out


def _corruption_source(corruption_dir: str | Path) -> str:
    """"regenerated" when the directory carries the suite's manifest.json, else "official"."""
    d = Path(corruption_dir)
    if not d.is_dir():
        raise DataError(f"corruption directory not found: {d}")
    return "regenerated" if (d / "manifest.json").exists() else "official"


def _predict_from_dir(model, pre, corruption_dir: Path, corruption: str, severity: int, idx: np.ndarray,
                      y: np.ndarray, *, chunk: int, **kw) -> np.ndarray:
    from corruptions.layout import load_corrupted
    # regenerated sets: file and labels checked against manifest.json (SHA-256, cached); a mismatch is one line
    x_c, y_c = load_corrupted(corruption_dir, corruption, severity, verify=True)
    y_c = np.asarray(y_c, dtype=np.int64)
    if len(y_c) <= int(idx.max(initial=-1)):
        raise DataError(f"{corruption_dir}: {corruption} severity {severity} has {len(y_c)} images, fewer than "
                        f"the test split needs ({int(idx.max()) + 1})")
    if not np.array_equal(y_c[idx], y):
        raise DataError(f"{corruption_dir}: labels of {corruption} severity {severity} do not match the test "
                        "split of the dataset (wrong dataset or a different image order)")
    pred, _ = predict_raw(model, np.asarray(x_c)[idx], pre, chunk=chunk, **kw)
    return pred


def _frost_textures(frost_dir: str | Path | None, data_root: str | Path | None):
    from corruptions.frost import load_frost_textures
    if frost_dir is None and data_root is not None:
        guess = Path(data_root) / "corruptions" / "frost"
        if guess.is_dir():
            frost_dir = guess
    if frost_dir is not None and not Path(frost_dir).is_dir():
        raise DataError(f"frost directory not found: {frost_dir}")
    return load_frost_textures(frost_dir)


def _predict_on_the_fly(model, pre, x_all: np.ndarray, idx: np.ndarray, corruption: str, severity: int,
                        seed: int, dev, *, chunk: int, frost=None, **kw) -> np.ndarray:
    from corruptions.api import corrupt
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
