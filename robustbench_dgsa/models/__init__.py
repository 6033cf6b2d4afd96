"""Models: ViT / DViT / DGViT (vision) and Transformer / DT / DGT (text), built from one registry."""
from .registry import (MODEL_FACTS, MODEL_NAMES, ModelFacts, apply_model_overrides, create_model, display_name,
                       get_model_config, model_names, model_order, model_styles, parse_ratio, reference_model,
                       register_model)
from .text import TextTransformer
from .vision import VisionTransformer

__all__ = ["MODEL_FACTS", "MODEL_NAMES", "ModelFacts", "display_name", "model_order", "model_styles",
           "reference_model", "apply_model_overrides", "create_model", "get_model_config", "model_names", "parse_ratio",
           "register_model", "TextTransformer", "VisionTransformer"]
