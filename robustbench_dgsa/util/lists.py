"""The one splitter of comma lists (library arguments and CLI options alike)."""
from __future__ import annotations

from typing import Iterable


def split_list(values: str | Iterable[str] | None) -> list[str]:
    """Comma lists and repeated options, flattened: ``["a,b", "c"]`` -> ``["a", "b", "c"]`` (order kept,
    duplicates dropped, blanks ignored); ``None`` -> ``[]``."""
    if values is None:
        return []
    items = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out
