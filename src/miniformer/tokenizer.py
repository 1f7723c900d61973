"""Tokenizers: characters (the default) or a byte-level BPE trained offline on the train split."""

from __future__ import annotations

import json
import os
from typing import Protocol

from miniformer.errors import UserError

TOKENIZERS = ("char", "bpe")
# What str.splitlines splits at, as a regex for the tokenizers library (\r\n first: one break, not two)
LINE_BREAK = "\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"


class Tokenizer(Protocol):
    kind: str
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    def to_json(self) -> str: ...


class CharTokenizer:
    """One id per distinct character of the train split (sorted, so ids are stable)."""

    kind = "char"

    def __init__(self, chars: list[str]) -> None:
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.vocab_size = len(chars)

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    def unknown(self, text: str) -> list[str]:
        """Characters of ``text`` the vocabulary lacks, in order of first appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.stoi))

    def encode(self, text: str) -> list[int]:
        missing = self.unknown(text)
        if missing:
            raise UserError(f"characters not in the vocabulary: {''.join(missing)!r}")
        return [self.stoi[c] for c in text]

    def encode_lossy(self, text: str) -> tuple[list[int], list[str]]:
        """Encode, dropping characters the vocabulary lacks; returns (ids, dropped characters)."""
        missing = self.unknown(text)
        return [self.stoi[c] for c in text if c in self.stoi], missing

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] if i < self.vocab_size else "\u2047" for i in ids)

    def to_json(self) -> str:
        return json.dumps({"kind": "char", "chars": self.chars}, ensure_ascii=False)


class BPETokenizer:
    """Byte-level BPE from the `tokenizers` package: any UTF-8 text encodes, and decodes back exactly."""

    kind = "bpe"

    def __init__(self, tok) -> None:  # tok: tokenizers.Tokenizer
        self.tok = tok
        self.vocab_size = tok.get_vocab_size(with_added_tokens=False)  # an export's special tokens are not text

    @classmethod
    def train(cls, text: str, vocab_size: int) -> BPETokenizer:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        tok = HFTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        tok.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
        return cls(tok)

    def unknown(self, text: str) -> list[str]:
        return []  # byte-level: nothing is out of vocabulary

    def encode(self, text: str) -> list[int]:
        lines = text.splitlines(keepends=True)
        return [i for enc in self.tok.encode_batch(lines) for i in enc.ids]

    def encode_lossy(self, text: str) -> tuple[list[int], list[str]]:
        return self.encode(text), []

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode([i for i in ids if i < self.vocab_size])

    def to_json(self) -> str:
        return json.dumps({"kind": "bpe", "tokenizer": self.tok.to_str()})


def train_tokenizer(kind: str, text: str, vocab_size: int) -> CharTokenizer | BPETokenizer:
    if kind == "char":
        return CharTokenizer.train(text)
    if kind == "bpe":
        if vocab_size > 65535:
            raise UserError(f"data.vocab_size={vocab_size} does not fit the uint16 token files; use at most 65535")
        return BPETokenizer.train(text, vocab_size)
    raise UserError(f"unknown tokenizer data.tokenizer={kind!r}; choose one of {', '.join(TOKENIZERS)}")


def tokenizer_from_json(s: str) -> CharTokenizer | BPETokenizer:
    """Our own file (prepared data: ``{"kind": ...}``) or the `tokenizers` library's (an export's tokenizer.json)."""
    d = json.loads(s)
    if "model" in d:  # the tokenizers format
        return _from_library_format(d)
    if d["kind"] == "char":
        return CharTokenizer(d["chars"])
    from tokenizers import Tokenizer as HFTokenizer

    return BPETokenizer(HFTokenizer.from_str(d["tokenizer"]))


def library_format(tok: CharTokenizer | BPETokenizer, special_tokens: list[str]) -> str:
    """The tokenizer as the `tokenizers` library writes one (what ``tokenizers.Tokenizer.from_file`` and transformers'
    ``AutoTokenizer`` read), with ``special_tokens`` as added tokens numbered from the end of the vocabulary.

    Characters become a word-level model over single characters: a normaliser drops characters outside the
    vocabulary, a pre-tokenizer isolates every character (newlines included), the vocabulary maps each to its id, and
    the decoder joins them with nothing in between, so a text round-trips exactly. BPE is the library's own tokenizer
    already, given the line split encode uses, so that it yields the very ids the model was trained on.
    """
    from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    if isinstance(tok, CharTokenizer):
        out = HFTokenizer(models.WordLevel(vocab=dict(tok.stoi), unk_token=None))
        # a character the train split lacks is dropped, as miniformer's own lossy encoding drops it (a word-level
        # model without an unknown token would raise on it; the model has no embedding to give it)
        known = "".join(f"\\x{{{ord(c):x}}}" for c in tok.chars)
        out.normalizer = normalizers.Replace(Regex(f"[^{known}]"), "")
        out.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        out.decoder = decoders.Fuse()
    else:  # trained and applied line by line (BPETokenizer.encode): the same line split first, then byte-level
        out = HFTokenizer.from_str(tok.tok.to_str())
        lines = pre_tokenizers.Split(Regex(LINE_BREAK), behavior="merged_with_previous")
        out.pre_tokenizer = pre_tokenizers.Sequence([lines, out.pre_tokenizer])
    out.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens])
    return out.to_str()


def _from_library_format(d: dict) -> CharTokenizer | BPETokenizer:
    from tokenizers import Tokenizer as HFTokenizer

    if d["model"]["type"] == "WordLevel":
        vocab = d["model"]["vocab"]
        return CharTokenizer(sorted(vocab, key=vocab.__getitem__))
    return BPETokenizer(HFTokenizer.from_str(json.dumps(d)))
