"""The n-gram reference the probes read: real text scores as text, shuffled characters do not; the bigram floor of
the minimal pairs; generations read by position bin."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from miniformer.evaluation.generations import bin_losses, generations, position_bins, repetition
from miniformer.evaluation.subject import Subject
from miniformer.params import Study
from miniformer.runtime.ngram import NgramModel
from miniformer.tokenizer import CharTokenizer
from tests.conftest import tiny_params

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


def test_repetition_is_the_share_of_repeated_eight_character_grams():
    assert repetition("a" * 10) == pytest.approx(1 - 1 / 3)  # three 8-grams, all "aaaaaaaa"
    assert repetition("abcdefghab") == 0.0  # three 8-grams, all different
    assert repetition("abcdefgh") == 0.0 and repetition("short") == 0.0 and repetition("") == 0.0
    assert repetition("abcdefghabcdefgh") == pytest.approx(1 - 8 / 9)  # nine 8-grams, eight distinct


class Sampler(torch.nn.Module):
    """A stand-in generator: each token drawn uniformly from the seeded generator. With ``limit`` it refuses a
    context longer than that, as a learned position table does past block_size (after drawing what came before)."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit, self.asked = limit, []

    def generate(self, idx, max_new_tokens, temperature, top_k, generator=None, allowed_vocab=None, prefix_len=None):
        self.asked.append(max_new_tokens)
        for _ in range(max_new_tokens):
            if self.limit is not None and idx.size(1) > self.limit:
                raise ValueError("position past the learned table")
            idx = torch.cat([idx, torch.randint(allowed_vocab, (idx.size(0), 1), generator=generator)], dim=1)
        return idx


def generation_subject(model: torch.nn.Module, objective: str = "causal") -> Subject:
    verse = TEXT.replace(". ", ".\n")  # lines, so a line break can start a generation
    tok = CharTokenizer.train(verse)
    ids = np.asarray(tok.encode(verse), dtype=np.uint16)
    data = SimpleNamespace(vocab_size=tok.vocab_size, tokenizer=tok, splits={s: ids for s in ("train", "val", "test")})
    params = tiny_params("corpus.txt")
    params["model"]["block_size"] = 16
    params["train"]["objective"] = objective
    params["eval"].update(gen_multiples=[4, 1, 2], gen_samples=3)
    return Subject(Study(params).config("baseline", 0), model, data, torch.device("cpu"))


def drawn(s: Subject, prompt: list[int], length: int) -> list[list[int]]:
    """What the Sampler draws from the subject's seed: the samples generations() must have read."""
    g = torch.Generator().manual_seed(s.run.seed)
    start = torch.tensor([prompt] * 3)
    return Sampler().generate(start, length - len(prompt), 1.0, None, g, s.tok.vocab_size).tolist()


def test_generations_read_every_sample_by_position_bin_and_its_growth_past_the_block():
    s = generation_subject(Sampler())
    measured = generations(s)
    prompt = s.tok.encode("\n")  # a causal model starts from a line break
    p = len(prompt)
    samples = drawn(s, prompt, 64)  # the largest multiple, 4 × 16 tokens, prompt included
    assert s.model.asked == [64 - p]
    losses = [-s.ngram(3).token_log_probs(ids) for ids in samples]  # read by the trigram model
    expected = {"1": [float(x[p:16].mean()) for x in losses], "2": [float(x[16:32].mean()) for x in losses],
                "4": [float(x[32:64].mean()) for x in losses]}
    assert set(measured.samples["generation"]) == set(expected)
    for label, values in expected.items():
        assert measured.samples["generation"][label] == pytest.approx(values)
    growth = measured.samples["generation_growth"]
    assert set(growth) == {"2", "4"}  # each later bin against the in-block one, sample by sample
    assert growth["2"] == pytest.approx([b - a for a, b in zip(expected["1"], expected["2"])])
    assert growth["4"] == pytest.approx([b - a for a, b in zip(expected["1"], expected["4"])])
    stats = measured.values["generation_stats"]
    assert stats["4"] == {"ngram_loss": pytest.approx(np.mean(expected["4"])), "samples": 3}
    texts = [s.tok.decode(ids[p:]) for ids in samples]
    assert stats["repetition"] == pytest.approx(np.mean([repetition(t) for t in texts]))
    written = measured.files["generations.json"]
    assert written["texts"] == texts and written["unreached"] == [] and written["prompt"] == "\n"
    assert written["bins"] == {"1": [0, 16], "2": [16, 32], "4": [32, 64]}


def test_a_learned_table_generates_inside_its_block_only_from_the_same_seed():
    rope_like, learned = generation_subject(Sampler()), generation_subject(Sampler(limit=16))
    everywhere, inside = generations(rope_like), generations(learned)
    p = len(learned.tok.encode("\n"))
    assert learned.model.asked == [64 - p, 16 - p]  # refused past the block, then asked for the block only
    written = inside.files["generations.json"]
    assert written["unreached"] == ["2", "4"] and set(inside.samples["generation"]) == {"1"}
    assert inside.samples["generation_growth"] == {}
    # re-seeded for the second try: the same in-block tokens a model defined everywhere draws
    assert written["texts"] == [t[: 16 - p] for t in everywhere.files["generations.json"]["texts"]]
    assert inside.samples["generation"]["1"] == pytest.approx(everywhere.samples["generation"]["1"])


def test_a_model_that_does_not_generate_left_to_right_says_so_and_measures_nothing():
    s = generation_subject(Sampler(), objective="mlm")
    measured = generations(s)
    assert measured.values == {"generation_stats": {}} and s.model.asked == []
    assert "mlm models do not generate left to right" in measured.files["generations.json"]["note"]
