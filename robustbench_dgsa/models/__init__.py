"""Models: ViT / DViT / DGViT (vision) and Transformer / DT / DGT (text), built from one registry, and the public
extension interface: :func:`register_attention` (a new attention mechanism) and :func:`register_model` (a named
model built on it); see README, "Add your own attention"."""
from ..config import ModelConfig, Rule
from ..util.plugins import PluginRecord, add_plugins, load_plugins, loaded_plugins
from .attention_registry import AttentionEntry, attention_names, get_attention, register_attention
from .registry import (MODEL_FACTS, MODEL_NAMES, ModelFacts, apply_model_overrides, create_model, display_name,
                       get_model_config, model_names, model_order, model_styles, parse_ratio, reference_model,
                       register_model)
from .text import TextTransformer
from .vision import VisionTransformer

__all__ = ["MODEL_FACTS", "MODEL_NAMES", "ModelFacts", "display_name", "model_order", "model_styles",
           "reference_model", "apply_model_overrides", "create_model", "get_model_config", "model_names", "parse_ratio",
           "register_model", "TextTransformer", "VisionTransformer",
           "ModelConfig", "Rule", "register_attention", "get_attention", "attention_names", "AttentionEntry",
           "PluginRecord", "add_plugins", "load_plugins", "loaded_plugins"]
