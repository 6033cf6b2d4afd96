"""The one splitter of comma lists (library arguments and CLI options alike)."""
from __future__ import annotations

from typing import Iterable

from robustbench_dgsa.util.errors import UserError


def split_list(values: str | Iterable[str] | None) -> list[str]:
    """Comma lists and repeated options, flattened: ``["a,b", "c"]`` -> ``["a", "b", "c"]`` (order kept,
    duplicates dropped); ``None`` -> ``[]``. A blank item in a comma list (``"0,,1"``, ``"a,"``) is a
    :class:`UserError`: it is a typo, not an item to skip."""
    if values is None:
        return []
    items = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for item in items:
        parts = [part.strip() for part in str(item).split(",")]
        if len(parts) > 1 and not all(parts):
            raise UserError(f"blank item in the list {str(item)!r}; separate the items with single commas")
        for part in parts:
            if part and part not in out:
                out.append(part)
    return out
