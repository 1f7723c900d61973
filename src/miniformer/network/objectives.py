"""Training objectives over the same decoder-only model: causal LM, masked LM (BERT), prefix LM, span corruption (T5).

The batch functions below take a window of raw token ids (B, L) and return a ``Batch``: model inputs, targets (-100
where no loss is taken) and the boolean attention mask (None = the model's default causal mask). Special tokens
([MASK] and T5 sentinels) live just above the tokenizer's vocabulary; ``Specials`` says where.

Each objective is also an object (``OBJECTIVES[name]``) that says everything the rest of the code must know about it
— its window, its batches, how it reads a text, how it scores one, how it recovers a hidden token, how it generates —
so training, evaluation and the explore commands ask the objective instead of branching on its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor

from miniformer.network.attention import make_causal_mask, prefix_mask

IGNORE = -100
PROBE_CANDIDATES = 16  # left-to-right recovery: tokens rescored per hidden position (their recall is reported)


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


# --- what each objective's demo is fed: the same format as its training batches ------------------------------------


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


# --- the objectives as objects ----------------------------------------------------------------------------------------


class Objective:
    """What one objective does with the shared model; subclasses fill in the parts that differ."""

    name: ClassVar[str]
    left_to_right: ClassVar[bool]  # trained to predict the next token: it generates, and scores a text left to right
    scoring: ClassVar[str]  # how sequence_log_likelihood reads a text, in words
    # trains under the model's own default mask (causal unless the no-mask breakage turns it off), not one it supplies
    uses_model_mask: ClassVar[bool] = False
    # a window shuffled with its masks keeps inputs and targets apart (false for span: sentinels would cross over)
    shuffle_keeps_targets: ClassVar[bool] = True
    # the smallest block_size it trains and is evaluated with, and why: params.py refuses a smaller one
    min_block_size: ClassVar[int] = 1
    min_block_reason: ClassVar[str] = ""

    def window_length(self, block_size: int) -> int:
        """How many raw tokens one example consumes so the model input is at most block_size long."""
        raise NotImplementedError

    def batch(self, tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
        raise NotImplementedError

    def reading_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor | None:
        """How the model reads a whole n-token text when its attention is drawn (None = the model's default)."""
        raise NotImplementedError

    def input_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor:
        """How the model reads an n-token input it is given whole (a downstream example): bidirectionally, as the
        context of MLM, span corruption and a prefix LM's prefix; causal LM overrides it."""
        return torch.ones(n, n, dtype=torch.bool, device=device)

    def sequence_log_likelihood(self, model, ids: list[int], specials: Specials) -> Tensor:
        """log p of each scored token of ids, in the objective's own reading (left-to-right: ids[1:] given the left;
        bidirectional: pseudo-log-likelihood, each token hidden in turn as in training)."""
        raise NotImplementedError

    def recover(self, model, ids: list[int], i: int, specials: Specials) -> tuple[int, bool | None]:
        """The model's guess for ids[i] hidden, read in its training format; and, for left-to-right models, whether
        the true token was among the candidates rescored (None otherwise)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _LeftToRight(Objective):
    """Causal and prefix LM: inputs tokens[:-1], targets tokens[1:]; they generate, and score a text left to right."""

    left_to_right = True
    scoring = "sequence log-likelihood"

    def window_length(self, block_size: int) -> int:
        return block_size + 1

    def reading_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor | None:
        return make_causal_mask(n, device)  # as it generates

    def context_mask(self, n: int, prefix_len: int, device: torch.device | str) -> Tensor:
        """Mask for reading n tokens whose first prefix_len are given context (read bidirectionally by a prefix LM)."""
        return make_causal_mask(n, device)

    def prompt_prefix(self, prompt_len: int) -> int | None:
        """How much of a generation prompt is read bidirectionally (a prefix LM's prefix; None = causal)."""
        return None

    def generation_prompt(self, tokenizer, split: np.ndarray, block_size: int, seed: int
                          ) -> tuple[list[int], int | None]:
        """What the model generates from in its training format, and the prefix it reads bidirectionally."""
        raise NotImplementedError

    def sequence_log_likelihood(self, model, ids: list[int], specials: Specials) -> Tensor:
        # The model's own mask (causal; a prefix LM with a one-token prefix reads causally too).
        x = torch.tensor(ids, device=next(model.parameters()).device)
        logits = model(x[None, :-1])["logits"][0].float()
        return torch.log_softmax(logits, -1).gather(-1, x[1:, None])[:, 0]

    def recover(self, model, ids: list[int], i: int, specials: Specials) -> tuple[int, bool | None]:
        # The PROBE_CANDIDATES tokens the model finds likeliest from the left context, each rescored by the likelihood
        # of the whole rest of the line with it in place (scoring all candidates costs a forward pass per token).
        dev, V = next(model.parameters()).device, specials.base_vocab
        mask = self.context_mask(len(ids) - 1, i, dev)
        left = model(torch.tensor([ids[:-1]], device=dev), attn_mask=mask)["logits"][0, i - 1, :V]
        candidates = left.topk(min(PROBE_CANDIDATES, V)).indices
        cand = torch.tensor(ids, device=dev).repeat(len(candidates), 1)
        cand[:, i] = candidates
        logp = torch.log_softmax(model(cand[:, :-1], attn_mask=mask)["logits"], -1)
        token_lp = logp.gather(-1, cand[:, 1:, None])[..., 0]
        best = int(candidates[int(token_lp[:, i - 1 :].sum(1).argmax())])
        return best, bool((candidates == ids[i]).any())


class CausalLM(_LeftToRight):
    name = "causal"
    uses_model_mask = True
    min_block_size = 2
    min_block_reason = "its generations start from a one-token prompt and need a position after it inside the block"

    def input_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor:
        return make_causal_mask(n, device)  # it reads its context left to right, as it was trained

    def batch(self, tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
        return causal_batch(tokens)

    def reading_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor | None:
        return None  # its own default: causal, or none for the no-mask breakage (drawn as it reads)

    def generation_prompt(self, tokenizer, split: np.ndarray, block_size: int, seed: int
                          ) -> tuple[list[int], int | None]:
        prompt = tokenizer.encode_lossy("\n")[0]  # a line break: the start of a line
        # a corpus of one long line has no line break in its vocabulary: start from the held-out text's first token
        return prompt or split[:1].astype(np.int64).tolist(), None


class PrefixLM(_LeftToRight):
    name = "prefix"
    min_block_size = 2
    min_block_reason = "a prefix of at least one token and a token after it to predict"

    def batch(self, tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
        return prefix_batch(tokens, g)

    def context_mask(self, n: int, prefix_len: int, device: torch.device | str) -> Tensor:
        return prefix_mask(torch.tensor([prefix_len]), n)[0].to(device)

    def prompt_prefix(self, prompt_len: int) -> int | None:
        return prompt_len

    def generation_prompt(self, tokenizer, split: np.ndarray, block_size: int, seed: int
                          ) -> tuple[list[int], int | None]:
        # a seeded held-out prompt of block_size/2 tokens read as its prefix: from a bare start it would predict
        # tokens it was rarely trained to predict
        prompt = demo_prompt(split, block_size // 2, seed)
        return prompt, len(prompt)


class MaskedLM(Objective):
    name = "mlm"
    left_to_right = False
    scoring = "pseudo-log-likelihood"
    hidden_as = "BERT's 80/10/10 [MASK]/random/same"

    @torch.no_grad()
    def fill_in(self, model, seq: list[int], specials: Specials, g: torch.Generator) -> tuple[list[int], list[int]]:
        """Hide tokens of seq as training does; (seq with [MASK] where hidden, seq with the model's guesses there)."""
        device = next(model.parameters()).device
        b = mlm_batch(torch.tensor([seq]), specials, g)
        logits = model(b.x.to(device), attn_mask=b.mask.to(device))["logits"][0, :, : specials.base_vocab]
        chosen = (b.y[0] != IGNORE).tolist()
        pred = logits.argmax(-1).tolist()
        masked = [specials.mask_id if c else t for c, t in zip(chosen, seq)]
        return masked, [p if c else t for p, c, t in zip(pred, chosen, seq)]

    def window_length(self, block_size: int) -> int:
        return block_size

    def batch(self, tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
        return mlm_batch(tokens, specials, g)

    def reading_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor | None:
        return torch.ones(n, n, dtype=torch.bool, device=device)

    def sequence_log_likelihood(self, model, ids: list[int], specials: Specials) -> Tensor:
        dev, n = next(model.parameters()).device, len(ids)
        x = torch.tensor(ids, device=dev)
        rows = x.repeat(n, 1)
        rows[torch.arange(n), torch.arange(n)] = specials.mask_id
        logits = model(rows, attn_mask=torch.ones(n, n, dtype=torch.bool, device=dev))["logits"]
        logp = torch.log_softmax(logits[torch.arange(n), torch.arange(n)].float(), -1)
        return logp.gather(-1, x[:, None])[:, 0]

    def recover(self, model, ids: list[int], i: int, specials: Specials) -> tuple[int, bool | None]:
        dev = next(model.parameters()).device
        x = torch.tensor([ids[:i] + [specials.mask_id] + ids[i + 1 :]], device=dev)
        logits = model(x, attn_mask=torch.ones(len(ids), len(ids), dtype=torch.bool, device=dev))["logits"]
        return int(logits[0, i, : specials.base_vocab].argmax()), None


class SpanCorruption(Objective):
    name = "span"
    shuffle_keeps_targets = False
    left_to_right = False
    min_block_size = 3
    min_block_reason = "its shortest example, a kept and a hidden token with a sentinel each, is 3 inputs long"
    scoring = "pseudo-log-likelihood"
    hidden_as = "one sentinel per span"

    def fill_in(self, model, seq: list[int], specials: Specials, g: torch.Generator) -> tuple[list[int], list[int]]:
        r = recover_spans(model, seq, specials, g)
        return r["masked"], r["filled"]

    def window_length(self, block_size: int) -> int:
        return span_source_length(block_size)

    def batch(self, tokens: Tensor, specials: Specials, g: torch.Generator) -> Batch:
        return span_batch(tokens, specials, g)

    def reading_mask(self, n: int, device: torch.device | str = "cpu") -> Tensor | None:
        return make_causal_mask(n, device)  # as its targets are generated

    def sequence_log_likelihood(self, model, ids: list[int], specials: Specials) -> Tensor:
        # each token hidden in turn behind sentinel 0, then predicted after it: [ids with s0 at i | s0] -> ids[i]
        dev, n = next(model.parameters()).device, len(ids)
        x, s0 = torch.tensor(ids, device=dev), specials.sentinel(0)
        rows = torch.cat([x.repeat(n, 1), torch.full((n, 1), s0, device=dev)], 1)
        rows[torch.arange(n), torch.arange(n)] = s0
        mask = prefix_mask(torch.tensor([n]), n + 1).to(dev)
        logp = torch.log_softmax(model(rows, attn_mask=mask)["logits"][:, -1].float(), -1)
        return logp.gather(-1, x[:, None])[:, 0]

    def recover(self, model, ids: list[int], i: int, specials: Specials) -> tuple[int, bool | None]:
        dev, s0 = next(model.parameters()).device, specials.sentinel(0)
        inputs = ids[:i] + [s0] + ids[i + 1 :]
        x = torch.tensor([inputs + [s0]], device=dev)
        mask = prefix_mask(torch.tensor([len(inputs)]), x.size(1)).to(dev)
        return int(model(x, attn_mask=mask)["logits"][0, -1, : specials.base_vocab].argmax()), None


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (CausalLM(), MaskedLM(), PrefixLM(), SpanCorruption())}


def objective_named(name: str) -> Objective:
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective={name!r}; choose one of {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]
