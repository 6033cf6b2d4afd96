"""The model table: every registered model built for one geometry, with its size and forward FLOPs per sample
(what ``dgsa-bench models`` lists; with 224 px images and 16 px patches the vision rows give the paper's Table 9
parameter counts)."""
from __future__ import annotations

import dataclasses
from typing import Any

#: what the FLOPs column counts
FLOPS_NOTE = ("FLOPs: forward, per sample, 2 per multiply-add, matmuls/convolutions incl. attention "
              "scores and values (explicit path). The paper's Table 9 'FLOPs' count multiply-adds (= FLOPs/2).")


def model_table(names: list[str] | None = None, *, image_size: int = 32, patch_size: int = 4,
                num_classes: int = 10, proj: str | float = 4, vocab_size: int = 30000, max_len: int = 256,
                overrides: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per model: name, description (its registration's docstring), modality, attention, ffn, ffn_ratio,
    tokens, params, flops, macs, config.

    Vision models get ``image_size`` / ``patch_size``, text models ``vocab_size`` / ``max_len``, SwiGLU models the
    FFN ratio ``proj`` (2, 4 or "16/3"); ``overrides`` (config key -> value) apply to every model last."""
    from .flops import count_flops, count_params, num_tokens
    from .registry import (apply_model_overrides, create_model, get_model_config, model_description, model_names,
                           parse_ratio)

    ratio = parse_ratio(proj)
    rows = []
    for name in names or model_names():
        cfg = get_model_config(name)
        geometry: dict[str, Any] = {"num_classes": num_classes}
        if cfg.modality == "image":
            geometry.update(image_size=image_size, patch_size=patch_size)
        else:
            geometry.update(vocab_size=vocab_size, max_len=max_len)
        if cfg.ffn == "swiglu":
            geometry["ffn_ratio"] = ratio
        cfg = apply_model_overrides(cfg, **geometry)
        if overrides:
            cfg = apply_model_overrides(cfg, **overrides)
        model = create_model(cfg)
        flops = count_flops(cfg)
        rows.append({
            "name": name, "description": model_description(name), "modality": cfg.modality, "attention": cfg.attention, "ffn": cfg.ffn,
            "ffn_ratio": cfg.ffn_ratio, "tokens": num_tokens(cfg), "params": count_params(model),
            "flops": flops, "macs": flops // 2, "config": dataclasses.asdict(cfg),
        })
        del model
    return rows
