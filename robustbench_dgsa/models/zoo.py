"""The model zoo: trained models that ship with the package, and the one loader of pretrained models.

    >>> from robustbench_dgsa.models.zoo import list_pretrained, load_pretrained
    >>> [c.name for c in list_pretrained()]           # vit-cifar10, dvit-cifar10, dgvit-cifar10, transformer-imdb, ...
    >>> model, meta = load_pretrained("dgvit")        # a bare model name where it is unambiguous

Each entry is two files in ``robustbench_dgsa/zoo/`` (package data):

* ``<name>.safetensors``: a suite checkpoint (:mod:`robustbench_dgsa.models.checkpoint`: model config, classes and
  preprocessing in the header) with float16 weights; loaded into a float32 model;
* ``<name>.json``: its card: how it was made (the exact command and preset, data files and their SHA-256, seed,
  package version and commit, machine, training time) and what it scores (clean accuracy on the full official
  test set; for image models mCA over the 19 corruptions × 5 severities of a regenerated CIFAR-10-C-style set,
  with the frost source), all measured with the shipped float16 weights. Cards are written by
  :mod:`robustbench_dgsa.jobs.zoo`, never by hand; a test checks that every card agrees with its weights
  (SHA-256, parameter count).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robustbench_dgsa.util.errors import UserError

ZOO_DIR = Path(__file__).resolve().parent.parent / "zoo"
CARD_VERSION = 1
#: where a card's numbers come from: each model's own build (one seed), never an evidence campaign; the builder
#: writes it into new cards (``training["numbers_from"]``) and ``dgsa-bench models --pretrained`` prints it
NUMBERS_FROM = ("the zoo build itself (one seed per model), not from either evidence campaign; the campaigns' "
                "multi-seed numbers are the repository's results/evidence-v2 (current) and results/evidence "
                "(superseded)")


@dataclass(frozen=True)
class ZooCard:
    """What one shipped model is and how it was made (the JSON card beside its weights)."""
    name: str                      # entry name: <model>-<dataset>
    model: str                     # registry name (vit, dgvit, dgt, ...)
    dataset: str
    modality: str
    params: int
    weights_file: str
    weights_sha256: str
    weights_bytes: int
    dtype: str
    metrics: dict[str, Any]        # clean_accuracy, n_test, (images) mca, corruption set facts
    training: dict[str, Any]       # command, preset, seed, epochs, seconds, machine, data files + SHA-256
    provenance: dict[str, Any]     # package version, commit, library versions, date
    config: dict[str, Any] = field(default_factory=dict)
    card_version: int = CARD_VERSION

    @property
    def weights_path(self) -> Path:
        return ZOO_DIR / self.weights_file

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> "ZooCard":
        names = set(cls.__dataclass_fields__)
        missing = sorted(n for n in names - set(d) if n not in ("config", "card_version"))
        if missing:
            raise UserError(f"model card {where} lacks {', '.join(missing)}")
        fields = {k: v for k, v in d.items() if k in names}
        # added later: cards built before the field existed come from the same zoo build, so it holds for them too
        fields["training"] = {"numbers_from": NUMBERS_FROM} | dict(fields["training"])
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def card_path(name: str, zoo_dir: Path | None = None) -> Path:
    return (zoo_dir or ZOO_DIR) / f"{name}.json"


def list_pretrained(modality: str | None = None, zoo_dir: Path | None = None) -> list[ZooCard]:
    """The shipped models' cards (image models first, then text; registry order within each)."""
    from robustbench_dgsa.models.registry import model_order
    folder = zoo_dir or ZOO_DIR
    cards = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UserError(f"unreadable model card {path}: {e}") from None
        card = ZooCard.from_dict(doc, str(path))
        if modality is None or card.modality == modality:
            cards.append(card)
    order = {name: i for i, name in enumerate(model_order(c.model for c in cards))}
    return sorted(cards, key=lambda c: (c.modality != "image", order[c.model], c.dataset))


def resolve_pretrained(name: str, zoo_dir: Path | None = None) -> ZooCard:
    """The card of ``name``: an entry name (``dgvit-cifar10``) or a bare model name (``dgvit``) where only one
    shipped model is of that kind."""
    cards = list_pretrained(zoo_dir=zoo_dir)
    if not cards:
        raise UserError("no pretrained models are installed (the package's zoo folder is empty)")
    key = str(name).strip().lower()
    exact = [c for c in cards if c.name == key]
    if exact:
        return exact[0]
    by_model = [c for c in cards if c.model == key]
    if len(by_model) == 1:
        return by_model[0]
    valid = ", ".join(c.name for c in cards)
    if by_model:
        raise UserError(f"{name!r} is ambiguous: {', '.join(c.name for c in by_model)}")
    raise UserError(f"no pretrained model {name!r} (shipped: {valid})")


def default_trio(modality: str, zoo_dir: Path | None = None) -> list[ZooCard]:
    """The shipped models of one modality in the paper's order (ViT, DViT, DGViT / Transformer, DT, DGT)."""
    cards = list_pretrained(modality, zoo_dir=zoo_dir)
    if not cards:
        raise UserError(f"no pretrained {modality} models are installed")
    return cards


def pretrained_checkpoint(name: str, zoo_dir: Path | None = None) -> tuple[ZooCard, Path]:
    """(card, path of the shipped checkpoint) of ``name``: what ``evaluate`` / ``rollout`` load with the suite's
    checkpoint loader, so rows and figures name the model like any trained checkpoint."""
    card = resolve_pretrained(name, zoo_dir)
    path = (zoo_dir or ZOO_DIR) / card.weights_file
    if not path.is_file():
        raise UserError(f"pretrained model {card.name}: weights file missing ({path})")
    return card, path


def load_pretrained(name: str, *, device: str = "cpu", zoo_dir: Path | None = None):
    """A shipped model, ready for :func:`robustbench_dgsa.benchmark` (an ``ExternalModel``).

    ``.model`` is the float32 model in eval mode; ``.preprocess`` its input normalisation (images) and
    ``.tokenizer`` its vocabulary (texts: texts -> (token ids, padding mask)); ``.info`` holds the card and the
    checkpoint's meta (classes, run config). ``name``: ``dgvit-cifar10`` or a bare ``dgvit``.
    """
    from robustbench_dgsa.data import Vocab
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    from robustbench_dgsa.models.external import ExternalModel, Preprocess
    card, path = pretrained_checkpoint(name, zoo_dir)
    model, meta = load_checkpoint(path, expect_model=card.model, map_location=device)
    model.float()
    pre = meta["preprocess"]                     # written by the trainer: image mean/std/size, or text vocab
    info = {"card": card.to_dict(), "meta": meta}
    if card.modality == "text":
        vocab, max_len = Vocab.from_list(pre["vocab"]), int(pre["max_len"])

        def tokenizer(texts: list[str]):
            return vocab.encode(list(texts), max_len)      # (token ids, padding mask), as in training
        return ExternalModel(model, card.name, f"pretrained:{card.name}", str(path), False, None, info,
                             tokenizer=tokenizer)
    preprocess = Preprocess(tuple(pre["mean"]), tuple(pre["std"]), int(pre["image_size"]), int(pre["in_chans"]))
    from robustbench_dgsa.models.timm_compat import zoo_pretrained_cfg
    model.pretrained_cfg = model.default_cfg = zoo_pretrained_cfg(card, model.config, pre)  # as timm's
    return ExternalModel(model, card.name, f"pretrained:{card.name}", str(path), False, preprocess, info)


def weights_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
