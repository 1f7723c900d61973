"""The 我打你 / 你打我 minimal-pair probe: pairs differ only in order, and a model without positions that reads
bidirectionally cannot prefer either order."""

from __future__ import annotations

import torch

from miniformer.evaluate import ORDER_TIE, Evaluator, swapped_lines
from miniformer.model import MiniFormer, ModelConfig
from miniformer.objectives import Specials

LINES = ["To be, or not to be, that is the question:", "我打你然后你打我", "Now is the winter of our discontent",
         "aaaa", "ab"]


def test_pairs_keep_the_tokens_and_change_the_order():
    pairs = swapped_lines(LINES, 10)
    assert [a for a, _ in pairs if a in ("aaaa",)] == []  # nothing different to swap
    assert len(pairs) == 4  # "ab" is swapped as characters
    for true, swapped in pairs:
        assert true != swapped and sorted(true) == sorted(swapped)  # same multiset of characters
    words = dict(pairs)
    w_true, w_swap = LINES[0].split(), words[LINES[0]].split()
    assert sorted(w_true) == sorted(w_swap) and sum(a != b for a, b in zip(w_true, w_swap)) == 2  # two words moved
    zh = words[LINES[1]]
    assert sum(a != b for a, b in zip(LINES[1], zh)) == 2  # no spaces: two characters swapped
    assert swapped_lines(LINES, 10) == pairs  # fixed seed: every run gets the same pairs


def scorer(objective: str, pos: str) -> Evaluator:
    torch.manual_seed(0)
    vocab = 20
    cfg = ModelConfig(vocab_size=Specials(vocab).model_vocab, block_size=16, n_layer=2, n_head=4, n_embd=32, pos=pos,
                      causal=objective == "causal")
    ev = Evaluator.__new__(Evaluator)
    ev.model, ev.objective, ev.device = MiniFormer(cfg).eval(), objective, torch.device("cpu")
    ev.specials = Specials(vocab)
    return ev


def test_a_bidirectional_mlm_without_positions_ties_exactly_and_with_positions_does_not():
    true, swapped = [1, 2, 3, 4, 5, 6], [1, 5, 3, 4, 2, 6]
    nope = scorer("mlm", "none")
    with torch.no_grad():
        assert abs(nope.sequence_score(true) - nope.sequence_score(swapped)) < ORDER_TIE
        rope = scorer("mlm", "rope")
        assert abs(rope.sequence_score(true) - rope.sequence_score(swapped)) > 100 * ORDER_TIE
        # the causal mask alone breaks the symmetry, positions or not (Haviv 2022)
        causal = scorer("causal", "none")
        assert abs(causal.sequence_score(true) - causal.sequence_score(swapped)) > 100 * ORDER_TIE


def test_span_scoring_hides_each_token_with_a_sentinel():
    ev = scorer("span", "rope")
    with torch.no_grad():
        score = ev.sequence_score([1, 2, 3, 4])
    assert score < 0 and torch.isfinite(torch.tensor(score))
