"""The n-gram reference the probes read: real text scores as text, shuffled characters do not; the bigram floor of
the minimal pairs; generations read by position bin."""

from __future__ import annotations

import numpy as np
import pytest

from miniformer.evaluation.generations import bin_losses, position_bins, repetition
from miniformer.runtime.ngram import NgramModel

TEXT = ("shall i compare thee to a summer's day? thou art more lovely and more temperate. rough winds do shake the "
        "darling buds of may, and summer's lease hath all too short a date. ") * 20


def ids_of(text: str, vocab: list[str]) -> np.ndarray:
    return np.array([vocab.index(c) for c in text])


@pytest.fixture(scope="module")
def model_and_vocab():
    vocab = sorted(set(TEXT))
    return NgramModel(ids_of(TEXT, vocab), len(vocab), 3), vocab


def test_real_text_scores_low_and_its_characters_shuffled_score_high(model_and_vocab):
    model, vocab = model_and_vocab
    line = ids_of("thou art more lovely and more temperate.", vocab)
    shuffled = np.random.default_rng(0).permutation(line)
    assert model.loss(line) < 1.0 < 2.5 < model.loss(shuffled)


def test_the_smoothed_model_gives_every_token_a_probability_and_sums_to_one(model_and_vocab):
    model, vocab = model_and_vocab
    context = list(ids_of("th", vocab))
    total = sum(np.exp(model.token_log_probs(context + [c])[-1]) for c in range(len(vocab)))
    assert total == pytest.approx(1.0)
    assert np.isfinite(model.token_log_probs(ids_of("zzq", vocab) if "z" in vocab else [0, 0, 0])).all()


def test_a_bigram_model_tells_the_order_of_characters_but_not_always_of_words(model_and_vocab):
    """One character of context sees letters out of order, and only the boundaries of swapped words: the minimal
    pairs' floor (a model must beat it to show it reads more than the previous character)."""
    _, vocab = model_and_vocab
    bigram = NgramModel(ids_of(TEXT, vocab), len(vocab), 2)

    def score(text: str) -> float:
        return float(bigram.token_log_probs(ids_of(text, vocab)).sum())

    assert score("rough winds do shake") > score("rough wnids do shake")
    inner = ("rough winds do shake", "rough shake do winds")  # same boundaries " s"/" w" + "e "/"s ": nearly a tie
    assert abs(score(inner[0]) - score(inner[1])) < 0.5


def test_an_order_too_large_for_the_key_is_refused():
    with pytest.raises(ValueError, match="int64"):
        NgramModel(np.zeros(10, dtype=np.int64), 60000, 5)


def test_position_bins_cover_inside_then_each_multiple():
    assert position_bins(32, [1, 2, 4]) == [("1", 0, 32), ("2", 32, 64), ("4", 64, 128)]
    assert position_bins(32, [4, 1]) == [("1", 0, 32), ("4", 32, 128)]


def test_bin_losses_skip_the_prompt_and_unreached_bins(model_and_vocab):
    model, vocab = model_and_vocab

    class Stub:
        def ngram(self, order):
            return model

    ids = list(ids_of(TEXT[:100], vocab))
    out = bin_losses(Stub(), ids, 10, position_bins(32, [1, 2, 4]))
    assert set(out) == {"1", "2"}  # 100 tokens do not reach the end of the 4× bin (128)
    expected = -model.token_log_probs(ids)[10:32].mean()
    assert out["1"] == pytest.approx(expected)


def test_repetition_reads_a_loop_as_repetitive():
    assert repetition("abcdefgh" * 20) > 0.9 and repetition(TEXT[:150]) < 0.1


def test_the_bigram_pseudo_likelihood_is_each_token_given_both_neighbours(model_and_vocab):
    """The floor of a bidirectional model's minimal pairs: P(c_t | c_t-1, c_t+1) ∝ P(c_t | c_t-1) P(c_t+1 | c_t),
    normalised over every candidate — checked against the brute-force sum."""
    _, vocab = model_and_vocab
    bigram = NgramModel(ids_of(TEXT, vocab), len(vocab), 2)
    ids = list(ids_of("thou art", vocab))
    lp = lambda seq: float(bigram.token_log_probs(seq).sum())  # noqa: E731 - the joint under the bigram
    for t in (0, 3, len(ids) - 1):
        joint = [lp(ids[:t] + [c] + ids[t + 1 :]) for c in range(len(vocab))]
        expected = joint[ids[t]] - np.logaddexp.reduce(joint)
        assert bigram.pseudo_log_likelihood(ids)[t] == pytest.approx(expected, abs=1e-9)
