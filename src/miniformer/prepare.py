"""Stage `prepare`: corpus -> cleaned splits -> tokenizer -> uint16 token files + meta.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from miniformer.corpus import check_long_enough, load_corpus
from miniformer.errors import UserError
from miniformer.files import atomic_write_bytes, atomic_write_text
from miniformer.params import DataConfig, validate_data
from miniformer.tokenizer import CharTokenizer, tokenizer_from_json, train_tokenizer

SPLITS = ("train", "val", "test")


def prepare(data: DataConfig, out_dir: Path, min_tokens: int) -> dict:
    """Write {train,val,test}.bin and meta.json under out_dir; returns the meta dict."""
    validate_data(data)
    splits = load_corpus(data.corpus, data.val_frac, data.test_frac, data.val_plays, data.test_plays, data.split_seed)
    check_long_enough(splits, min_tokens)
    if data.tokenizer == "char":
        # The character set of all splits: an id for every character that occurs (the vocabulary itself leaks nothing).
        tok = CharTokenizer.train(splits.train + splits.val + splits.test)
    else:
        tok = train_tokenizer(data.tokenizer, splits.train, data.vocab_size)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name in SPLITS:
        ids = np.asarray(tok.encode(getattr(splits, name)), dtype=np.uint16)
        if len(ids) < min_tokens:
            raise UserError(
                f"the {name} split has {len(ids)} tokens, fewer than the {min_tokens} the longest evaluation needs; "
                "use a longer corpus or a smaller model.block_size / eval.length_multiples"
            )
        atomic_write_bytes(out_dir / f"{name}.bin", ids.tobytes())
        counts[name] = int(len(ids))
    meta = {
        "tokenizer": tok.kind,
        "vocab_size": tok.vocab_size,
        "tokenizer_json": tok.to_json(),
        "tokenizer_hash": hashlib.sha256(tok.to_json().encode()).hexdigest()[:16],
        "tokens": counts,
        "characters": {name: len(getattr(splits, name)) for name in SPLITS},
        "sources": splits.sources,
        "corpus": data.corpus,
        "text_hash": hashlib.sha256((splits.train + splits.val + splits.test).encode()).hexdigest()[:16],
    }
    atomic_write_text(out_dir / "meta.json", json.dumps(meta, indent=1, ensure_ascii=False))
    return meta


class TokenData:
    """Read side: memory-mapped token files and the tokenizer."""

    def __init__(self, data_dir: Path) -> None:
        meta_path = Path(data_dir) / "meta.json"
        if not meta_path.exists():
            raise UserError(f"no prepared data at {str(data_dir)!r}; run `miniformer prepare` first")
        self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        self.tokenizer = tokenizer_from_json(self.meta["tokenizer_json"])
        self.splits = {n: np.memmap(Path(data_dir) / f"{n}.bin", dtype=np.uint16, mode="r") for n in SPLITS}

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])
