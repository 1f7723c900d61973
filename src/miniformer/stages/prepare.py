"""Stage `prepare`: corpus -> cleaned splits -> tokenizer -> uint16 token files + meta.json."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from miniformer.corpus import check_long_enough, load_corpus
from miniformer.errors import UserError
from miniformer.params import DataConfig, validate_data
from miniformer.runtime.files import atomic_write_bytes
from miniformer.runtime.tokendata import SPLITS, content_hash
from miniformer.tokenizer import CharTokenizer, train_tokenizer

MAX_VOCAB = 65535  # token files are uint16


def prepare(data: DataConfig, out_dir: Path, min_tokens: int) -> dict:
    """Write {train,val,test}.bin and meta.json under out_dir; returns the meta dict.

    All or nothing: every split is encoded and checked first, then the files are written to a folder beside out_dir
    and swapped in whole, so a failure never leaves new token ids beside an old meta.json.
    """
    validate_data(data)
    splits = load_corpus(data.corpus, data.val_frac, data.test_frac, data.val_plays, data.test_plays, data.split_seed)
    check_long_enough(splits, min_tokens)
    if data.tokenizer == "char":
        # The character set of all splits: an id for every character that occurs (the vocabulary itself leaks nothing).
        tok = CharTokenizer.train(splits.train + splits.val + splits.test)
    else:
        tok = train_tokenizer(data.tokenizer, splits.train, data.vocab_size)
    if tok.vocab_size > MAX_VOCAB:
        raise UserError(f"the corpus has {tok.vocab_size} distinct characters; token files hold at most {MAX_VOCAB} "
                        "ids (uint16): use data.tokenizer: bpe, or a corpus with fewer distinct characters")
    encoded = {}
    for name in SPLITS:
        ids = np.asarray(tok.encode(getattr(splits, name)), dtype=np.uint16)
        if len(ids) < min_tokens:
            raise UserError(
                f"the {name} split has {len(ids)} tokens, fewer than the {min_tokens} the longest evaluation needs; "
                "use a longer corpus or a smaller model.block_size / eval.length_multiples"
            )
        encoded[name] = ids
    meta = {
        "tokenizer": tok.kind,
        "vocab_size": tok.vocab_size,
        "tokenizer_json": tok.to_json(),
        "tokenizer_hash": hashlib.sha256(tok.to_json().encode()).hexdigest()[:16],
        "tokens": {name: int(len(ids)) for name, ids in encoded.items()},
        "characters": {name: len(getattr(splits, name)) for name in SPLITS},
        "sources": splits.sources,
        "corpus": data.corpus,
        "text_hash": hashlib.sha256((splits.train + splits.val + splits.test).encode()).hexdigest()[:16],
        "params": asdict(data),  # what train checks the token files against
    }
    files = {f"{name}.bin": ids.tobytes() for name, ids in encoded.items()}
    # the prepared data's content: part of every training fingerprint, so an edited corpus retrains (issue: a corpus
    # edited within the same character set kept the old checkpoints), and what a reader checks the token files against
    meta["content_hash"] = content_hash(files, meta["tokenizer_json"])
    files["meta.json"] = json.dumps(meta, indent=1, ensure_ascii=False).encode("utf-8")
    swap_in(out_dir, files)
    return meta


def clean_leftovers(out_dir: Path) -> None:
    """Remove the temporary folders of a prepare that was killed before its swap (each holds a whole copy)."""
    for stale in Path(out_dir).parent.glob(f".{Path(out_dir).name}.new.*"):
        shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(Path(out_dir).with_name(f".{Path(out_dir).name}.old"), ignore_errors=True)


def swap_in(out_dir: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a new folder beside out_dir, then replace out_dir with it (the old one is removed only
    once the new one is complete)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(out_dir)
    new = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.new."))
    old = out_dir.with_name(f".{out_dir.name}.old")
    try:
        for name, data in files.items():
            atomic_write_bytes(new / name, data)
        new.chmod(0o755)
        shutil.rmtree(old, ignore_errors=True)
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(new, out_dir)
    finally:
        shutil.rmtree(new, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
