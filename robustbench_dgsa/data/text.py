"""Text datasets in their official layouts, plus generic CSV/TSV/JSONL files.

All loaders return :class:`TextData` (raw texts; tokenisation is :mod:`.vocab`'s job) in a fixed order.
Files are searched in ``<root>``, ``<root>/text`` and dataset sub-folders; a folder may be replaced by the
dataset's archive (``aclImdb.tar.xz`` / ``aclImdb_v1.tar.gz``, ``20news-bydate.tar.xz`` / ``.tar.gz``,
``rt-polaritydata.tar.xz`` / ``.tar.gz``), which is read once and cached decoded (see :mod:`.cache`).

* ``imdb``: ``aclImdb/{train,test}/{neg,pos}/<id>_<rating>.txt``, UTF-8; labels neg = 0, pos = 1; order: all neg
  files by id, then all pos files by id. ``<br />`` tags are kept in the text (the tokeniser drops them).
  From an archive, reading stops once the requested split holds the official 12,500 + 12,500 reviews (the
  shared archive lists test first, so the test split is read from the first half only); each split is
  cached separately.
* ``20newsgroups``: ``20news-bydate-{train,test}/<group>/<id>``, decoded as latin-1; classes = the groups in
  alphabetical order (as scikit-learn); order: by group, then by message id. Option
  ``remove=("headers", "footers", "quotes")`` (default; pass ``()`` or ``"none"`` for raw messages) strips
  the parts that scikit-learn's ``fetch_20newsgroups(remove=...)`` strips, with the same rules:
  headers = everything before the first blank line; footers = from the last line made only of dashes/space
  (a signature separator) to the end, when that line is not the first; quotes = lines containing
  "writes in", "writes:", "wrote:", "says:", "said:" or starting with "In article", "Quoted from", "|" or ">".
* ``rotten-tomatoes``: ``rt-polaritydata/rt-polarity.{pos,neg}``, one sentence per line. The authors define no
  split. Default (``split_mode="hf"``): the deterministic Hugging Face ``rotten_tomatoes`` split, which is exact:
  lines stripped, per class ``i1 = int(5331*0.8+0.5) = 4265``, ``i2 = int(5331*0.9+0.5) = 4798``;
  train = pos[:i1] + neg[:i1] (8,530), validation = pos[i1:i2] + neg[i1:i2] (1,066), test = pos[i2:] + neg[i2:]
  (1,066); labels neg = 0, pos = 1. ``split_mode="seeded"``: a stratified 80/10/10 split drawn with ``seed``.
  Decoding: ``encoding="cp1252"`` (default; the files' real encoding, bytes undefined in cp1252 fall back to
  latin-1) or ``"latin-1"`` (what the Hugging Face script does; gives identical texts except that cp1252's
  curly quotes/dashes become C1 control characters). Lines are split on ``\\n`` only.
* ``agnews``: ``train.csv`` / ``test.csv`` without header: class (1-4), title, description; label = class - 1;
  text = title + " " + description; classes World, Sports, Business, Sci/Tech (or ``classes.txt``).
* ``mnli``: GLUE ``MNLI/train.tsv`` (split train) and ``dev_matched.tsv`` (split test; ``dev_mismatched.tsv`` is
  split ``test-mismatched``); columns by header name ``sentence1``, ``sentence2``, ``gold_label``; rows whose
  label is not entailment/neutral/contradiction are skipped; text = premise + " <sep> " + hypothesis;
  labels entailment = 0, neutral = 1, contradiction = 2 (GLUE order).
* generic files (see :func:`load_text_file`).
"""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from robustbench_dgsa.util.errors import DataError, UserError
from . import cache, readers
from .locate import bases, find_first, missing_error
from .splits import stratified_split

IMDB_CLASSES = ["neg", "pos"]
NEWSGROUPS_CLASSES = [
    "alt.atheism", "comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware",
    "comp.windows.x", "misc.forsale", "rec.autos", "rec.motorcycles", "rec.sport.baseball", "rec.sport.hockey",
    "sci.crypt", "sci.electronics", "sci.med", "sci.space", "soc.religion.christian", "talk.politics.guns",
    "talk.politics.mideast", "talk.politics.misc", "talk.religion.misc"]
RT_CLASSES = ["neg", "pos"]
AGNEWS_CLASSES = ["World", "Sports", "Business", "Sci/Tech"]
MNLI_CLASSES = ["entailment", "neutral", "contradiction"]
SEP_JOIN = " <sep> "

HINTS = {
    "imdb": "<root>/aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt (or the archive <root>/text/aclImdb.tar.xz "
            "or <root>/aclImdb_v1.tar.gz)",
    "20newsgroups": "<root>/20news-bydate-{train,test}/<group>/<id> (or the archive "
                    "<root>/text/20news-bydate.tar.xz or <root>/20news-bydate.tar.gz)",
    "rotten-tomatoes": "<root>/rt-polaritydata/rt-polarity.{pos,neg} (or the archive "
                       "<root>/text/rt-polaritydata.tar.xz or <root>/rt-polaritydata.tar.gz)",
    "agnews": "<root>/ag_news_csv/{train,test}.csv (no header; columns class 1-4, title, description)",
    "mnli": "<root>/MNLI/{train,dev_matched}.tsv (GLUE format, with header)",
}
_SUBDIRS = {
    "imdb": ["text", "imdb", "IMDB"],
    "20newsgroups": ["text", "20newsgroups", "20news", "20news-bydate"],
    "rotten-tomatoes": ["text", "rotten-tomatoes", "rotten_tomatoes", "rt-polarity"],
    "agnews": ["ag_news_csv", "ag_news", "agnews", "AG_NEWS", "ag-news", "text/ag_news_csv", "text/agnews",
               "text"],
    "mnli": ["MNLI", "glue_data/MNLI", "glue/MNLI", "mnli", "text/MNLI", "text/mnli", "multinli_1.0"],
}


@dataclass
class TextData:
    """A text split. ``salient``: per text, the word positions (in ``text.split()``) of the class tokens."""
    texts: list[str]
    y: np.ndarray
    classes: list[str]
    name: str
    source: str
    salient: list[list[int]] | None = None

    modality = "text"  # class attribute, not a field

    def __post_init__(self) -> None:
        self.texts = list(self.texts)
        self.y = np.asarray(self.y, dtype=np.int64)
        if len(self.y) != len(self.texts):
            raise DataError(f"{self.name}: {len(self.texts)} texts but {len(self.y)} labels ({self.source})")
        if self.salient is not None and len(self.salient) != len(self.texts):
            raise DataError(f"{self.name}: salient positions for {len(self.salient)} of {len(self.texts)} texts")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def subset(self, idx) -> "TextData":
        """A new TextData with the examples at ``idx`` (in that order)."""
        idx = [int(i) for i in np.asarray(idx, dtype=np.int64)]
        return replace(self, texts=[self.texts[i] for i in idx], y=self.y[idx],
                       salient=None if self.salient is None else [list(self.salient[i]) for i in idx])


def _unknown_split(name: str, split: str, valid: Sequence[str]) -> UserError:
    return UserError(f"{name}: unknown split {split!r} (valid: {', '.join(valid)})")


# --- trees: a folder or an archive with the official layout -----------------------------------------------------

def _tree_files(kind: str, path: Path, anchor: Callable[[list[str]], int | None],
                subdirs: Sequence[str] = ()) -> Iterator[tuple[str, bytes]]:
    """Yield ``(path relative to the dataset folder, bytes)``.

    ``anchor(parts)`` gives the index of the first part below the dataset folder (None: skip the file).
    For a folder, only ``path/<sub>`` for ``sub`` in ``subdirs`` is walked (all of ``path`` when empty).
    """
    if kind == "dir":
        tops = [path / s for s in subdirs if (path / s).is_dir()] if subdirs else [path]
        for top in tops:
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames.sort()
                rel_dir = Path(dirpath).relative_to(path).parts
                for f in sorted(filenames):
                    parts = [*rel_dir, f]
                    i = anchor(parts)
                    if i is not None:
                        with open(Path(dirpath) / f, "rb") as fh:
                            yield "/".join(parts[i:]), fh.read()
    else:
        for member, read in cache.iter_archive(path):
            parts = [p for p in member.split("/") if p not in ("", ".")]
            i = anchor(parts)
            if i is not None:
                yield "/".join(parts[i:]), read()


def _anchor_after(folder: str) -> Callable[[list[str]], int | None]:
    """Members below a component named ``folder`` (e.g. 'aclImdb')."""
    def f(parts: list[str]) -> int | None:
        for i, p in enumerate(parts[:-1]):
            if p == folder:
                return i + 1
        return None
    return f


def _cached_or_parse(label: str, kind: str, path: Path, parse: Callable[[], dict]) -> dict:
    """Parse a tree; for archives, cache the parsed result (JSON) keyed by the archive identity."""
    if kind == "dir":
        return parse()
    entry = cache.cached_dir("decoded", label, cache.file_key(path),
                             lambda tmp: cache.save_json(tmp, "data.json", parse()))
    return cache.load_json(entry, "data.json")


# --- IMDB ------------------------------------------------------------------------------------------------------

_IMDB_RE = re.compile(r"^(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")


def load_imdb(split: str, root: Path, download: bool = False) -> TextData:
    if split not in ("train", "test"):
        raise _unknown_split("imdb", split, ("train", "test"))
    places = bases(root, _SUBDIRS["imdb"])
    kind, path = "dir", find_first(places, ["aclImdb"], kind="dir")
    if path is None and root.name == "aclImdb" and (root / split).is_dir():
        path = root
    if path is not None:
        anchor = lambda parts: 0  # noqa: E731  (paths are already relative to aclImdb/)
    else:
        kind, path = "archive", find_first(places, ["aclImdb.tar.xz", "aclImdb_v1.tar.gz", "aclImdb.tar.gz"],
                                           kind="file")
        anchor = _anchor_after("aclImdb")
    if path is None:
        raise missing_error("imdb", root, HINTS["imdb"], looked=places,
                            markers=["aclImdb", "aclImdb.tar.xz", "aclImdb_v1.tar.gz"])

    if kind == "dir" and not (path / split).is_dir():
        raise DataError(f"imdb: {path / split} is missing; expected {HINTS['imdb'].replace('<root>', str(root))}")
    if kind == "dir":
        data = _imdb_parse(_tree_files(kind, path, anchor, [split]), split)[0][split]
    else:
        data = _imdb_from_archive(path, split)
    if not data["texts"]:
        raise DataError(f"imdb: no reviews {split}/{{pos,neg}}/<id>_<rating>.txt in {path}")
    return TextData(data["texts"], np.array(data["y"]), list(IMDB_CLASSES), "imdb", f"{path} ({split})")


IMDB_OFFICIAL_PER_CLASS = 12500


def _imdb_parse(files: Iterable[tuple[str, bytes]], split: str) -> tuple[dict, set[str]]:
    """Parse reviews; stop early once ``split`` holds the official 12,500 + 12,500 reviews.

    Returns ``({split: {"texts", "y"}}, complete)``: ``complete`` names the splits known to be whole (those
    with the official counts, or every split when the input was read to its end).
    """
    rows: dict[str, list] = {"train": [], "test": []}
    counts = {(s, c): 0 for s in rows for c in (0, 1)}
    complete: set[str] = set()
    full = {s: lambda s=s: counts[(s, 0)] == counts[(s, 1)] == IMDB_OFFICIAL_PER_CLASS for s in rows}
    for rel, data in files:
        m = _IMDB_RE.match(rel)
        if not m:
            continue
        s, lab, idx = m.group(1), IMDB_CLASSES.index(m.group(2)), int(m.group(3))
        rows[s].append((lab, idx, data.decode("utf-8", errors="replace")))
        counts[(s, lab)] += 1
        if full[split]():
            complete = {t for t in rows if full[t]()}
            break
    else:
        complete = set(rows)
    result = {}
    for s, rs in rows.items():
        rs.sort(key=lambda r: (r[0], r[1]))
        result[s] = {"texts": [r[2] for r in rs], "y": [r[0] for r in rs]}
    return result, complete


def _imdb_from_archive(path: Path, split: str) -> dict:
    """Read one split from the archive, cached per split (JSON). The shared archive lists test before train,
    so the test split is read without decompressing the train half."""
    key = cache.file_key(path)
    entry = cache.cache_root() / "decoded" / f"imdb-{split}-{key}"
    if (entry / ".complete").is_file():
        return cache.load_json(entry, "data.json")
    parsed, complete = _imdb_parse(_tree_files("archive", path, _anchor_after("aclImdb")), split)
    for s in complete | {split}:
        cache.cached_dir("decoded", f"imdb-{s}", key, lambda tmp, d=parsed[s]: cache.save_json(tmp, "data.json", d))
    return parsed[split]


# --- 20 Newsgroups ---------------------------------------------------------------------------------------------

_QUOTE_RE = re.compile(r"(writes in|writes:|wrote:|says:|said:|^In article|^Quoted from|^\||^>)")


def strip_newsgroup_header(text: str) -> str:
    """Drop everything up to the first blank line (the message headers)."""
    _, _, after = text.partition("\n\n")
    return after


_QUOTE_WORDS = ("writes in", "writes:", "wrote:", "says:", "said:")
_QUOTE_STARTS = ("In article", "Quoted from", "|", ">")


def _is_quote_line(line: str) -> bool:
    """Same test as ``_QUOTE_RE.search(line)`` (lines hold no newline, so ``^`` is the line start), faster."""
    return line.startswith(_QUOTE_STARTS) or any(w in line for w in _QUOTE_WORDS)


def strip_newsgroup_quoting(text: str) -> str:
    """Drop quoted lines and attribution lines ("... writes:")."""
    return "\n".join(line for line in text.split("\n") if not _is_quote_line(line))


def strip_newsgroup_footer(text: str) -> str:
    """Drop a signature block: from the last line made only of dashes/whitespace, if it is not the first line."""
    lines = text.strip().split("\n")
    line_num = 0
    for line_num in range(len(lines) - 1, -1, -1):
        if lines[line_num].strip().strip("-") == "":
            break
    if line_num > 0:
        return "\n".join(lines[:line_num])
    return text


_NEWS_PARTS = ("headers", "footers", "quotes")


def _parse_remove(remove) -> tuple[str, ...]:
    if remove is None or remove is False or (isinstance(remove, str) and remove.lower() in ("", "none")):
        return ()
    if isinstance(remove, str):
        remove = [r.strip() for r in remove.split(",") if r.strip()]
    remove = tuple(remove)
    bad = [r for r in remove if r not in _NEWS_PARTS]
    if bad:
        raise UserError(f"20newsgroups: remove accepts {', '.join(_NEWS_PARTS)}; got {', '.join(bad)}")
    return remove


def load_20newsgroups(split: str, root: Path, download: bool = False, *,
                      remove: Iterable[str] | str | None = _NEWS_PARTS) -> TextData:
    if split not in ("train", "test"):
        raise _unknown_split("20newsgroups", split, ("train", "test"))
    remove = _parse_remove(remove)
    places = bases(root, _SUBDIRS["20newsgroups"])
    folder = f"20news-bydate-{split}"
    kind, path = "dir", None
    for p in places:
        if (p / folder).is_dir():
            path = p
            break
    if path is None:
        kind, path = "archive", find_first(places, ["20news-bydate.tar.xz", "20news-bydate.tar.gz"], kind="file")
    if path is None:
        raise missing_error("20newsgroups", root, HINTS["20newsgroups"], looked=places,
                            markers=[folder, "20news-bydate.tar.xz", "20news-bydate.tar.gz"])

    def anchor(parts: list[str]) -> int | None:
        for i, p in enumerate(parts[:-2]):
            if p in ("20news-bydate-train", "20news-bydate-test"):
                return i
        return None

    def parse() -> dict:
        rows: dict[str, list] = {"train": [], "test": []}
        subs = ["20news-bydate-train", "20news-bydate-test"] if kind == "dir" else ()
        for rel, data in _tree_files(kind, path, anchor, subs):
            parts = rel.split("/")
            if len(parts) != 3:
                continue
            s = parts[0].rsplit("-", 1)[1]
            name = parts[2]
            rows[s].append((parts[1], (0, int(name), "") if name.isdigit() else (1, 0, name),
                            data.decode("latin-1")))
        result = {}
        for s, rs in rows.items():
            rs.sort(key=lambda r: (r[0], r[1]))
            result[s] = {"groups": [r[0] for r in rs], "texts": [r[2] for r in rs]}
        return result

    parsed = _cached_or_parse("20news-bydate", kind, path, parse)
    groups = sorted(set(parsed["train"]["groups"])) or sorted(set(parsed[split]["groups"]))
    data = parsed[split]
    if not data["texts"]:
        raise DataError(f"20newsgroups: no messages {folder}/<group>/<id> in {path}")
    unknown = sorted(set(data["groups"]) - set(groups))
    if unknown:
        raise DataError(f"20newsgroups: groups {', '.join(unknown)} are in the {split} split but not in train")
    index = {g: i for i, g in enumerate(groups)}
    texts = data["texts"]
    if "headers" in remove:
        texts = [strip_newsgroup_header(t) for t in texts]
    if "footers" in remove:
        texts = [strip_newsgroup_footer(t) for t in texts]
    if "quotes" in remove:
        texts = [strip_newsgroup_quoting(t) for t in texts]
    note = f"removed {', '.join(remove)}" if remove else "raw messages"
    return TextData(texts, np.array([index[g] for g in data["groups"]], dtype=np.int64), groups, "20newsgroups",
                    f"{path if kind == 'archive' else path / folder} ({split}, latin-1, {note})")


# --- Rotten Tomatoes -------------------------------------------------------------------------------------------

RT_SPLITS = ("train", "validation", "test")


def _decode_line(b: bytes, encoding: str) -> str:
    if encoding.lower().replace("_", "-") in ("cp1252", "windows-1252"):
        try:
            return b.decode("cp1252")
        except UnicodeDecodeError:
            return "".join(bytes([c]).decode("cp1252", errors="ignore") or chr(c) for c in b)
    return b.decode(encoding)


def _rt_lines(raw: bytes, encoding: str) -> list[str]:
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [_decode_line(b, encoding).strip() for b in lines]


def load_rotten_tomatoes(split: str, root: Path, download: bool = False, *, seed: int = 0,
                         split_mode: str = "hf", encoding: str = "cp1252") -> TextData:
    if split not in RT_SPLITS:
        raise _unknown_split("rotten-tomatoes", split, RT_SPLITS)
    if split_mode not in ("hf", "seeded"):
        raise UserError(f"rotten-tomatoes: split_mode must be hf or seeded, got {split_mode!r}")
    try:
        "".encode(encoding)
    except LookupError:
        raise UserError(f"rotten-tomatoes: unknown encoding {encoding!r}") from None
    places = bases(root, _SUBDIRS["rotten-tomatoes"])
    raw: dict[str, bytes] = {}
    where = None
    for p in places:
        for cand in (p / "rt-polaritydata", p):
            if (cand / "rt-polarity.pos").is_file() and (cand / "rt-polarity.neg").is_file():
                raw = {s: (cand / f"rt-polarity.{s}").read_bytes() for s in ("pos", "neg")}
                where = cand
                break
        if where is not None:
            break
    if where is None:
        archive = find_first(places, ["rt-polaritydata.tar.xz", "rt-polaritydata.tar.gz", "rt-polaritydata.zip"],
                             kind="file")
        if archive is not None:
            for member, read in cache.iter_archive(archive):
                name = member.rsplit("/", 1)[-1]
                if name in ("rt-polarity.pos", "rt-polarity.neg"):
                    raw[name.rsplit(".", 1)[1]] = read()
            if len(raw) == 2:
                where = archive
            else:
                raise DataError(f"rotten-tomatoes: {archive} does not contain rt-polarity.pos and rt-polarity.neg")
    if where is None:
        raise missing_error("rotten-tomatoes", root, HINTS["rotten-tomatoes"], looked=places,
                            markers=["rt-polarity.pos", "rt-polaritydata", "rt-polaritydata.tar.gz"])
    pos, neg = _rt_lines(raw["pos"], encoding), _rt_lines(raw["neg"], encoding)
    if split_mode == "hf":
        if len(pos) != len(neg):
            raise DataError(f"rotten-tomatoes: rt-polarity.pos has {len(pos)} lines but rt-polarity.neg has "
                            f"{len(neg)}; the Hugging Face split needs equal counts (use split_mode='seeded')")
        i1, i2 = int(len(pos) * 0.8 + 0.5), int(len(pos) * 0.9 + 0.5)
        sl = {"train": slice(0, i1), "validation": slice(i1, i2), "test": slice(i2, None)}[split]
        texts = pos[sl] + neg[sl]
        y = np.array([1] * len(pos[sl]) + [0] * len(neg[sl]), dtype=np.int64)
        note = f"Hugging Face rotten_tomatoes split (deterministic 80/10/10 per class: {i1}/{i2 - i1}/{len(pos) - i2})"
    else:
        all_texts = pos + neg
        all_y = np.array([1] * len(pos) + [0] * len(neg), dtype=np.int64)
        train_idx, hold = stratified_split(all_y, 0.2, seed)
        val_rel, test_rel = stratified_split(all_y[hold], 0.5, seed + 1)
        idx = {"train": train_idx, "validation": hold[val_rel], "test": hold[test_rel]}[split]
        texts, y = [all_texts[i] for i in idx], all_y[idx]
        note = f"seeded stratified 80/10/10 split, seed {seed}"
    return TextData(texts, y, list(RT_CLASSES), "rotten-tomatoes", f"{where} ({split}: {note}; {encoding})")


# --- AG News ---------------------------------------------------------------------------------------------------

def load_agnews(split: str, root: Path, download: bool = False) -> TextData:
    if split not in ("train", "test"):
        raise _unknown_split("agnews", split, ("train", "test"))
    places = bases(root, _SUBDIRS["agnews"])
    path = find_first(places, [f"{split}.csv"], kind="file")
    if path is None:
        raise missing_error("agnews", root, HINTS["agnews"], looked=places, markers=[f"{split}.csv", "ag_news_csv"])
    classes = list(AGNEWS_CLASSES)
    ctxt = path.parent / "classes.txt"
    if ctxt.is_file():
        names = [ln.strip() for ln in ctxt.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if names:
            classes = names
    texts, ys = [], []
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for lineno, row in enumerate(csv.reader(f), 1):
            if not row:
                continue
            if lineno == 1 and not row[0].strip().isdigit():
                continue  # a header row (some mirrors add one)
            if len(row) < 3 or not row[0].strip().isdigit():
                raise DataError(f"agnews: {path} row {lineno} is not 'class,title,description' "
                                f"(got {len(row)} fields starting {row[0][:20]!r})")
            c = int(row[0]) - 1
            if not 0 <= c < len(classes):
                raise DataError(f"agnews: {path} row {lineno} has class {c + 1}, expected 1..{len(classes)}")
            texts.append(row[1] + " " + " ".join(row[2:]))
            ys.append(c)
    if not texts:
        raise DataError(f"agnews: {path} holds no rows")
    return TextData(texts, np.array(ys, dtype=np.int64), classes, "agnews", f"{path} (title + description)")


# --- MNLI ------------------------------------------------------------------------------------------------------

MNLI_FILES = {"train": ["train.tsv", "multinli_1.0_train.txt"],
              "test": ["dev_matched.tsv", "multinli_1.0_dev_matched.txt"],
              "test-mismatched": ["dev_mismatched.tsv", "multinli_1.0_dev_mismatched.txt"]}


def load_mnli(split: str, root: Path, download: bool = False) -> TextData:
    if split not in MNLI_FILES:
        raise _unknown_split("mnli", split, tuple(MNLI_FILES))
    places = bases(root, _SUBDIRS["mnli"])
    path = find_first(places, MNLI_FILES[split], kind="file")
    if path is None:
        hint = HINTS["mnli"] if split != "test-mismatched" else "<root>/MNLI/dev_mismatched.tsv (GLUE format)"
        raise missing_error(f"mnli (split {split})", root, hint, looked=places, markers=MNLI_FILES[split])
    label_index = {c: i for i, c in enumerate(MNLI_CLASSES)}
    texts, ys = [], []
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        header = f.readline().rstrip("\r\n").split("\t")
        try:
            i1, i2, il = header.index("sentence1"), header.index("sentence2"), header.index("gold_label")
        except ValueError:
            raise DataError(f"mnli: {path} header lacks sentence1/sentence2/gold_label "
                            f"(found: {', '.join(header[:12])})") from None
        need = max(i1, i2, il)
        for lineno, line in enumerate(f, 2):
            line = line.rstrip("\r\n")
            if not line:
                continue
            cols = line.split("\t")
            if len(cols) <= need:
                raise DataError(f"mnli: {path} line {lineno} has {len(cols)} tab-separated fields, "
                                f"expected at least {need + 1}")
            lab = cols[il].strip()
            if lab not in label_index:
                continue  # "-" (no gold label) in the original MultiNLI files
            texts.append(cols[i1].strip() + SEP_JOIN + cols[i2].strip())
            ys.append(label_index[lab])
    if not texts:
        raise DataError(f"mnli: {path} holds no labelled rows")
    return TextData(texts, np.array(ys, dtype=np.int64), list(MNLI_CLASSES), "mnli",
                    f"{path} (premise <sep> hypothesis)")


# --- generic CSV / TSV / JSONL ---------------------------------------------------------------------------------

TEXT_FILE_EXTS = readers.TEXT_TABLE_EXTS


def _columns(text_column: str | Sequence[str]) -> list[str]:
    if isinstance(text_column, str):
        return [c.strip() for c in text_column.split(",") if c.strip()]
    return list(text_column)


def _table_texts(table: readers.Table, text_cols: list[str], label_column: str) -> tuple[list[str], list]:
    path, rows = table.path, table.rows
    if not rows:
        raise DataError(f"{path} holds no rows")
    missing = [c for c in text_cols + [label_column] if c not in rows[0]]
    if missing:
        raise DataError(f"{path} has no column(s) {', '.join(missing)} (columns: {', '.join(map(str, rows[0]))}); "
                        "set text_column= / label_column=")
    texts, labels = [], []
    for r, line in zip(rows, table.lines):
        try:
            texts.append(SEP_JOIN.join("" if r[c] is None else str(r[c]) for c in text_cols))
            labels.append(r[label_column])
        except KeyError as e:
            raise DataError(f"{path} line {line} lacks column {e}") from None
    return texts, labels


def _label_key(v) -> tuple:
    s = str(v).strip()
    try:
        return (0, float(s), s)
    except ValueError:
        return (1, 0.0, s)


def resolve_text_files(spec: str, split: str) -> tuple[Path, bool]:
    """The file for ``split`` from a generic text spec. Returns ``(path, needs_seeded_split)``.

    ``spec`` is a file (``{split}`` in it is replaced by the split name) or a folder holding
    ``<split>.{csv,tsv,jsonl,json}``. A single file without ``{split}`` serves both splits through a seeded
    stratified split (``test_fraction``).
    """
    if "{split}" in spec:
        p = Path(spec.replace("{split}", split)).expanduser()
        if not p.is_file():
            raise DataError(f"text file {p} (from {spec}) does not exist")
        return p, False
    p = Path(spec).expanduser()
    if p.is_dir():
        for ext in TEXT_FILE_EXTS:
            if (p / f"{split}{ext}").is_file():
                return p / f"{split}{ext}", False
        raise DataError(f"text folder {p} has no {split}.csv/.tsv/.jsonl/.json")
    if p.is_file():
        return p, True
    raise DataError(f"text file {p} does not exist")


def load_text_file(spec: str, split: str, *, seed: int = 0, text_column: str | Sequence[str] = "text",
                   label_column: str = "label", classes: Sequence[str] | None = None,
                   test_fraction: float = 0.2, fmt: str | None = None, encoding: str = "utf-8") -> TextData:
    """Texts and labels from CSV (header row), TSV, JSONL (one object per line) or JSON (a list of objects).

    ``spec``: a file, a file pattern with ``{split}`` (``data/{split}.csv``), or a folder with ``train.csv`` and
    ``test.csv`` (or .tsv/.jsonl/.json). A single file without ``{split}`` is split into train/test by a
    seeded stratified split holding out ``test_fraction`` (default 0.2) as "test".
    ``text_column`` may name several columns (a list or "premise,hypothesis"), joined with " <sep> ".
    Labels may be strings or numbers: classes are the distinct labels of the training file sorted (numbers
    numerically), mapped to 0..K-1, unless ``classes`` gives the order explicitly. Files are read by
    :func:`.readers.read_table` (``encoding``, default UTF-8; strict CSV quoting: an unterminated quote or a
    ragged row is an error naming the file and line).
    """
    if split not in ("train", "test"):
        raise UserError(f"text file datasets have splits train, test; got {split!r}")
    text_cols = _columns(text_column)
    readers.check_encoding(encoding)
    path, seeded = resolve_text_files(spec, split)
    texts, labels = _table_texts(readers.read_table(path, fmt, encoding=encoding), text_cols, label_column)
    if classes is None:
        train_labels = labels
        if not seeded and split != "train":
            try:
                tpath, _ = resolve_text_files(spec, "train")
                train_labels = _table_texts(readers.read_table(tpath, fmt, encoding=encoding), text_cols,
                                            label_column)[1]
            except DataError:
                pass  # no train file: use this split's labels
        classes = [str(v).strip() for v in sorted({str(v).strip() for v in train_labels}, key=_label_key)]
    classes = [str(c) for c in classes]
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted({str(v).strip() for v in labels} - set(index))
    if unknown:
        raise DataError(f"{path}: labels {', '.join(unknown[:5])} are not among the classes {', '.join(classes[:10])}")
    y = np.array([index[str(v).strip()] for v in labels], dtype=np.int64)
    source = f"{path} (columns {'+'.join(text_cols)} / {label_column})"
    if seeded:
        train_idx, test_idx = stratified_split(y, test_fraction, seed)
        idx = train_idx if split == "train" else test_idx
        texts, y = [texts[i] for i in idx], y[idx]
        source += f" ({split}: seeded stratified split, test_fraction {test_fraction}, seed {seed})"
    return TextData(texts, y, classes, f"text:{spec}", source)


class TextFileError(DataError):
    """A text file that :func:`read_text_examples` cannot take (its kind, rows or columns)."""


class MissingColumnError(TextFileError):
    """A text table lacks a column the caller named; ``parameter`` says which argument named it
    (``text_column`` or ``label_column``), so a caller can point at its own option."""

    def __init__(self, message: str, parameter: str):
        super().__init__(message)
        self.parameter = parameter


def _maybe_int_labels(labels: list) -> list:
    """Labels that are all integers written plainly ("3", 3) as ints; otherwise as they are."""
    try:
        ints = [int(v) for v in labels]
    except (TypeError, ValueError):
        return labels
    return ints if all(str(v).strip() == str(i) for v, i in zip(labels, ints)) else labels


def read_text_examples(path: str | Path, text_column: str = "text", label_column: str | None = None,
                       encoding: str = "utf-8") -> tuple[list[str], list | None]:
    """Texts and optional labels of one file, as they are (no classes, no split): a .txt holds one example per
    line; a .csv / .tsv / .jsonl table (read by :func:`.readers.read_table`) holds them in ``text_column`` and,
    when given (default: a column named "label" if there is one), ``label_column``. Labels stay as written
    (integers written plainly become ints); None without a label column."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return readers.read_lines(path, encoding), None
    if suffix not in (".csv", ".tsv", ".jsonl"):
        raise TextFileError(f"{path}: unsupported text file (use .csv, .tsv, .jsonl or .txt)")
    table = readers.read_table(path, encoding=encoding)
    if not table.rows:
        raise TextFileError(f"{path}: no rows")
    fields = table.columns
    if text_column not in fields:
        raise MissingColumnError(f"{path}: no column {text_column!r} (columns: {', '.join(fields)})", "text_column")
    lab = label_column if label_column is not None else ("label" if "label" in fields else None)
    if lab is not None and lab not in fields:
        raise MissingColumnError(f"{path}: no column {lab!r} (columns: {', '.join(fields)})", "label_column")
    texts = []
    for r, line in zip(table.rows, table.lines):
        t = r.get(text_column)
        if not isinstance(t, str):
            raise TextFileError(f"{path} line {line}: {text_column!r} is not a string")
        texts.append(t)
    labels = _maybe_int_labels([r.get(lab) for r in table.rows]) if lab is not None else None
    return texts, labels
