"""Does the model use word order? Loss with the context shuffled, and minimal pairs ("我打你" vs "你打我")."""

from __future__ import annotations

import random
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.network.attention import make_causal_mask
from miniformer.network.objectives import IGNORE
from miniformer.runtime.ngram import NgramModel
from miniformer.runtime.scoring import windows

ORDER_TIE = 1e-4  # nats: minimal-pair scores closer than this are a tie (float summation order, not a preference)
# A minimal pair is read as the corpus has it, after the line break that ends the line before: a left-to-right model
# then scores every character of the line, its first included. Without it the first character goes unscored, and
# moving a line's capitalised first word inside the line becomes a free win for any model (a unigram model, scored
# that way, prefers the true order on about 63 % of the pairs).
LINE_START = "\n"


@torch.no_grad()
def order_sensitivity(s: Subject) -> Measured:
    """Loss with the context shuffled minus loss with it intact.

    Left-to-right objectives: the first 3/4 of each window is shuffled and the loss is taken on the last quarter.
    MLM / span: the whole window is shuffled (masks move with their tokens) and the loss on masked tokens compared.
    """
    tokens = windows(s.data.splits["val"], s.objective.window_length(s.T))[: s.run.eval.order_windows]
    rng = torch.Generator().manual_seed(0)
    shuffled = tokens.clone()
    if s.objective.left_to_right:
        cut = 3 * s.T // 4
        for row in shuffled:
            row[:cut] = row[:cut][torch.randperm(cut, generator=rng)]
        intact, broken = tail_loss(s, tokens, cut), tail_loss(s, shuffled, cut)
    else:
        perm = torch.randperm(tokens.size(1), generator=rng)
        intact, broken = masked_loss(s, tokens, None), masked_loss(s, tokens, perm)
    return Measured({"order_sensitivity": {"intact": intact, "shuffled": broken, "delta": broken - intact}})


def tail_loss(s: Subject, tokens: Tensor, cut: int) -> float:
    x, y = tokens[:, :-1].to(s.device), tokens[:, 1:].to(s.device)
    logits = s.model(x, attn_mask=make_causal_mask(x.size(1), s.device))["logits"]
    return float(F.cross_entropy(logits[:, cut:].flatten(0, 1), y[:, cut:].flatten()))


def masked_loss(s: Subject, tokens: Tensor, perm: Tensor | None) -> float:
    if perm is not None and not s.objective.shuffle_keeps_targets:
        return float("nan")  # not defined: shuffling would move sentinels between input and targets (-> null)
    b = s.objective.batch(tokens, s.specials, torch.Generator().manual_seed(0))
    x, y, mask = b.x, b.y, b.mask
    if perm is not None:
        x, y = x[:, perm], y[:, perm]
    logits = s.model(x.to(s.device), attn_mask=None if mask is None else mask.to(s.device))["logits"]
    return float(F.cross_entropy(logits.flatten(0, 1), y.to(s.device).flatten(), ignore_index=IGNORE))


def swapped_lines(lines: list[str], count: int, seed: int = 0) -> list[tuple[str, str]]:
    """(line, the line with two different words swapped in place) for up to ``count`` lines; a line with fewer than
    three words (a text without spaces) swaps two different characters instead. Whitespace stays where it was."""
    rng = random.Random(seed)
    order = list(range(len(lines)))
    rng.shuffle(order)
    pairs = []
    for k in order:
        line = lines[k]
        parts = re.split(r"(\s+)", line.strip())
        units = parts[::2] if len(parts[::2]) >= 3 else list(line.strip())
        joiner = parts[1::2] if len(parts[::2]) >= 3 else [""] * (len(units) - 1)
        candidates = [(i, j) for i in range(len(units)) for j in range(i + 1, len(units)) if units[i] != units[j]]
        if not candidates:
            continue
        i, j = candidates[rng.randrange(len(candidates))]
        units[i], units[j] = units[j], units[i]
        swapped = units[0] + "".join(sep + u for sep, u in zip(joiner, units[1:]))
        pairs.append((line.strip(), swapped))
        if len(pairs) == count:
            break
    return pairs


def pair_ids(s: Subject, text: str) -> list[int]:
    """A minimal pair's side as ids, after LINE_START (left out for a vocabulary without it); [] when it cannot be
    read whole (dropped characters, past the block, tiny)."""
    ids, dropped = s.tok.encode_lossy(LINE_START + text)
    if dropped:
        ids, dropped = s.tok.encode_lossy(text)
    return [] if dropped or len(ids) > s.T or len(ids) < 4 else ids


def order_pairs(s: Subject) -> list[tuple[list[int], list[int]]]:
    """Minimal pairs from held-out test lines: the line, and the line with two of its words swapped in place (two
    characters, for a text written without spaces). Same tokens, different order; fixed seed, same for every run.
    Lines are cut to leave room for LINE_START in the block."""
    lines = [ln[: s.T - len(LINE_START)] for ln in s.test_lines()]
    return [(pair_ids(s, a), pair_ids(s, b)) for a, b in swapped_lines(lines, s.run.eval.order_pairs)
            if pair_ids(s, a) and pair_ids(s, b)]


# The floor is the strongest of the train split's character n-grams up to this order: a model with no positions at
# all that conditions on the characters before it (2: one character of context). A causal model's preference for the
# true order only shows it reads order beyond local statistics when it beats every one of them.
FLOOR_ORDERS = (2, 3, 4, 5)


def floor_score(s: Subject, ids: list[int], order: int = 2) -> float:
    """The same pair side read by the train split's character n-gram model, scored as the objective scores it: the
    characters after the first, each given the up to order − 1 before it (left to right), or every character given
    its neighbour on each side (the bigram's pseudo-log-likelihood, for MLM and span: higher orders have no such
    reading here). The floor a preference is held to."""
    if s.objective.left_to_right:
        return float(s.ngram(order).token_log_probs(ids)[1:].sum())
    return float(s.ngram(2).pseudo_log_likelihood(ids).sum())


def floor_orders(s: Subject) -> tuple[int, ...]:
    """The n-gram orders the floor is taken over: every FLOOR_ORDERS whose keys fit (a vocabulary of thousands of
    characters stops lower) for a left-to-right reading, the bigram else."""
    if not s.objective.left_to_right:
        return (2,)
    return tuple(n for n in FLOOR_ORDERS if NgramModel.fits(n, s.data.vocab_size))


def sequence_score(s: Subject, ids: list[int]) -> float:
    """Log-likelihood of a token sequence in the objective's own reading (see minimal_pairs)."""
    return float(s.objective.sequence_log_likelihood(s.model, ids, s.specials).sum())


def sequence_scores(s: Subject, sequences: list[list[int]]) -> list[float]:
    """sequence_score of each sequence. A left-to-right reader (under the model's own causal mask, as
    sequence_log_likelihood reads it) scores all sequences of one length in one batch: the mask keeps the rows
    apart, and 2000 single-row passes were most of the probe's time. Other readings go one sequence at a time."""
    if not s.objective.left_to_right:
        return [sequence_score(s, ids) for ids in sequences]
    scores = [0.0] * len(sequences)
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(sequences):
        by_length.setdefault(len(ids), []).append(i)
    for rows in by_length.values():
        x = torch.tensor([sequences[i] for i in rows], device=s.device)
        logp = torch.log_softmax(s.model(x[:, :-1])["logits"].float(), -1)
        for i, score in zip(rows, logp.gather(-1, x[:, 1:, None])[..., 0].sum(1).tolist()):
            scores[i] = score
    return scores


@torch.no_grad()
def minimal_pairs(s: Subject) -> Measured:
    """How often the model scores the true order above the swapped one (ties count half): sequence log-likelihood
    for left-to-right objectives, pseudo-log-likelihood (each token hidden in turn, as in training) for MLM and
    span. Scores within ORDER_TIE nats are a tie: a bidirectional model without positions gives both orders the
    same score exactly, up to float summation order. The floor: the n-gram order (floor_orders) that prefers the
    true order most often on these same pairs — chosen on them, so a floor at least as hard to beat as any one."""
    pairs = order_pairs(s)
    scores = sequence_scores(s, [side for pair in pairs for side in pair])
    outcomes = [preferred(scores[2 * k], scores[2 * k + 1]) for k in range(len(pairs))]
    by_order = {n: [preferred(floor_score(s, a, n), floor_score(s, b, n)) for a, b in pairs] for n in floor_orders(s)}
    shares = {n: float(np.mean(v)) if v else None for n, v in by_order.items()}
    strongest = max(by_order, key=lambda n: shares[n] or 0.0)
    floor = by_order[strongest]
    return Measured({"minimal_pairs": {
        "pairs": len(outcomes),
        "true_order_preferred": float(np.mean(outcomes)) if outcomes else None,
        "ties": int(sum(o == 0.5 for o in outcomes)),
        "scoring": s.objective.scoring,
        # the train split's character n-grams on the same pairs, read as this objective reads them
        "ngram_true_order_preferred": {str(n): v for n, v in shares.items()},
        "floor_order": strongest,
        "floor_true_order_preferred": shares[strongest],
        "floor_ties": int(sum(o == 0.5 for o in floor)),
    }}, {"pairs": outcomes, "pairs_floor": floor})


def preferred(true_score: float, swapped_score: float) -> float:
    """1 when the true order scores higher, 0 when the swapped one does, 0.5 for a tie."""
    return 0.5 if abs(true_score - swapped_score) < ORDER_TIE else float(true_score > swapped_score)


def sensitivity_scalars(ev: dict) -> dict:
    return {"order_delta": ev.get("order_sensitivity", {}).get("delta")}


def minimal_pair_scalars(ev: dict) -> dict:
    pairs = ev.get("minimal_pairs", {})
    return {"order_preference": pairs.get("true_order_preferred"),
            "order_preference_floor": pairs.get("floor_true_order_preferred"),
            "order_floor_order": pairs.get("floor_order"),
            "order_pairs": pairs.get("pairs"),
            "order_ties": pairs["ties"] / pairs["pairs"] if pairs.get("pairs") else None,
            "order_floor_ties": pairs.get("floor_ties", 0) / pairs["pairs"] if pairs.get("pairs") else None}


PROBES = (Probe(order_sensitivity, sensitivity_scalars, order=40), Probe(minimal_pairs, minimal_pair_scalars, order=50))
