"""What a rollout looks through: a trained checkpoint, a shipped (pretrained) model, a timm ViT, or an untrained
registry model — each as one :class:`RolloutSource` (the model, its checkpoint meta, its preprocessing record and a
label saying where it came from).

    >>> sources = zoo_sources("image")                       # the shipped ViT, DViT, DGViT (CIFAR-10)
    >>> sources = load_sources(checkpoints=["dgvit.safetensors"], pretrained=["dgt"])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from robustbench_dgsa.util.errors import UserError

#: an untrained model is small and seeded: it shows the pipeline, never learned attention
UNTRAINED_OVERRIDES = {"dim": 64, "depth": 4, "heads": 4, "head_hidden": 64, "num_classes": 10}
UNTRAINED_IMAGE_PREPROCESS = {"modality": "image", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25],
                              "image_size": 32, "in_chans": 3}
UNTRAINED_SEED = 0


@dataclass
class RolloutSource:
    """One model to roll out and where it came from."""
    model: Any
    meta: dict[str, Any]                    # checkpoint meta: classes, seed, dataset, ...
    preprocess: dict[str, Any]              # engine.predict's record (image mean/std/size, or text vocab)
    source: str                             # a path, "pretrained:NAME", "timm:NAME", "untrained:NAME"
    name: str                               # registry / display name of the model
    notes: list[str] = field(default_factory=list)   # one-line notes for the user (untrained, default head, ...)

    @property
    def modality(self) -> str:
        return self.model.config.modality

    @property
    def seed(self) -> int | None:
        seed = self.meta.get("seed")
        return None if seed is None else int(seed)


def checkpoint_source(path: str | Path) -> RolloutSource:
    from robustbench_dgsa.engine.predict import preprocess_from_meta
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    path = Path(path)
    if not path.exists():
        raise UserError(f"checkpoint not found: {path}")
    model, meta = load_checkpoint(path)
    return RolloutSource(model, meta, preprocess_from_meta(meta), str(path), model.config.name)


def pretrained_source(name: str) -> RolloutSource:
    """A shipped model (the zoo) by entry name or bare model name."""
    from robustbench_dgsa.engine.predict import preprocess_from_meta
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    from robustbench_dgsa.models.zoo import pretrained_checkpoint
    card, path = pretrained_checkpoint(name)
    model, meta = load_checkpoint(path, expect_model=card.model)
    model.float()
    return RolloutSource(model, {**meta, "card": card.to_dict()}, preprocess_from_meta(meta),
                         f"pretrained:{card.name}", card.model)


def zoo_sources(modality: str) -> list[RolloutSource]:
    """The shipped models of one modality, in the paper's order (ViT, DViT, DGViT / Transformer, DT, DGT)."""
    from robustbench_dgsa.models.zoo import default_trio
    return [pretrained_source(card.name) for card in default_trio(modality)]


def untrained_source(name: str, text: str | None = None) -> RolloutSource:
    """An UNTRAINED registry model (seed :data:`UNTRAINED_SEED`, small config): for trying the pipeline only."""
    import torch
    from robustbench_dgsa.models import create_model, get_model_config

    cfg = get_model_config(name)
    overrides = dict(UNTRAINED_OVERRIDES)
    if cfg.modality == "text":
        from robustbench_dgsa.data.vocab import Vocab
        vocab = Vocab.build([text or ""], min_freq=1, max_size=None)
        overrides.update(vocab_size=len(vocab), max_len=256)
        preprocess = {"modality": "text", "vocab": vocab.to_list(), "max_len": 256}
    else:
        overrides.update(image_size=32, patch_size=4, in_chans=3)
        preprocess = dict(UNTRAINED_IMAGE_PREPROCESS)
    torch.manual_seed(UNTRAINED_SEED)
    model = create_model(cfg, **overrides).eval()
    meta = {"model": name, "classes": [f"class {i}" for i in range(10)], "seed": UNTRAINED_SEED,
            "preprocess": preprocess, "untrained": True}
    note = (f"{name}: an UNTRAINED model (random weights, small config); its rollout shows the pipeline, not "
            "learned attention")
    return RolloutSource(model, meta, preprocess, f"untrained:{name}", name, [note])


def timm_source(name: str, *, weights: Path | None = None, random_init: bool = False, seed: int = 0,
                timm_norm: bool = False, model_args: dict[str, Any] | None = None) -> RolloutSource:
    """A timm ViT (weights from a file, or random weights drawn from ``seed``) behind the suite's rollout
    interface; its class count comes from the weights' head unless ``model_args`` says it."""
    from robustbench_dgsa.models.external import load_timm_model, num_classes_in_weights
    from robustbench_dgsa.rollout.capture import as_rollout_model, default_preprocess

    model_args = dict(model_args or {})
    notes = []
    if "num_classes" not in model_args:
        n = num_classes_in_weights(weights) if weights is not None else None
        if n is not None:
            model_args["num_classes"] = n
        else:
            notes.append(f"timm {name}: {'no classifier head in the weights, so ' if weights else ''}timm's default "
                         "1000-class head; give num_classes=N in the model arguments for another")
    ext = load_timm_model(name, weights=weights, random_init=random_init, seed=seed, **model_args)
    model = as_rollout_model(ext.model.eval(), ext.name)
    n = model.config.num_classes
    meta = {"model": ext.name, "classes": [f"class {i}" for i in range(n)], "source": ext.source,
            "untrained": ext.random_init, "init_seed": ext.init_seed}
    return RolloutSource(model, meta, default_preprocess(model, timm_norm), ext.source, ext.name, notes)


def load_sources(*, checkpoints: Sequence[str | Path] = (), pretrained: Sequence[str] = (),
                 untrained: Sequence[str] = (), text: str | None = None) -> list[RolloutSource]:
    """Checkpoints, then shipped models, then untrained models, in the order given."""
    from robustbench_dgsa.models import get_model_config
    for name in untrained:
        get_model_config(name)                        # an unknown name fails before anything loads
    return ([checkpoint_source(p) for p in checkpoints] + [pretrained_source(n) for n in pretrained]
            + [untrained_source(n, text) for n in untrained])


def check_modality(sources: Sequence[RolloutSource], modality: str) -> None:
    """Every source must take ``modality`` input (one line naming the first that does not)."""
    for s in sources:
        if s.modality != modality:
            what = "an image file instead of a text" if s.modality == "image" else "a text instead of an image"
            raise UserError(f"{s.source} is {'a text' if s.modality == 'text' else 'an image'} model ({s.name}); "
                            f"give {what}")
