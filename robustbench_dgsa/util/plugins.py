"""Plugins: modules that register attention mechanisms, models and threat models (``register_attention``,
``register_model``, ``register_threat_model``), loaded the same way in every process the suite starts.

Where plugins come from, all imported once per process:

* the entry-point group ``dgsa_bench.plugins`` of every installed distribution (``importlib.metadata``); an entry
  point names a module (``sigmoid_attention``) or a callable run after the import (``pkg.mod:setup``);
* the environment variable ``DGSA_BENCH_PLUGINS``: module names separated by commas. ``--plugin MODULE`` (the CLI)
  and :func:`add_plugins` append to it, so the processes the suite starts (sweep workers, SLURM array tasks,
  torchrun / DDP ranks) inherit it and load the same plugins.

Each loaded plugin has a :class:`PluginRecord` (module, distribution and version, SHA-256 of its source), which
every run record stores (``util.provenance``) and checkpoints keep, so a checkpoint whose plugin is missing names
what to install. This module sits in the lowest layer and imports plugins by name only; registering is the
plugin's business (it imports ``robustbench_dgsa.models``).
"""
from __future__ import annotations

import hashlib
import importlib
import os
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from robustbench_dgsa.util.errors import UserError

ENTRY_POINT_GROUP = "dgsa_bench.plugins"
ENV_VAR = "DGSA_BENCH_PLUGINS"


@dataclass(frozen=True)
class PluginRecord:
    """One loaded plugin, as run records and checkpoints store it."""
    module: str            # the imported module
    distribution: str      # the installed distribution that provides it ("" when none does)
    version: str           # that distribution's version ("" when none)
    source_sha256: str     # SHA-256 over the module's source (every .py file of a package, by relative path)
    via: str               # "entry-point" | "environment" | "import" (it registered something when imported)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


_LOADED: dict[str, PluginRecord] = {}
_STARTED: set[str] = set()          # modules being (or already) imported: a plugin importing the suite is fine
_ENTRY_POINTS_DONE = False


def env_modules() -> list[str]:
    """The module names in ``DGSA_BENCH_PLUGINS`` (comma- or whitespace-separated), in order, without repeats."""
    raw = os.environ.get(ENV_VAR, "").replace(",", " ").split()
    return list(dict.fromkeys(raw))


def add_plugins(modules: Iterable[str]) -> list[PluginRecord]:
    """Load ``modules`` now and append them to ``DGSA_BENCH_PLUGINS`` so every process started from this one
    loads them too (``--plugin MODULE``). Returns the records of all loaded plugins."""
    wanted = [m.strip() for m in modules if m and m.strip()]
    if wanted:
        os.environ[ENV_VAR] = ",".join(dict.fromkeys(env_modules() + wanted))
    return load_plugins()


def load_plugins() -> list[PluginRecord]:
    """Import every plugin not yet imported: the entry points (once per process), then ``DGSA_BENCH_PLUGINS``.
    A plugin that fails to import is one UserError naming it."""
    global _ENTRY_POINTS_DONE
    if not _ENTRY_POINTS_DONE:
        _ENTRY_POINTS_DONE = True
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(ep, "dist", None)
            _load(ep.module, "entry-point", ep.attr, getattr(dist, "name", "") or "",
                  getattr(dist, "version", "") or "", f"entry point {ep.name!r} of {getattr(dist, 'name', '?')}")
    for module in env_modules():
        _load(module, "environment", None, "", "", f"{ENV_VAR}")
    return loaded_plugins()


def _load(module: str, via: str, attr: str | None, dist: str, version: str, where: str) -> None:
    if module in _STARTED:
        return
    _STARTED.add(module)
    try:
        mod = importlib.import_module(module)
        if attr:
            target: Any = mod
            for part in attr.split("."):
                target = getattr(target, part)
            if callable(target):
                target()
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise UserError(f"plugin {module!r} ({where}) is not installed (no module {e.name!r}); install its "
                            f"package or remove it from {ENV_VAR}") from None
        raise UserError(f"plugin {module!r} ({where}) failed to import: {_one_line(e)}") from None
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of someone else's module: one line naming it
        raise UserError(f"plugin {module!r} ({where}) failed to import: {_one_line(e)}") from None
    if not dist:
        dist, version = _distribution_of(module)
    _LOADED[module] = PluginRecord(module, dist, version, source_sha256(mod), via)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def _distribution_of(module: str) -> tuple[str, str]:
    """(distribution, version) of the installed distribution providing ``module``'s top-level package."""
    top = module.split(".")[0]
    for name in metadata.packages_distributions().get(top, []):
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "", ""


def source_sha256(mod: Any) -> str:
    """SHA-256 over a module's source: its file, or for a package every ``.py`` below its folder (path + bytes)."""
    path = Path(getattr(mod, "__file__", "") or "")
    if not path.is_file():
        return ""
    h = hashlib.sha256()
    if path.name == "__init__.py":
        files = sorted(p for p in path.parent.rglob("*.py") if "__pycache__" not in p.parts)
        for p in files:
            h.update(p.relative_to(path.parent).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def loaded_plugins() -> list[PluginRecord]:
    """The plugins loaded in this process, in load order."""
    return list(_LOADED.values())


def plugin_records() -> list[dict[str, str]]:
    """:func:`loaded_plugins` as JSON-ready dicts (run records, checkpoint meta)."""
    return [r.to_dict() for r in _LOADED.values()]


def plugin_modules() -> list[str]:
    """The modules of the loaded plugins that a process started from this one can import too: those from entry
    points and DGSA_BENCH_PLUGINS, and modules that registered something when imported and belong to an installed
    distribution (a module imported from elsewhere reaches other processes only when named in DGSA_BENCH_PLUGINS)."""
    return [m for m, r in _LOADED.items() if r.via != "import" or r.distribution]


def missing_hint(records: Iterable[dict[str, Any]] = ()) -> str:
    """The end of an error line about a name no loaded plugin registers: which plugin to install (from stored
    ``records``), or how plugins are found."""
    missing = [r for r in records if isinstance(r, dict) and r.get("module") and r["module"] not in _LOADED]
    if missing:
        r = missing[0]
        pkg = f"pip install {r['distribution']}" + (f"=={r['version']}" if r.get("version") else "") \
            if r.get("distribution") else f"install the package providing module {r['module']!r}"
        return f"; it comes from plugin {r['module']!r}: {pkg}, or set {ENV_VAR}={r['module']}"
    return (f"; a plugin's names appear once its package is installed (entry point group {ENTRY_POINT_GROUP}) "
            f"or its module is named in {ENV_VAR}")



def note_registration(module: str) -> None:
    """Called by ``register_attention`` / ``register_model`` / ``register_threat_model``: a registration made by a module outside the suite
    makes that module a plugin of this process (recorded; named to the processes it starts, :func:`child_env`,
    when an installed distribution provides it), however it was imported. ``__main__`` cannot be imported elsewhere and is not recorded."""
    if module in _LOADED or module == "__main__" or module.split(".")[0] == "robustbench_dgsa":
        return
    mod = sys.modules.get(module)
    if mod is None:
        return
    _STARTED.add(module)
    dist, version = _distribution_of(module)
    _LOADED[module] = PluginRecord(module, dist, version, source_sha256(mod), "import")


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) with ``DGSA_BENCH_PLUGINS`` naming every loaded plugin, for a
    process this one starts (sweep workers, DDP ranks): it imports the same plugins."""
    out = dict(os.environ if env is None else env)
    names = [m for m in out.get(ENV_VAR, "").replace(",", " ").split() if m] + plugin_modules()
    if names:
        out[ENV_VAR] = ",".join(dict.fromkeys(names))
    return out
