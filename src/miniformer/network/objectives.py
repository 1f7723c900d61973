"""Training objectives as (batch transform, attention mask, loss targets) over the same decoder-only model.

Each objective takes a window of raw token ids (B, L) and returns a ``Batch``: model inputs, targets (-100 where no
loss is taken) and the boolean attention mask (None = the model's default causal mask). Special tokens ([MASK] and T5
sentinels) live just above the tokenizer's vocabulary; ``Specials`` says where.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from miniformer.network.attention import make_causal_mask, prefix_mask  # noqa: F401 - prefix_mask: part of this API

OBJECTIVES = ("causal", "mlm", "prefix", "span")
IGNORE = -100


@dataclass(frozen=True)
class Specials:
    """Ids of special tokens placed after the base vocabulary: [MASK] then ``n_sentinels`` span sentinels."""

    base_vocab: int
    n_sentinels: int = 32

    @property
    def mask_id(self) -> int:
        return self.base_vocab

    def sentinel(self, k: int) -> int:
        return self.base_vocab + 1 + k

    @property
    def model_vocab(self) -> int:
        return self.base_vocab + 1 + self.n_sentinels


@dataclass
class Batch:
    x: Tensor
    y: Tensor
    mask: Tensor | None  # (B,T,T) or (T,T) bool, True = may attend; None = model default (causal)


def window_length(objective: str, block_size: int) -> int:
    """How many raw tokens one example consumes so the model input is at most block_size long."""
    if objective in ("causal", "prefix"):
        return block_size + 1  # inputs are tokens[:-1], targets tokens[1:]
    if objective == "mlm":
        return block_size
    if objective == "span":
        return span_source_length(block_size)
    raise ValueError(f"unknown objective={objective!r}; choose one of {', '.join(OBJECTIVES)}")


# --- causal LM -------------------------------------------------------------------------------------------------------


def causal_batch(tokens: Tensor) -> Batch:
    return Batch(tokens[:, :-1], tokens[:, 1:], None)


# --- masked LM (BERT) ------------------------------------------------------------------------------------------------


def mlm_batch(tokens: Tensor, specials: Specials, g: torch.Generator, rate: float = 0.15) -> Batch:
    """Choose ``rate`` of positions; of those 80 % -> [MASK], 10 % -> random token, 10 % unchanged; loss on those."""
    chosen = torch.rand(tokens.shape, generator=g) < rate
    roll = torch.rand(tokens.shape, generator=g)
    random_tok = torch.randint(0, specials.base_vocab, tokens.shape, generator=g)
    x = tokens.clone()
    x[chosen & (roll < 0.8)] = specials.mask_id
    swap = chosen & (roll >= 0.8) & (roll < 0.9)
    x[swap] = random_tok[swap]
    y = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    T = tokens.size(1)
    return Batch(x, y, torch.ones(T, T, dtype=torch.bool))


# --- prefix LM -------------------------------------------------------------------------------------------------------


def prefix_batch(tokens: Tensor, g: torch.Generator) -> Batch:
    """Bidirectional over a random-length prefix, causal after it; loss only on predictions of suffix tokens.

    Position i predicts token i+1. Positions i < p-1 can see token i+1 (it is in the prefix), so the loss starts at
    i = p-1, the last prefix position, which sees keys < p only.
    """
    x, y = tokens[:, :-1].clone(), tokens[:, 1:].clone()
    B, T = x.shape
    p = torch.randint(1, T, (B,), generator=g)
    y[torch.arange(T)[None, :] < (p[:, None] - 1)] = IGNORE
    return Batch(x, y, prefix_mask(p, T))


# --- T5-style span corruption --------------------------------------------------------------------------------------


def span_counts(length: int, noise: float = 0.15, mean_span: float = 3.0) -> tuple[int, int]:
    n_noise = max(1, round(length * noise))
    n_spans = max(1, round(n_noise / mean_span))
    return n_noise, n_spans


def span_source_length(block_size: int, noise: float = 0.15, mean_span: float = 3.0) -> int:
    """Longest source L whose corrupted input + targets (L + 2·spans tokens) plus the shift fit in block_size + 1."""
    L = block_size
    while L > 2 and L + 2 * span_counts(L, noise, mean_span)[1] > block_size + 1:
        L -= 1
    return L


def _random_partition(total: int, parts: int, g: torch.Generator) -> list[int]:
    """Split ``total`` into ``parts`` positive integers uniformly at random."""
    cuts = (torch.randperm(total - 1, generator=g)[: parts - 1] + 1).sort().values.tolist()
    edges = [0, *cuts, total]
    return [b - a for a, b in zip(edges[:-1], edges[1:])]


def corrupt_spans(
    seq: list[int], specials: Specials, g: torch.Generator, noise: float = 0.15, mean_span: float = 3.0
) -> tuple[list[int], list[int]]:
    """T5: replace random spans with sentinels. Returns (inputs, targets); targets = sentinel_k + span_k for each k."""
    L = len(seq)
    n_noise, n_spans = span_counts(L, noise, mean_span)
    n_spans = min(n_spans, specials.n_sentinels, n_noise, L - n_noise)
    noise_lens = _random_partition(n_noise, n_spans, g)
    keep_lens = _random_partition(L - n_noise, n_spans, g)
    inputs, targets, pos = [], [], 0
    for k, (keep, drop) in enumerate(zip(keep_lens, noise_lens)):
        inputs += seq[pos : pos + keep] + [specials.sentinel(k)]
        pos += keep
        targets += [specials.sentinel(k)] + seq[pos : pos + drop]
        pos += drop
    return inputs, targets


def reconstruct_spans(inputs: list[int], targets: list[int], specials: Specials) -> list[int]:
    """Inverse of corrupt_spans: put each target span back where its sentinel stands."""
    spans: dict[int, list[int]] = {}
    current = None
    for t in targets:
        if specials.sentinel(0) <= t < specials.model_vocab:
            current = t
            spans[current] = []
        else:
            spans[current].append(t)
    out: list[int] = []
    for t in inputs:
        out += spans[t] if t in spans else [t]
    return out


def span_batch(tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
    """Decoder-only span corruption: [corrupted input | targets], input bidirectional, targets causal."""
    rows, prefix_lens = [], []
    for seq in tokens.tolist():
        inputs, targets = corrupt_spans(seq, specials, g)
        rows.append(inputs + targets)
        prefix_lens.append(len(inputs))
    width = max(len(r) for r in rows)
    full = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    x, y = full[:, :-1], full[:, 1:].clone()
    B, T = x.shape
    p = torch.tensor(prefix_lens)
    lengths = torch.tensor([len(r) for r in rows])
    pos = torch.arange(T)[None, :]
    # Predict only target tokens: position i predicts token i+1, which is a target when i+1 >= p (and not padding).
    y[(pos < (p[:, None] - 1)) | (pos >= (lengths[:, None] - 1))] = IGNORE
    return Batch(x, y, prefix_mask(p, T))


def make_batch(objective: str, tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
    if objective == "causal":
        return causal_batch(tokens)
    if objective == "mlm":
        return mlm_batch(tokens, specials, g)
    if objective == "prefix":
        return prefix_batch(tokens, g)
    if objective == "span":
        return span_batch(tokens, specials, g)
    raise ValueError(f"unknown objective={objective!r}; choose one of {', '.join(OBJECTIVES)}")


# --- what each objective's demo is fed: the same format as its training batches ------------------------------------


def generation_prompt(objective: str, tokenizer, split: np.ndarray, block_size: int, seed: int
                      ) -> tuple[list[int], int | None]:
    """What a left-to-right model generates from, in its training format, and the prefix it reads bidirectionally.

    A causal LM starts from a line break; a prefix LM continues a seeded held-out prompt of block_size/2 tokens read
    as its prefix (from a bare start it would predict tokens it was rarely trained to predict).
    """
    if objective == "causal":
        return tokenizer.encode_lossy("\n")[0], None
    prompt = demo_prompt(split, block_size // 2, seed)
    return prompt, len(prompt)


def demo_prompt(split: np.ndarray, length: int, seed: int) -> list[int]:
    """A fixed, seeded window of held-out ids: the prefix a prefix-LM demo reads bidirectionally (as in training)."""
    start = int(torch.randint(0, len(split) - length, (1,), generator=torch.Generator().manual_seed(seed)))
    return split[start : start + length].astype(np.int64).tolist()


@torch.no_grad()
def recover_spans(model, seq: list[int], specials: Specials, g: torch.Generator) -> dict:
    """Span-corruption demo in the training format: [input with sentinels | sentinel_k span_k …], prefix mask.

    Teacher-forced, as in training: each target token is the model's argmax given the true earlier targets. Returns
    the original, the input with every hidden character shown as '_', and the fill-in (hidden characters predicted).
    """
    inputs, targets = corrupt_spans(seq, specials, g)
    full = inputs + targets
    x = torch.tensor([full[:-1]])
    device = next(model.parameters()).device
    mask = prefix_mask(torch.tensor([len(inputs)]), x.size(1))[0]
    logits = model(x.to(device), attn_mask=mask.to(device))["logits"][0, :, : specials.base_vocab]
    pred = logits.argmax(-1).tolist()
    is_sentinel = [specials.sentinel(0) <= t < specials.model_vocab for t in targets]
    # targets[k] is predicted at position len(inputs) + k - 1; sentinels are structure, not predictions
    guessed = [t if s else pred[len(inputs) + k - 1] for k, (t, s) in enumerate(zip(targets, is_sentinel))]
    hidden = [specials.mask_id if not s else t for t, s in zip(targets, is_sentinel)]
    return {
        "original": seq,
        "masked": reconstruct_spans(inputs, hidden, specials),
        "filled": reconstruct_spans(inputs, guessed, specials),
        "hidden_correct": sum(g_ == t for g_, t, s in zip(guessed, targets, is_sentinel) if not s),
        "hidden_total": sum(not s for s in is_sentinel),
    }
