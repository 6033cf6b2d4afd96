"""Rendering shared by the command modules: JSON on stdout and Rich consoles that never squeeze a table."""
from __future__ import annotations

import json
from typing import Any

import typer


def echo_json(obj: Any, *, sort_keys: bool = False, **jsonable: Any) -> None:
    """``obj`` as indented JSON on stdout, made plain by ``to_jsonable(obj, **jsonable)`` (its ``nonfinite`` and
    ``fallback`` say what becomes of NaN/inf and of unknown objects)."""
    from robustbench_dgsa.util.jsonio import to_jsonable
    typer.echo(json.dumps(to_jsonable(obj, **jsonable), indent=2, sort_keys=sort_keys))


def console(min_width: int | None = None, max_width: int | None = None, **kwargs: Any) -> Any:
    """A Rich console on stdout; piped or redirected, at least ``min_width`` columns wide (None: unbounded), so
    a table in a log is never cut at 80 columns. ``max_width``: at most this wide (on a terminal: the terminal's
    width when narrower; piped: exactly this)."""
    from rich.console import Console
    probe = Console(**kwargs)
    if max_width is not None:
        return Console(width=min(probe.width, max_width) if probe.is_terminal else max_width, **kwargs)
    if probe.is_terminal:
        return probe
    return Console(width=100_000 if min_width is None else max(probe.width, min_width), **kwargs)


def token_list(summary: dict[str, Any]) -> str:
    """A rollout summary's strongest tokens as `"gripping" −0.144, "," +0.040`: each token quoted (so a comma
    token stays readable), with its signed relevance."""
    scores = summary.get("top_scores") or [None] * len(summary["top_tokens"])
    return ", ".join(json.dumps(str(t), ensure_ascii=False) + ("" if v is None else f" {v:+.3g}".replace("-", "−"))
                     for t, v in zip(summary["top_tokens"], scores))
