"""``dgsa-bench`` command line. Thin: each command parses its options and calls library functions.

Every command lives in its own module and registers on ``app``. User errors (bad paths, names, values)
become one red line on stderr and exit code 2; nothing half-written is left behind by the library.
"""
from __future__ import annotations

import importlib
import sys

from .app import app

# Command modules, in --help order. Each imports `app` and decorates its commands.
_COMMAND_MODULES = ["models_cmd", "corrupt_cmd", "train_cmd", "rollout_cmd", "compare_cmd", "report_cmd", "export_cmd"]
for _name in _COMMAND_MODULES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _e:  # a module not written yet during development
        if _e.name != f"{__name__}.{_name}":
            raise


def _user_error_types() -> tuple[type[BaseException], ...]:
    from robustbench_dgsa.util.errors import UserError
    types: list[type[BaseException]] = [UserError]
    try:
        from corruptions.errors import CorruptionError
        types.append(CorruptionError)
    except ImportError:
        pass
    return tuple(types)


def main() -> None:
    errors = _user_error_types()
    try:
        app()
    except errors as e:
        from rich.console import Console
        from rich.markup import escape
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(e))}")
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
