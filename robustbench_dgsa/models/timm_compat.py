"""The suite's image models as timm models: entries in timm's registry with a ``pretrained_cfg``.

After ``import robustbench_dgsa`` (with timm installed; the registration runs when timm itself is imported, so
importing the suite stays light)::

    import timm, robustbench_dgsa
    model = timm.create_model("dgvit_zoo_patch4_32", pretrained=True)   # the shipped DGViT, offline
    cfg = timm.data.resolve_model_data_config(model)                    # 32 px, CIFAR-10 mean/std, crop_pct 1
    model = timm.create_model("dgvit_zoo_patch4_32", pretrained=True, num_classes=100)   # new output layer

Names:

* ``<model>_zoo_patch<p>_<size>`` (``vit_zoo_patch4_32``, ``dvit_zoo_patch4_32``, ``dgvit_zoo_patch4_32``): the
  shipped zoo models; ``pretrained_cfg.file`` is the shipped safetensors checkpoint (read by the suite's
  checkpoint loader; nothing is downloaded), mean/std are the checkpoint's training normalisation;
* ``<model>_suite_patch<p>_<size>`` (``dgvit_suite_patch4_32``, ...): the registered architectures, untrained
  (``pretrained=True`` is refused: no weights); their data config assumes CIFAR-10's normalisation, the suite's
  default dataset.

Keyword arguments of ``timm.create_model`` other than ``num_classes`` are model-config overrides
(``depth=4``, ...; see :func:`robustbench_dgsa.models.registry.apply_model_overrides`). A name timm already has
is left alone (a warning). The models implement ``forward_features``, ``forward_head(x, pre_logits=False)``,
``reset_classifier(num_classes)`` and ``num_features`` as timm's ViT does.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, Callable

from robustbench_dgsa.util.errors import UserError

# timm's registry reads the pretrained cfgs of a module's entrypoints from this dict (old-style: one cfg each)
default_cfgs: dict[str, dict[str, Any]] = {}
_REGISTERED: list[str] = []
_BUILD: dict[str, tuple[Any, Path | None, str]] = {}  # timm name -> (model config, zoo checkpoint, suite name)


def _cfg(model_cfg: Any, mean, std, file: Path | None, description: str) -> dict[str, Any]:
    return dict(file=str(file) if file is not None else None, num_classes=int(model_cfg.num_classes),
                input_size=(int(model_cfg.in_chans), int(model_cfg.image_size), int(model_cfg.image_size)),
                fixed_input_size=True, interpolation="bilinear", crop_pct=1.0, crop_mode="center",
                mean=tuple(float(v) for v in mean), std=tuple(float(v) for v in std), first_conv="patch_embed",
                classifier="head.fc2", license="apache-2.0", description=description)


def zoo_pretrained_cfg(card: Any, model_cfg: Any, preprocess: dict[str, Any]) -> dict[str, Any]:
    """The ``pretrained_cfg`` of a shipped image model (no timm needed): what ``load_pretrained`` sets on it too,
    so ``timm.data.resolve_model_data_config`` is right however the model was loaded."""
    return _cfg(model_cfg, preprocess["mean"], preprocess["std"], card.weights_path,
                f"dgsa-bench zoo model {card.name} ({card.dataset})")


def _specs() -> list[tuple[str, Any, Path | None, str, dict[str, Any]]]:
    """(timm name, model config, checkpoint or None, suite name, pretrained cfg) of every zoo and registered
    image model."""
    from robustbench_dgsa.data.vision import STATS
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    from robustbench_dgsa.models.registry import get_model_config, model_names
    from robustbench_dgsa.models.zoo import list_pretrained
    out = []
    for card in list_pretrained("image"):
        cfg, meta = read_checkpoint_meta(card.weights_path)
        pre = meta["preprocess"]
        name = f"{card.model}_zoo_patch{cfg.patch_size}_{cfg.image_size}".replace("-", "_")
        if any(o[0] == name for o in out):
            name = f"{name}_{card.dataset}".replace("-", "_")
        out.append((name, cfg, card.weights_path, card.model, zoo_pretrained_cfg(card, cfg, pre)))
    for n in model_names():
        cfg = get_model_config(n)
        if cfg.modality != "image":
            continue
        name = f"{n}_suite_patch{cfg.patch_size}_{cfg.image_size}".replace("-", "_")
        mean, std = STATS["cifar10"]
        out.append((name, cfg, None, n, _cfg(cfg, mean, std, None, f"dgsa-bench architecture {n} (untrained)")))
    return out


def _pretrained_cfg(name: str, pretrained_cfg: Any, overlay: dict[str, Any] | None) -> dict[str, Any]:
    """The resolved cfg as a dict: the registry's (or the one given), with ``overlay`` applied."""
    import timm.models

    if isinstance(pretrained_cfg, dict):
        cfg = dict(pretrained_cfg)
    elif pretrained_cfg is not None and hasattr(pretrained_cfg, "to_dict"):
        cfg = pretrained_cfg.to_dict()
    else:
        cfg = timm.models.get_pretrained_cfg(name).to_dict()
    cfg.update(overlay or {})
    cfg.setdefault("architecture", name)
    return cfg


def _build(name: str, pretrained: bool = False, pretrained_cfg: Any = None,
           pretrained_cfg_overlay: dict[str, Any] | None = None, cache_dir: Any = None, **kwargs: Any):
    """The entrypoint body: the model (zoo weights when ``pretrained``), with ``pretrained_cfg`` set."""
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    from robustbench_dgsa.models.registry import apply_model_overrides, create_model
    base, _, suite_name = _BUILD[name]
    cfg = _pretrained_cfg(name, pretrained_cfg, pretrained_cfg_overlay)
    num_classes = kwargs.pop("num_classes", None)
    for k in ("drop_rate", "global_pool"):  # timm's common arguments; the suite's names for them differ
        value = kwargs.pop(k, None)
        if k == "drop_rate" and value is not None:
            kwargs["dropout"] = value
        elif k == "global_pool" and value not in (None, "token"):
            raise UserError(f"{name}: global_pool must be 'token' (the CLS token), got {value!r}")
    if pretrained:
        if not cfg.get("file"):
            raise UserError(f"{name}: no pretrained weights (an untrained architecture); the shipped models are "
                            f"{', '.join(n for n, (_, f, _) in _BUILD.items() if f is not None)}")
        if kwargs:
            raise UserError(f"{name}: pretrained weights fix the architecture; got options {sorted(kwargs)}")
        model, _ = load_checkpoint(cfg["file"], expect_model=suite_name, map_location="cpu")
        model.float()
    else:
        model = create_model(apply_model_overrides(base, **kwargs))
    if num_classes is not None and int(num_classes) != model.num_classes:
        model.reset_classifier(int(num_classes))
    cfg["num_classes"] = model.num_classes
    model.pretrained_cfg = cfg
    model.default_cfg = cfg
    return model


def _entrypoint(name: str) -> Callable[..., Any]:
    def entrypoint(pretrained: bool = False, **kwargs: Any):
        return _build(name, pretrained, **kwargs)

    entrypoint.__name__ = entrypoint.__qualname__ = name
    entrypoint.__module__ = __name__
    entrypoint.__doc__ = f"timm entrypoint of the dgsa-bench model {name} (see robustbench_dgsa.models.timm_compat)."
    return entrypoint


def register_timm_models() -> list[str]:
    """Register the zoo and the registered image models in timm's registry (once); returns their timm names."""
    if _REGISTERED:
        return list(_REGISTERED)
    import timm
    from timm.models import register_model
    existing = set(timm.list_models())
    for name, cfg, file, suite_name, pcfg in _specs():
        if name in existing:
            warnings.warn(f"timm already has a model named {name}; the dgsa-bench model is not registered under it",
                          UserWarning, stacklevel=2)
            continue
        default_cfgs[name] = pcfg
        _BUILD[name] = (cfg, file, suite_name)
        fn = _entrypoint(name)
        setattr(sys.modules[__name__], name, fn)
        register_model(fn)
        _REGISTERED.append(name)
    return list(_REGISTERED)


__all__ = ["register_timm_models"]
