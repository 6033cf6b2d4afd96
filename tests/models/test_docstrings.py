"""Every public ``nn.Module`` of ``robustbench_dgsa.models`` documents its constructor's arguments in a Google
style ``Args:`` section (as timm's model files do), on the class or on its ``__init__``."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

from torch import nn

import robustbench_dgsa.models as models_pkg


def _public_modules() -> list[type]:
    found = {}
    for info in pkgutil.iter_modules(models_pkg.__path__):
        mod = importlib.import_module(f"{models_pkg.__name__}.{info.name}")
        for name, obj in vars(mod).items():
            if (inspect.isclass(obj) and issubclass(obj, nn.Module) and not name.startswith("_")
                    and obj.__module__ == mod.__name__):
                found[f"{obj.__module__}.{name}"] = obj
    return [found[k] for k in sorted(found)]


def _init_params(cls: type) -> list[str]:
    sig = inspect.signature(cls.__init__)
    return [p.name for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


_SECTION = re.compile(r"^[ \t]*(Returns|Raises|Yields|Examples?|Notes?|Shape|Attributes):", flags=re.MULTILINE)


def _documented(cls: type) -> set[str]:
    """Names listed (``name:`` or ``name (type):`` at a line's start) in the ``Args:`` sections of the class
    docstring and of its own ``__init__`` docstring; a section runs to the next section header or the end."""
    names: set[str] = set()
    docs = [cls.__doc__ or ""]
    if "__init__" in vars(cls):
        docs.append(cls.__init__.__doc__ or "")
    for doc in docs:
        if "Args:" not in doc:
            continue
        section = doc.split("Args:", 1)[1]
        end = _SECTION.search(section)
        section = section[:end.start()] if end else section
        names |= set(re.findall(r"^[ \t]*(\w+)(?: \([^)]*\))?:", section, flags=re.MULTILINE))
    return names


def test_the_check_sees_the_models():
    names = {c.__name__ for c in _public_modules()}
    assert {"VisionTransformer", "TextTransformer", "MultiheadSelfAttention", "GatedDifferentialAttention",
            "Block", "SwiGLUFFN"} <= names


def test_every_public_module_documents_its_constructor_arguments():
    missing = {}
    for cls in _public_modules():
        params = _init_params(cls)
        undocumented = [p for p in params if p not in _documented(cls)]
        if undocumented:
            missing[cls.__qualname__] = undocumented
    assert not missing, f"constructor arguments without an Args: entry: {missing}"


def test_the_check_catches_an_undocumented_argument():
    class Probe(nn.Module):
        """Something.

        Args:
            width: documented.
        """

        def __init__(self, width: int, depth: int) -> None:
            super().__init__()

    assert _documented(Probe) == {"width"} and _init_params(Probe) == ["width", "depth"]
