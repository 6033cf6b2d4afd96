"""The one option vocabulary of ``dgsa-bench``: shared option declarations, their parsers, and the checks of
output paths. Every command declares its common options through the functions below, so a flag is spelled,
abbreviated and parsed the same way everywhere:

``--corruption`` / ``--severity`` / ``--text-noise`` (one value, a comma list, ``all`` or — severities — a
range ``1-5``), ``--seed`` (one, a list or a range ``0-4``), ``--model``, ``--dataset``, ``--max-examples``,
``--device`` (``auto|cpu|cuda|cuda:N``), ``--json``, ``--quiet``.

Old spellings (``--corruptions``, ``--severities``, ``--seeds``, ``--noise``, ``--limit``, ``--max-test``,
``--models``, ``--datasets``) still parse as hidden aliases (:data:`HIDDEN_ALIASES`, added to every command by
:class:`VocabularyCommand`). Short flags have one meaning across all commands (:data:`SHORT_FLAGS`).

Corruption names, groups and severities are parsed by the ``corruptions`` registry; this module only adds the
flag name to its neutral messages.
"""
from __future__ import annotations

import contextlib
import copy
import os
import re
import typing
from pathlib import Path
from typing import Any, Iterable, Sequence

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

try:  # recent Typer vendors click as typer._click; older ones use click itself
    from typer._click.core import ParameterSource
    from typer._click.exceptions import BadParameter, ClickException, MissingParameter, UsageError
except ImportError:  # pragma: no cover - depends on the installed Typer
    from click.core import ParameterSource
    from click.exceptions import BadParameter, ClickException, MissingParameter, UsageError
try:
    from typer._click.exceptions import NoArgsIsHelpError
except ImportError:  # pragma: no cover
    try:
        from click.exceptions import NoArgsIsHelpError
    except ImportError:  # click < 8.2 prints the help itself
        class NoArgsIsHelpError(UsageError):  # type: ignore[no-redef]
            """Never raised by this click version."""

# For the error boundary in cli/__init__.py (one import place for click's exceptions).
BOUNDARY_EXCEPTIONS = (ClickException, NoArgsIsHelpError)

from robustbench_dgsa.config import DEVICE_PATTERN
from robustbench_dgsa.util.atomic import special_kind
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.lists import split_list  # the commands use it as opt.split_list

# One meaning per short flag, in every command that has the long option (and nowhere else).
SHORT_FLAGS = {"-c": "--checkpoint", "-d": "--dataset", "-i": "--input", "-j": "--workers", "-m": "--model",
               "-o": "--out", "-q": "--quiet", "-s": "--severity", "-t": "--text"}

# Old spellings: still accepted, never shown in --help. Canonical long name -> hidden names.
HIDDEN_ALIASES = {
    "--corruption": ("--corruptions",),
    "--severity": ("--severities",),
    "--seed": ("--seeds",),
    "--text-noise": ("--noise", "-n"),
    "--max-examples": ("--limit", "--max-test"),
    "--model": ("--models",),
    "--dataset": ("--datasets",),
}

DEVICE_HELP = "auto (cuda when available, else cpu), cpu, cuda or cuda:N."
_DEVICE_RE = re.compile(DEVICE_PATTERN)  # the config's rule for train.device


# ------------------------------------------------------------------------------------------------ parsers


def _flagged(option: str, e: Exception) -> Exception:
    """The library's neutral message with the flag name in front (same error type)."""
    return type(e)(f"{option}: {e}")


# Library keyword arguments (and functions) whose flag is not ``--`` + the name with dashes (config keys:
# ``--set key=value``).
_OPTION_FLAGS = {"corruptions": "--corruption", "severities": "--severity", "max_test": "--max-examples",
                 "out_dir": "--out", "train.lr": "--lr", "write_slurm_script": "without --submitit"}


def option_flag(name: str) -> str:
    """This CLI's flag for a library keyword argument or config key (``store_dataset`` -> ``--store-dataset``,
    ``train.grad_clip`` -> ``--set train.grad_clip``)."""
    if name in _OPTION_FLAGS:
        return _OPTION_FLAGS[name]
    return f"--set {name}" if "." in name else "--" + name.replace("_", "-")


def spell_flags(text: str, options: Iterable[str]) -> str:
    """A library message in this CLI's words: each keyword argument in ``options``, spelled ``name=value`` or
    ``(name)`` in the message, becomes its flag (``resume=True`` -> ``--resume``, ``dataset=cifar10`` ->
    ``--dataset cifar10``, ``train.grad_clip=1`` -> ``--set train.grad_clip=1``, ``(train.lr)`` -> ``(--lr)``)."""
    for name in options:
        flag = option_flag(name)

        def spelled(m: re.Match, flag: str = flag) -> str:
            value = m.group(1).strip("'\"")
            if flag.startswith("--set "):
                return f"{flag}={value}"
            return flag if value == "True" else f"{flag} {value}"
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}=([^\s;,)]+)", spelled, text)
        text = text.replace(f"({name})", f"({flag})")
    return text


def flag_message(e: BaseException) -> str:
    """The message of a library error with the keyword arguments it names (``e.options``) as flags."""
    return spell_flags(str(e), getattr(e, "options", ()))


@contextlib.contextmanager
def overwrite_flag(option: str = "--overwrite"):
    """Map the library's "output exists" error (``corruptions.errors.OutputExistsError``) to this flag."""
    from corruptions.errors import OutputExistsError
    try:
        yield
    except OutputExistsError as e:
        raise UserError(f"output exists in {e.directory}: {e.shown}; pass {option} to replace it") from None


def parse_corruptions(spec: str | Iterable[str] | None, option: str = "--corruption") -> list[str] | None:
    """Corruption names, groups (noise, blur, weather, digital) or sets (benchmark, extra, all) -> names in
    registry order; ``None`` when not given."""
    if spec is None:
        return None
    from corruptions.errors import CorruptionError
    from corruptions.registry import resolve_corruptions
    try:
        return list(resolve_corruptions(split_list(spec)))
    except CorruptionError as e:
        raise _flagged(option, e) from None


def parse_severities(spec: str | Iterable[str] | None, option: str = "--severity") -> list[int]:
    """``3``, ``1,3,5``, ``1-5`` or ``all`` -> sorted severities in 1..5; ``None`` -> 1..5."""
    from corruptions.errors import CorruptionError
    from corruptions.registry import parse_severities as parse
    text = ",".join(split_list(spec)) if spec is not None else "all"
    try:
        return [int(s) for s in parse(text)]
    except CorruptionError as e:
        raise _flagged(option, e) from None


def parse_text_noise(spec: str | Iterable[str] | None, option: str = "--text-noise") -> list[str] | None:
    """Text noise types, ``char``, ``word`` or ``all`` -> type names; ``None`` when not given."""
    if spec is None:
        return None
    from corruptions.errors import CorruptionError
    from corruptions.text import resolve_text_noise
    try:
        return list(resolve_text_noise(split_list(spec)))
    except CorruptionError as e:
        raise _flagged(option, e) from None


#: seeds are torch / numpy seeds (0..2**32-1); one command runs at most this many
SEED_MAX, MAX_SEEDS = 2**32 - 1, 10_000
#: parallel worker processes of one command
MAX_WORKERS = 1024


def parse_seeds(spec: str | Iterable[str] | None, option: str = "--seed", default: int = 0) -> list[int]:
    """``3``, ``0,2,7`` or ``0-4`` -> sorted unique seeds in 0..2**32-1 (ASCII digits; at most
    :data:`MAX_SEEDS`); ``None`` -> ``[default]``."""
    if spec is None:
        return [default]
    out: list[int] = []
    for part in split_list(spec):
        m = re.fullmatch(r"([0-9]+)\s*-\s*([0-9]+)|([0-9]+)", part)
        if m is None or (m.group(1) is not None and int(m.group(2)) < int(m.group(1))):
            raise UserError(f"{option}: cannot read {part!r}; give seeds >= 0 as one (3), a list (0,2,7) or a "
                            f"range (0-4)")
        lo, hi = (int(m.group(1)), int(m.group(2))) if m.group(1) is not None else (int(m.group(3)),) * 2
        if hi > SEED_MAX:
            raise UserError(f"{option}: seed {hi} is too large; seeds are 0..{SEED_MAX}")
        if hi - lo + 1 + len(out) > MAX_SEEDS:
            raise UserError(f"{option}: more than {MAX_SEEDS:,} seeds in {part!r}; give fewer")
        out.extend(range(lo, hi + 1))
    if not out:
        raise UserError(f"{option}: no seed given")
    return sorted(dict.fromkeys(out))


def parse_one_seed(spec: str | None, option: str = "--seed", default: int = 0) -> int:
    """A command that runs once takes exactly one seed."""
    seeds = parse_seeds(spec, option, default)
    if len(seeds) != 1:
        raise UserError(f"{option}: this command takes one seed, got {spec!r}")
    return seeds[0]


def check_gpu_ids(ids: Sequence[str], option: str = "--devices") -> list[str]:
    """GPU ids for workers (``0``, ``1`` or ``GPU-``/``MIG-`` UUIDs): no repeats, and numeric ids only where
    CUDA is available (else the jobs would quietly run on the CPU). One-line UserError otherwise."""
    bad = [d for d in ids if not re.fullmatch(r"[0-9]+|(GPU|MIG)-[0-9A-Za-z/-]+", d, flags=re.ASCII)]
    if bad:
        raise UserError(f"{option}: expected GPU ids such as 0,1,2 (or GPU-/MIG- UUIDs), got {', '.join(bad)}")
    seen = [d for i, d in enumerate(ids) if d in ids[:i]]
    if seen:
        raise UserError(f"{option}: GPU {seen[0]} is listed twice; give each GPU once (use --workers for several "
                        f"jobs per GPU)")
    if ids:
        import torch
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise UserError(f"{option} {','.join(ids)}: no CUDA GPU is available here; leave out {option} to "
                            f"run on the CPU")
        over = [d for d in ids if d.isdigit() and int(d) >= n]
        if over:
            raise UserError(f"{option}: GPU {over[0]} does not exist (this machine has {n}: 0-{n - 1})")
    return list(ids)


def check_device(value: str | None) -> str | None:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (case-insensitive) -> lower case; UserError otherwise."""
    if value is None:
        return None
    v = value.strip().lower()
    if not _DEVICE_RE.fullmatch(v):
        raise UserError(f"--device must be auto, cpu, cuda or cuda:N, got {value!r}")
    return v


def check_source(value: str | None, option: str = "--source") -> str | None:
    """A corrupted-data source of the store (official, regenerated, on-the-fly), or None; UserError otherwise."""
    from robustbench_dgsa.store import CORRUPTION_SOURCES
    if value is not None and value not in CORRUPTION_SOURCES:
        raise UserError(f"{option} must be one of {', '.join(CORRUPTION_SOURCES)}, got {value!r}")
    return value


def check_encoding(value: str, option: str = "--encoding") -> str:
    """``value`` when it names a text encoding (the data reader's check), else UserError naming ``option``."""
    from robustbench_dgsa.data.readers import check_encoding as check
    try:
        check(value)
    except UserError as e:
        raise _flagged(option, e) from None
    return value


def check_data_root(data_root: Path | None) -> Path | None:
    """``--data-root``: an existing folder, or not given."""
    if data_root is not None and not Path(data_root).is_dir():
        raise UserError(f"data root not found: {data_root}")
    return data_root


def check_corruption_dir(corruption_dir: Path | None) -> Path | None:
    """``--corruption-dir``: an existing folder, or not given."""
    if corruption_dir is not None and not Path(corruption_dir).is_dir():
        raise UserError(f"corruption directory not found: {corruption_dir}")
    return corruption_dir


# ------------------------------------------------------------------------------------------------ output paths


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_creatable(path: Path, option: str, what: str) -> None:
    """``path`` does not exist: its nearest existing ancestor must be a writable folder."""
    anc = _nearest_existing(path.parent if path.parent != path else path)
    if not anc.is_dir():
        raise UserError(f"{option} {path}: {anc} is a file, not a folder; choose another {what}")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: cannot create it, {anc} is read-only; choose a writable {what} or "
                        f"change the folder's permissions")


def check_output_dir(path: Path | str | None, option: str = "--out", store: bool = False) -> Path | None:
    """A folder a command will write into: existing and writable (with no symbolic link inside it, see
    :func:`check_no_links`), or creatable, and not in a results store (:func:`check_outputs`; ``store``: the
    folder is a store the command writes into, which may be one but not lie inside another). One-line UserError
    naming the path and what to do otherwise; nothing is created here."""
    if path is None:
        return None
    p = Path(path).expanduser()
    check_outputs({}, {option: p}) if store else check_outputs({option: p})
    if p.exists():
        if not p.is_dir():
            kind = special_kind(p) or "a file"
            raise UserError(f"{option} {p}: is {kind}, but a folder is expected; give a folder path")
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"{option} {p}: folder is read-only; choose a writable folder or change its "
                            f"permissions")
        check_no_links(p, option)
        return p
    _check_creatable(p, option, "folder")
    return p


def check_no_links(folder: Path | str | None, option: str = "--out", depth: int = 3) -> None:
    """Nothing inside an output folder (down to ``depth`` levels: run folders, ``store/``, ``store/rows/``, their
    files) may be a symbolic link: writing through one would change files outside the output. One-line
    UserError naming the link; the folder itself may be a link (the user named it). Hidden folders (``.venv``,
    ``.git``: never written into) are not searched, though a link named like one is still refused."""
    if folder is None:
        return
    level, todo = 0, [Path(folder).expanduser()]
    while todo and level < depth:
        found = []
        for d in todo:
            try:
                entries = list(os.scandir(d))
            except (NotADirectoryError, FileNotFoundError):
                continue
            for e in entries:
                if e.is_symlink():
                    raise UserError(f"{option} {folder}: {e.path} is a symbolic link (to {os.readlink(e.path)}); "
                                    f"the command writes only into real folders and files inside its output, so "
                                    f"remove the link or choose another folder")
                if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):  # not into .venv, .git
                    found.append(Path(e.path))
        todo, level = found, level + 1


def check_output_file(path: Path | str | None, option: str = "--out", suffixes: Sequence[str] = ()) -> Path | None:
    """A file a command will (over)write: not a folder, writable, its folder creatable. ``suffixes``: the
    allowed extensions (lower case, with the dot), if any."""
    if path is None:
        return None
    p = Path(path).expanduser()
    if suffixes and p.suffix.lower() not in suffixes:
        raise UserError(f"{option} must name a {'/'.join(suffixes)} file, got {p}")
    check_outputs({option: p})                       # not in a results store
    if p.is_dir():
        raise UserError(f"{option} {p}: is a folder, but a file is expected; give a file name such as "
                        f"{p / ('out' + (suffixes[0] if suffixes else ''))}")
    kind = special_kind(p)
    if kind is not None:  # /dev/full, a FIFO, /dev/stdout's pipe: never replaced by a regular file
        raise UserError(f"{option} {p}: is {kind}, not a regular file; give the path of a regular file")
    if p.exists():
        if not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK | os.X_OK):
            raise UserError(f"{option} {p}: file or its folder is read-only; choose another file name")
        return p
    _check_creatable(p, option, "file name")
    return p


def check_outputs(outputs: dict[str, Path | None], stores: dict[str, Path | None] | None = None) -> None:
    """Every path a command writes, by its flag (:func:`robustbench_dgsa.store.check_outputs`, the library's one
    check): none in or equal to a results store, a ``--store`` not inside another, no two the same."""
    from robustbench_dgsa.store import check_outputs as check

    check(outputs, stores)


# ------------------------------------------------------------------------------------------------ declarations
# Each returns a typer.Option; use as a parameter default: ``severity: str = options.severity()``.


def corruption(default: str | None = None, help: str | None = None) -> Any:
    return typer.Option(default, "--corruption", help=help or "Image corruptions: names, groups (noise, blur, "
                        "weather, digital), benchmark (15), extra (4) or all (19); comma-separated.")


def severity(default: str | None = None, help: str | None = None) -> Any:
    return typer.Option(default, "--severity", "-s",
                        help=help or "Severities: one (3), a list (1,3,5), a range (1-5) or all (default: 1-5).")


def text_noise(default: str | None = None, help: str | None = None) -> Any:
    return typer.Option(default, "--text-noise", help=help or "Text noise types, comma-separated, or char, "
                        "word, all (the 10 types and mixed).")


def seed(default: str | None = None, help: str | None = None) -> Any:
    return typer.Option(default, "--seed", help=help or "Seeds: one (3), a list (0,2,7) or a range (0-4).")


def ffn_ratio(default: str | None = None, help: str | None = None) -> Any:
    return typer.Option(default, "--ffn-ratio", help=help or "FFN expansion (the paper's proj.) of the SwiGLU models "
                        "(DViT, DGViT, DT, DGT), e.g. 16/3 for Table 2's second configuration; ViT and Transformer "
                        "keep theirs (default: the preset's, 4).")


def model(default: Any = None, help: str | None = None) -> Any:
    return typer.Option(default, "--model", "-m", help=help or "Registered model (see `dgsa-bench models`).")


def models(default: Any = None, help: str | None = None) -> Any:
    """Several models: comma-separated and/or repeated (``--model vit,dvit --model dgvit``)."""
    return typer.Option(default, "--model", "-m", help=help or "Models, comma-separated or repeated.")


def dataset(default: Any = None, help: str | None = None) -> Any:
    return typer.Option(default, "--dataset", "-d", help=help or "Dataset name (e.g. synthetic-vision, cifar10).")


def datasets(default: Any = None, help: str | None = None) -> Any:
    return typer.Option(default, "--dataset", "-d", help=help or "Datasets, comma-separated or repeated.")


def max_examples(default: int | None = None, help: str | None = None) -> Any:
    return typer.Option(default, "--max-examples", min=1, max=config_max("data.max_test"),
                        help=help or "Use only the first N examples.")


def _device_callback(value: str | None) -> str | None:
    try:
        return check_device(value)
    except UserError as e:
        raise typer.BadParameter(str(e).removeprefix("--device ")) from None


def device(default: str | None = "auto", help: str | None = None) -> Any:
    return typer.Option(default, "--device", callback=_device_callback, help=help or DEVICE_HELP)


COMPILE_HELP = ("Run the model through torch.compile (training step and evaluation forward); where it cannot "
                "compile, one warning and the plain path. Pays on long runs only: see README, Performance.")
AMP_HELP = ("Precision: auto (bf16 on CUDA and on CPUs with native bf16, AVX512-BF16 or AMX; fp32 elsewhere), "
            "bf16 or off (fp32). Recorded in every row.")


def amp(help: str) -> Any:
    """``--amp`` (auto | bf16 | off, or None for the command's default), checked when parsed."""
    def check(value: str | None) -> str | None:
        if value is not None and value not in ("auto", "bf16", "off"):
            raise typer.BadParameter(f"expected one of auto, bf16, off, got {value!r}")
        return value
    return typer.Option(None, "--amp", callback=check, help=AMP_HELP + " " + help)


def compile_(help: str | None = None) -> Any:
    return typer.Option(False, "--compile", help=help or COMPILE_HELP)


SET_HELP = ("Config override section.key=value (repeatable; e.g. --set train.epochs=30 --set model.dim=96), "
            "type- and range-checked; part of the run's identity.")


def set_(help: str | None = None) -> Any:
    """``--set KEY=VALUE`` (repeatable): the one config-override option of every command that builds configs."""
    return typer.Option(None, "--set", metavar="KEY=VALUE", help=help or SET_HELP)


def json_(help: str | None = None) -> Any:
    return typer.Option(False, "--json", help=help or "Print a machine-readable summary on stdout.")


def quiet(help: str | None = None) -> Any:
    return typer.Option(False, "--quiet", "-q",
                        help=help or "No progress bars (warnings and errors still go to stderr).")


def checkpoint(default: Any = None, help: str | None = None) -> Any:
    return typer.Option(default, "--checkpoint", "-c", help=help or "checkpoint.safetensors written by train.")


def pretrained(help: str | None = None) -> Any:
    return typer.Option(None, "--pretrained",
                        help=help or "A shipped trained model (see `dgsa-bench models --pretrained`): an entry name "
                                     "(dgvit-cifar10) or a bare model name where unambiguous (dgvit); comma-separated "
                                     "or repeated.")


def data_root(help: str | None = None) -> Any:
    return typer.Option(None, "--data-root", help=help or "Folder holding the dataset files (official layouts).")


def out(default: Any = None, help: str | None = None) -> Any:
    return typer.Option(default, "--out", "-o", help=help or "Output folder.")


def positive_float(default: float | None, name: str, help: str, le: float = 1e6) -> Any:
    """A float option in (0, ``le``]."""
    def check(value: float | None) -> float | None:
        if value is not None and not 0 < value <= le:
            raise typer.BadParameter(f"must be > 0 and <= {le:g}, got {value}")
        return value
    return typer.Option(default, name, callback=check, help=help)


def config_max(key: str) -> int | float:
    """The upper bound the config declares for ``section.name`` (one place per bound), for an option that sets
    the same value."""
    from robustbench_dgsa.config import upper_bound
    return upper_bound(key)


def _encoding_callback(value: str) -> str:
    try:
        return check_encoding(value)
    except UserError as e:
        raise typer.BadParameter(str(e).removeprefix("--encoding: ")) from None


def encoding(default: str = "utf-8", help: str | None = None) -> Any:
    return typer.Option(default, "--encoding", callback=_encoding_callback, help=help or "Encoding of a text file.")


# ------------------------------------------------------------------------------------------------ command class


class Interrupted(Exception):
    """Ctrl-C inside a command; carries the command path (``train``, ``sweep run``) for the resume hint."""

    def __init__(self, command: str) -> None:
        super().__init__(command)
        self.command = command


class Truncated(Exception):
    """An EOFError inside a command (a truncated file or archive), kept apart from click's "Aborted!"."""


_DEBUG = {"on": False}
_COMMAND_LINE: dict[str, list[str] | None] = {"args": None}


def set_command_line(args: list[str]) -> None:
    """Remember the arguments this run of ``dgsa-bench`` was given (for commands that start copies of themselves)."""
    _COMMAND_LINE["args"] = list(args)


def command_line() -> list[str]:
    """The arguments of this run of ``dgsa-bench`` (``sys.argv[1:]`` when not started through ``main``)."""
    import sys
    args = _COMMAND_LINE["args"]
    return list(sys.argv[1:] if args is None else args)


def debug_enabled() -> bool:
    return _DEBUG["on"]


def set_debug(on: bool) -> None:
    _DEBUG["on"] = bool(on)


def _hidden_copy(option: TyperOption, flag: str) -> TyperOption:
    """The same option (type, checks, multiplicity) under another, hidden name and without a default."""
    alias = copy.copy(option)
    alias.name = f"_alias_{option.name}_{flag.strip('-').replace('-', '_')}"
    alias.opts, alias.secondary_opts = [flag], []
    alias.hidden, alias.required, alias.default = True, False, None
    return alias


def _is_path_param(param: Any) -> bool:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is Path or (typing.get_origin(annotation) in (list, tuple)
                                  and Path in typing.get_args(annotation))


def _refuse_empty_path(param: Any) -> None:
    """A path option or argument given as ``''`` (or blanks) is a usage error: ``Path('')`` is the current
    folder, and a command would write there."""
    if not _is_path_param(param) or "process_value" in vars(param):
        return
    original = param.process_value

    def process_value(ctx: Any, value: Any) -> Any:
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str) and not v.strip():
                raise BadParameter("empty path; give a file or folder path", ctx=ctx, param=param)
        return original(ctx, value)
    param.process_value = process_value


def _no_type(ctx: Any) -> None:
    return None


class PlainFlags:
    """Boolean flags shown in Typer's plain form in --help (``--quick``, not ``--quick <bool>``): a flag takes
    no value, so it shows no value type; options that take a value keep theirs (``<path>``, ``<int>``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if getattr(p, "is_flag", False) and not getattr(p, "count", False):
                p.display_type_rich = _no_type
        return params


class PlainFlagsGroup(PlainFlags, TyperGroup):
    """A command group (the root ``dgsa-bench``, ``sweep``) whose flags show no ``<bool>``."""


class VocabularyCommand(PlainFlags, TyperCommand):
    """A command with the hidden old spellings of its options (:data:`HIDDEN_ALIASES`) and a hidden
    ``--debug``; an old spelling's value goes to the canonical option (giving both is a usage error).
    Ctrl-C and EOFError leave the command as :class:`Interrupted` / :class:`Truncated` for the CLI's error
    boundary (click would turn them into exit 130 / "Aborted!" without a word)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        taken = {o for p in self.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
        self._aliases: dict[str, tuple[str, str, str]] = {}  # alias param name -> (canonical, flag, alias flag)
        self._required: list[TyperOption] = []  # checked after the aliases are merged
        self._multiple = {p.name: bool(getattr(p, "multiple", False)) for p in self.params}
        for p in list(self.params):
            if not isinstance(p, TyperOption):
                continue
            for canonical, names in HIDDEN_ALIASES.items():
                if canonical not in p.opts:
                    continue
                for name in names:
                    if name in taken:
                        continue
                    if p.required:  # checked in invoke, after an old spelling may have given the value
                        p.required = False
                        p.help = f"{p.help or ''} Required.".strip()
                        self._required.append(p)
                    alias = _hidden_copy(p, name)
                    self.params.append(alias)
                    taken.add(name)
                    self._aliases[alias.name] = (p.name, canonical, name)
        for p in self.params:
            _refuse_empty_path(p)
        flags = [p for p in self.params if isinstance(p, TyperOption) and p.is_flag and not p.count]
        if "--debug" not in taken and flags:  # `dgsa-bench CMD ... --debug` as well as `dgsa-bench --debug CMD`
            debug = _hidden_copy(flags[0], "--debug")
            debug.name, debug.default = "_debug_flag", False
            self.params.append(debug)

    def invoke(self, ctx: Any) -> Any:
        if ctx.params.pop("_debug_flag", False):
            set_debug(True)
        given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
        for alias_name, (target, canonical, flag) in self._aliases.items():
            value = ctx.params.pop(alias_name, None)
            if ctx.get_parameter_source(alias_name) not in given:
                continue
            if ctx.get_parameter_source(target) in given:
                if not self._multiple.get(target):
                    raise UsageError(f"give {canonical} or its old spelling {flag}, not both", ctx)
                value = (*ctx.params[target], *value)  # repeatable: both spellings add up
            ctx.params[target] = value
        for p in self._required:
            if ctx.params.get(p.name) in (None, (), []):
                raise MissingParameter(ctx=ctx, param=p)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted(" ".join(ctx.command_path.split()[1:])) from None
        except EOFError as e:
            raise Truncated(str(e) or "unexpected end of file") from e


# --- outside models (evaluate, rollout) -------------------------------------------------------------------------

def timm(help: str | None = None) -> Any:
    return typer.Option(None, "--timm", help=help or "Instead of --checkpoint: a timm model by name (timm "
                        "installed), with --weights or --random-init.")


def weights(help: str | None = None) -> Any:
    return typer.Option(None, "--weights", help=help or "State dict for --timm / --module: .safetensors, or a "
                        ".pt/.pth read with torch.load(weights_only=True) (tensors only, never full unpickling).")


def random_init(help: str | None = None) -> Any:
    return typer.Option(False, "--random-init", help=help or "Allow --timm without --weights (untrained; "
                        "recorded as random_init and put into the model's name).")


def model_args(help: str | None = None) -> Any:
    return typer.Option(None, "--model-args", help=help or "Keyword arguments for the timm model or the factory, "
                        "e.g. img_size=32,patch_size=4,depth=6.")


def parse_model_args(text: str | None, option: str = "--model-args") -> dict[str, Any]:
    """``a=1,b=0.5,c=true,d=name`` -> {"a": 1, "b": 0.5, "c": True, "d": "name"}."""
    out: dict[str, Any] = {}
    for part in split_list(text):
        key, sep, value = part.partition("=")
        key, v = key.strip(), value.strip()
        if not sep or not key.isidentifier():
            raise UserError(f"{option} takes key=value pairs separated by commas, got {part!r}")
        if v.lower() in ("true", "false"):
            out[key] = v.lower() == "true"
            continue
        # ASCII only: int()/float() also read other scripts' digits ("٦٤"), which stay text here
        for cast in (int, float) if v.isascii() else ():
            try:
                out[key] = cast(v)
                break
            except ValueError:
                continue
        else:
            out[key] = v
    return out


def timm_norm(help: str | None = None) -> Any:
    return typer.Option(False, "--timm-norm", help=help or "Feed --timm / --module models timm's normalisation "
                        "(mean/std and input size of the model's data config) instead of the default raw [0, 1] "
                        "images at the data's own size (RobustBench's convention).")


def subset(help: str | None = None) -> Any:
    return typer.Option("first", "--subset", help=help or "Which --max-examples test examples: first (the first N "
                        "in official order, as RobustBench's n_examples), stratified (class-stratified, seed 0) or "
                        "auto (the first N unless they miss a class).")


DEFAULT_STORE = Path("runs/store")
