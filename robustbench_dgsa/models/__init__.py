"""Models: ViT / DViT / DGViT (vision) and Transformer / DT / DGT (text), built from one registry."""
from .registry import (MODEL_NAMES, apply_model_overrides, create_model, get_model_config, parse_ratio,
                       register_model)
from .text import TextTransformer
from .vision import VisionTransformer

__all__ = ["MODEL_NAMES", "apply_model_overrides", "create_model", "get_model_config", "parse_ratio",
           "register_model", "TextTransformer", "VisionTransformer"]
