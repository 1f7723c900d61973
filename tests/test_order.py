"""The 我打你 / 你打我 minimal-pair probe: pairs differ only in order, and a model without positions that reads
bidirectionally cannot prefer either order."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from miniformer.evaluation.order import ORDER_TIE, sequence_score, sequence_scores, swapped_lines
from miniformer.evaluation.subject import Subject
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import OBJECTIVES, Specials
from tests.conftest import require_system

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


def test_pairs_are_read_after_a_line_break_and_cut_to_fill_the_block_exactly():
    from types import SimpleNamespace

    from miniformer.evaluation.order import order_pairs
    from miniformer.tokenizer import CharTokenizer

    tok = CharTokenizer.train("the cats sat on a mat by the door\n")
    lines = ["the cats sat on a mat by the door", "a cat by the"]
    run = SimpleNamespace(eval=SimpleNamespace(order_pairs=5))
    s = SimpleNamespace(T=16, tok=tok, test_lines=lambda: lines, run=run)
    pairs = order_pairs(s)
    assert len(pairs) == 2
    for true, swapped in pairs:
        assert true[0] == swapped[0] == tok.encode("\n")[0] and sorted(true) == sorted(swapped) and true != swapped
    assert sorted(len(true) for true, _ in pairs) == [1 + len(lines[1]), 16]  # the long line cut to the block, whole


def test_three_words_swap_as_words_two_as_characters_and_count_is_a_cap():
    pairs = dict(swapped_lines(["to be so", "to be"], 10))
    assert sorted(pairs["to be so"].split()) == ["be", "so", "to"] and pairs["to be so"] != "to be so"  # words
    assert sorted(pairs["to be"]) == sorted("to be") and pairs["to be"].split() != ["be", "to"]  # characters
    lines = [f"line {k} has words" for k in range(10)]
    picked = [true for true, _ in swapped_lines(lines, 3)]
    assert len(picked) == 3 and picked != lines[:3]  # drawn over the lines, not the first ones


def test_a_pair_side_needs_four_ids_its_line_break_and_the_block():
    from types import SimpleNamespace

    from miniformer.evaluation.order import pair_ids
    from miniformer.tokenizer import CharTokenizer

    tok = CharTokenizer.train("abcdefgh\n")
    s = SimpleNamespace(T=6, tok=tok)
    assert pair_ids(s, "abc") == tok.encode("\nabc") and pair_ids(s, "ab") == []  # four ids with the line break
    assert pair_ids(s, "abcde") == tok.encode("\nabcde") and pair_ids(s, "abcdef") == []  # the block holds six
    assert pair_ids(s, "abz") == []  # a character the vocabulary lacks
    without_break = SimpleNamespace(T=6, tok=CharTokenizer.train("abcdefgh"))
    assert pair_ids(without_break, "abcd") == without_break.tok.encode("abcd")  # no line break to read after


def test_a_tie_is_within_order_tie_and_the_floor_orders_follow_the_reading():
    from types import SimpleNamespace

    from miniformer.evaluation.order import floor_orders, preferred

    assert preferred(1.0, 0.0) == 1.0 and preferred(0.0, 1.0) == 0.0
    assert preferred(1.0, 1.0 + 0.5 * ORDER_TIE) == 0.5 and preferred(1.0, 1.0 + 1.5 * ORDER_TIE) == 0.0
    assert ORDER_TIE == 1e-4  # nats: float summation order, not a preference
    causal = SimpleNamespace(objective=OBJECTIVES["causal"], data=SimpleNamespace(vocab_size=80))
    assert floor_orders(causal) == (2, 3, 4, 5)
    assert floor_orders(SimpleNamespace(objective=OBJECTIVES["mlm"], data=causal.data)) == (2,)


def scorer(objective: str, pos: str) -> Subject:
    torch.manual_seed(0)
    vocab = 20
    cfg = ModelConfig(vocab_size=Specials(vocab).model_vocab, block_size=16, n_layer=2, n_head=4, n_embd=32, pos=pos,
                      causal=objective == "causal")
    ev = Subject.__new__(Subject)  # no run or data: sequence_score reads only these
    ev.model, ev.objective, ev.device = MiniFormer(cfg).eval(), OBJECTIVES[objective], torch.device("cpu")
    ev.specials = Specials(vocab)
    return ev


def test_a_bidirectional_mlm_without_positions_ties_exactly_and_with_positions_does_not():
    true, swapped = [1, 2, 3, 4, 5, 6], [1, 5, 3, 4, 2, 6]
    nope = scorer("mlm", "none")
    with torch.no_grad():
        assert abs(sequence_score(nope, true) - sequence_score(nope, swapped)) < ORDER_TIE
        rope = scorer("mlm", "rope")
        assert abs(sequence_score(rope, true) - sequence_score(rope, swapped)) > 100 * ORDER_TIE
        # the causal mask alone breaks the symmetry, positions or not (Haviv 2022)
        causal = scorer("causal", "none")
        assert abs(sequence_score(causal, true) - sequence_score(causal, swapped)) > 100 * ORDER_TIE


@pytest.mark.parametrize("objective,pos", [("causal", "rope"), ("prefix", "alibi"), ("mlm", "rope")])
def test_batched_sequence_scores_are_each_sequence_scored_alone(objective, pos):
    """Sequences of mixed lengths, in mixed order: each score is the one sequence_score gives it alone (the batch of
    one length is read under the causal mask, which keeps its rows apart)."""
    s = scorer(objective, pos)
    g = torch.Generator().manual_seed(4)
    sequences = [torch.randint(0, 20, (n,), generator=g).tolist() for n in (6, 9, 6, 12, 9, 6, 16)]
    with torch.no_grad():
        alone = [sequence_score(s, ids) for ids in sequences]
        batched = sequence_scores(s, sequences)
    assert batched == pytest.approx(alone, abs=1e-4)
    assert len(set(round(v, 3) for v in alone)) == len(alone)  # distinct: a row scored for another would show


class SeesTheHiddenToken(torch.nn.Module):
    """A stand-in model that records its input and, at the last position, predicts whichever token of ``ids`` is
    missing from the row: a certain answer exactly when the scored token is hidden from it."""

    def __init__(self, ids: list[int], vocab: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.ids, self.vocab, self.rows = ids, vocab, None

    def forward(self, x, attn_mask=None, **_):
        self.rows = x.clone()
        logits = torch.zeros(*x.shape, self.vocab)
        for r, row in enumerate(x.tolist()):
            missing = [t for j, t in enumerate(self.ids) if row[j] != t]
            logits[r, -1, missing[0] if len(missing) == 1 else 0] = 50.0
        return {"logits": logits}


def test_span_scoring_hides_each_token_with_a_sentinel():
    ids, specials = [1, 2, 3, 4], Specials(20)
    s0 = specials.sentinel(0)
    model = SeesTheHiddenToken(ids, specials.model_vocab)
    logp = OBJECTIVES["span"].sequence_log_likelihood(model, ids, specials)
    # row i is the line with token i replaced by sentinel 0, then sentinel 0 again (the target's start)
    expected = [[s0 if j == i else t for j, t in enumerate(ids)] + [s0] for i in range(len(ids))]
    assert model.rows.tolist() == expected
    assert logp.tolist() == pytest.approx([0.0] * 4, abs=1e-6)  # each hidden token is the one scored


def test_mlm_scoring_hides_each_token_behind_the_mask_and_recovery_reads_it():
    ids, specials = [1, 2, 3, 4], Specials(20)

    class AnswersAtTheMask(SeesTheHiddenToken):
        def forward(self, x, attn_mask=None, **_):
            self.rows = x.clone()
            logits = torch.zeros(*x.shape, self.vocab)
            for r, row in enumerate(x.tolist()):
                for j, t in enumerate(row):
                    if t == specials.mask_id:
                        logits[r, j, self.ids[j]] = 50.0  # the hidden token, predicted where [MASK] stands
            return {"logits": logits}

    model = AnswersAtTheMask(ids, specials.model_vocab)
    logp = OBJECTIVES["mlm"].sequence_log_likelihood(model, ids, specials)
    assert model.rows.tolist() == [[specials.mask_id if j == i else t for j, t in enumerate(ids)] for i in range(4)]
    assert logp.tolist() == pytest.approx([0.0] * 4, abs=1e-6)
    assert OBJECTIVES["mlm"].recover(model, ids, 2, specials) == (3, None)


def test_figures_draw_cjk_labels_without_missing_glyphs():
    """我打你 as heatmap ticks: with the CJK font CI installs (fonts-wqy-microhei), no glyph falls back to a box."""
    import warnings

    import numpy as np
    from matplotlib import font_manager

    from miniformer.study import figures

    cjk = any(k in f.name for f in font_manager.fontManager.ttflist for k in ("WenQuanYi", "Noto Sans CJK"))
    require_system(cjk, "CJK tick labels need a CJK font: apt-get install fonts-wqy-microhei")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figures.to_base64_png(figures.attention_heatmap(np.eye(3), list("我打你"), "我打你 / 你打我"))
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not missing, f"{missing[:1]}: install a CJK font (apt-get install fonts-wqy-microhei)"


def chinese_text(n_lines: int = 1500, seed: int = 0) -> str:
    """Short sentences without spaces, built from a few hundred characters; 我打你 / 你打我 among them."""
    import random

    rng = random.Random(seed)
    subjects, verbs, objects = ["我", "你", "他", "她", "我们", "老师", "小猫"], ["打", "看", "爱", "找", "帮", "叫"], \
        ["你", "我", "他", "她", "小狗", "朋友", "学生"]
    tails = ["了", "吗", "呢", "", "", "一下"]
    lines = []
    for _ in range(n_lines):
        s = rng.choice(subjects) + rng.choice(verbs) + rng.choice(objects) + rng.choice(tails)
        lines.append(s + rng.choice(["。", "！", "？"]) + rng.choice(subjects) + rng.choice(verbs) + rng.choice(objects)
                     + "。")
    return "\ufeff" + "\r\n".join(lines) + "\r\n\x1b[0m"  # a BOM, CRLF and a colour code: read the one documented way


def test_a_chinese_corpus_runs_end_to_end_with_the_order_probe(tmp_path):
    import json

    import yaml

    from miniformer.cli import main
    from tests.conftest import tiny_params

    corpus = tmp_path / "zh.txt"
    corpus.write_text(chinese_text(), encoding="utf-8")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)))
    common = ["--params", str(tmp_path / "params.yaml"), "--results", str(tmp_path / "results"),
              "--data", str(tmp_path / "data")]
    assert main(["prepare", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "data")]) == 0
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    chars = json.loads(meta["tokenizer_json"])["chars"]
    assert "我" in chars and "\ufeff" not in chars and "\r" not in chars and "\x1b" not in chars
    assert main(["train", "baseline", "--seed", "0", *common]) == 0
    assert main(["evaluate", "baseline", "--seed", "0", *common]) == 0
    ev = json.loads((tmp_path / "results" / "eval" / "baseline" / "seed0" / "eval.json").read_text())
    pairs = ev["minimal_pairs"]
    assert pairs["pairs"] > 0 and 0 <= pairs["true_order_preferred"] <= 1
    assert pairs["scoring"] == "sequence log-likelihood"
    assert ev["probe"]["recovery_items"] > 0
    out = tmp_path / "attn.png"
    assert main(["attention", "baseline", "--text", "我打你", "-o", str(out), *common[2:]]) == 0  # no --params
    assert out.stat().st_size > 0


class Oracle(torch.nn.Module):
    """A stand-in that knows the line: where its input holds the line's token t, it predicts the next one (logit 10);
    at ``decoy_at`` it prefers ``decoy`` (logit 12) over the true next token. Records inputs and masks."""

    def __init__(self, ids: list[int], vocab: int, decoy_at: int | None = None, decoy: int = 0,
                 background: float = 0.0) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.ids, self.vocab, self.decoy_at, self.decoy, self.background = ids, vocab, decoy_at, decoy, background
        self.calls: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    def forward(self, x, attn_mask=None, **_):
        self.calls.append((x.clone(), attn_mask))
        assert attn_mask is None or attn_mask.shape[-2:] == (x.size(1), x.size(1)), "mask and input disagree"
        logits = torch.zeros(*x.shape, self.vocab)
        logits[..., :16] = self.background  # ids 0..15 fill every position's other candidates: no ties
        for r, row in enumerate(x.tolist()):
            for t, tok in enumerate(row[: max(0, len(self.ids) - 1)]):
                if tok == self.ids[t]:
                    logits[r, t, self.ids[t + 1]] = 10.0
                    if t == self.decoy_at:
                        logits[r, t, self.decoy] = 12.0
        return {"logits": logits}


def test_left_to_right_recovery_rescores_the_rest_of_the_line():
    """The left context alone prefers a decoy at the hidden position; the likelihood of the rest of the line with each
    candidate in place picks the true token — and the true token is reported as among the candidates."""
    ids, specials = [20, 21, 22, 23, 24, 25, 26, 27], Specials(40)
    model = Oracle(ids, specials.model_vocab, decoy_at=2, decoy=30, background=5.0)  # before the token at 3
    assert OBJECTIVES["causal"].recover(model, ids, 3, specials) == (23, True)

    class PrefersLowIds(Oracle):
        def forward(self, x, attn_mask=None, **_):
            logits = torch.zeros(*x.shape, self.vocab)
            logits[..., :16] = 5.0  # the 16 candidates are ids 0..15, whatever the context
            return {"logits": logits}

    elsewhere = PrefersLowIds([], specials.model_vocab)
    assert OBJECTIVES["causal"].recover(elsewhere, [35, 36, 37, 38, 39, 35, 36, 37], 3, specials)[1] is False


def test_each_reading_scores_log_probabilities_over_the_vocabulary():
    """A model with uniform logits gives every scored token log(1/V), whatever the reading: the softmax runs over
    the vocabulary, not over positions."""
    specials = Specials(40)
    uniform = Oracle([], specials.model_vocab)
    expected = -math.log(specials.model_vocab)
    for name in ("causal", "prefix", "mlm", "span"):
        logp = OBJECTIVES[name].sequence_log_likelihood(uniform, [1, 2, 3, 4, 5], specials)
        assert logp.tolist() == pytest.approx([expected] * (4 if name in ("causal", "prefix") else 5)), name


def test_span_and_mlm_recovery_read_the_line_in_their_training_format():
    ids, specials = [1, 2, 3, 4], Specials(20)
    s0 = specials.sentinel(0)
    model = SeesTheHiddenToken(ids, specials.model_vocab)
    assert OBJECTIVES["span"].recover(model, ids, 2, specials) == (3, None)
    assert model.rows.tolist() == [[1, 2, s0, 4, s0]]  # the line with a sentinel, then the sentinel again
    from miniformer.network.objectives import prefix_mask

    scorer = Oracle([], specials.model_vocab)
    OBJECTIVES["span"].sequence_log_likelihood(scorer, ids, specials)
    assert torch.equal(scorer.calls[-1][1], prefix_mask(torch.tensor([4]), 5))  # input read both ways
    OBJECTIVES["mlm"].recover(scorer, ids, 1, specials)
    assert scorer.calls[-1][0].tolist() == [[1, specials.mask_id, 3, 4]]  # same length: the token replaced


def test_mlm_fill_in_hides_what_training_hides_and_fills_it():
    specials = Specials(20)
    seq = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 4

    class Fills(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x, attn_mask=None, **_):
            logits = torch.zeros(*x.shape, specials.model_vocab)
            for j in range(x.size(1)):
                logits[0, j, seq[j]] = 10.0  # knows the line
            return {"logits": logits}

    masked, filled = OBJECTIVES["mlm"].fill_in(Fills(), seq, specials, torch.Generator().manual_seed(0))
    hidden = [j for j, t in enumerate(masked) if t == specials.mask_id]
    assert hidden and len(hidden) < len(seq) // 2  # ~15 % hidden (BERT), shown as [MASK]
    assert filled == seq  # every hidden token filled in, every other kept


def test_random_partitions_are_positive_and_add_up():
    from miniformer.network.objectives import _random_partition, span_source_length

    for seed in range(30):
        parts = _random_partition(10, 4, torch.Generator().manual_seed(seed))
        assert len(parts) == 4 and sum(parts) == 10 and min(parts) >= 1
    assert _random_partition(5, 5, torch.Generator().manual_seed(0)) == [1, 1, 1, 1, 1]
    assert span_source_length(3) == 2  # the smallest window: two tokens, one of them hidden


class Unigram(torch.nn.Module):
    """A model stuck at the unigram loss: the same next-token logits whatever it reads."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.randn(vocab, generator=torch.Generator().manual_seed(0)))

    def forward(self, x, attn_mask=None):
        return {"logits": self.logits.expand(*x.shape, -1)}


def line_subject(text: str, objective: str = "causal") -> Subject:
    from miniformer.tokenizer import CharTokenizer

    s = Subject.__new__(Subject)
    s.tok = CharTokenizer.train(text)
    s.model, s.objective, s.device, s.T = Unigram(s.tok.vocab_size), OBJECTIVES[objective], torch.device("cpu"), 64
    s.specials = Specials(s.tok.vocab_size)
    return s


def test_a_left_to_right_model_scores_every_character_of_a_pair_so_a_unigram_model_ties():
    """Read after the line break that starts the line, every character of the pair is scored: a model that learned
    only character frequencies ties on every pair. Without the line break, the unscored first character made moving
    a line's first word a free win."""
    from miniformer.evaluation.order import LINE_START, pair_ids

    s = line_subject("\nTo be or not to be\nthat is the question\n")
    true, swapped = "To be or not", "not be or To"
    a, b = pair_ids(s, true), pair_ids(s, swapped)
    assert a[0] == s.tok.encode(LINE_START)[0] and len(a) == len(true) + 1
    with torch.no_grad():
        assert abs(sequence_score(s, a) - sequence_score(s, b)) < ORDER_TIE
        unread = abs(sequence_score(s, s.tok.encode(true)) - sequence_score(s, s.tok.encode(swapped)))
    assert unread > 100 * ORDER_TIE  # the old reading: first characters 'T' vs 'n' left unscored


def test_the_pair_floor_reads_the_pair_as_the_objective_does():
    """Left to right: the bigram scores the characters after the first, as the model does; bidirectional: the
    bigram's pseudo-log-likelihood, every character given both neighbours."""
    from miniformer.evaluation.order import floor_score
    from miniformer.runtime.ngram import NgramModel

    text = "\nTo be or not to be\nthat is the question\n" * 20
    ids = [1, 2, 3, 4, 5]
    for objective in ("causal", "mlm"):
        s = line_subject(text, objective)
        s._ngrams = {2: NgramModel(np.asarray(s.tok.encode(text)), s.tok.vocab_size, 2)}
        bigram = s._ngrams[2]
        expected = (bigram.token_log_probs(ids)[1:].sum() if objective == "causal"
                    else bigram.pseudo_log_likelihood(ids).sum())
        assert floor_score(s, ids) == pytest.approx(float(expected))


def test_the_pair_floor_is_the_strongest_ngram_read_left_to_right(monkeypatch):
    """A left-to-right floor is every n-gram order 2-5 of the train split, each scoring the characters after the
    first given the ones before; the floor kept is the order preferring the true order most often, its per-pair
    outcomes are the samples, and its ties are counted. A text whose words only make sense three characters at a
    time: the bigram prefers the true order on 2 of 3 pairs, the trigram on all 3."""
    from types import SimpleNamespace

    from miniformer.evaluation import order
    from miniformer.runtime.ngram import NgramModel

    lines = ["bc ba cc", "ba cb cc", "cb cc bc"]  # the pairs: each line with its first two words swapped
    text = "".join("\n" + line for line in lines) * 10 + "\n"
    s = line_subject(text, "causal")
    ids = np.asarray(s.tok.encode(text))
    s.data = SimpleNamespace(splits={"train": ids}, vocab_size=s.tok.vocab_size)
    s._ngrams = {}
    swapped = [" ".join([w[1], w[0], w[2]]) for w in (line.split() for line in lines)]
    pairs = [(s.tok.encode("\n" + a), s.tok.encode("\n" + b)) for a, b in zip(lines, swapped)]
    monkeypatch.setattr(order, "order_pairs", lambda subject: pairs)
    measured = order.minimal_pairs(s)
    mp = measured.values["minimal_pairs"]
    expected = {}
    for n in order.FLOOR_ORDERS:
        model = NgramModel(ids, s.tok.vocab_size, n)
        score = [(float(model.token_log_probs(a)[1:].sum()), float(model.token_log_probs(b)[1:].sum()))
                 for a, b in pairs]
        expected[n] = [order.preferred(a, b) for a, b in score]
    shares = {n: float(np.mean(v)) for n, v in expected.items()}
    assert mp["ngram_true_order_preferred"] == {str(n): pytest.approx(v) for n, v in shares.items()}
    best = max(shares, key=shares.get)
    assert shares[best] > shares[2], shares  # the text is one where more context tells more
    assert mp["floor_order"] == best and mp["floor_true_order_preferred"] == pytest.approx(shares[best])
    assert measured.samples["pairs_floor"] == expected[best]
    assert mp["floor_ties"] == sum(o == 0.5 for o in expected[best])
    s.objective = OBJECTIVES["mlm"]  # a bidirectional reading: the bigram's pseudo-log-likelihood alone
    assert order.floor_orders(s) == (2,)


def test_the_floor_orders_stop_where_a_large_vocabulary_overflows_the_key():
    from types import SimpleNamespace

    from miniformer.evaluation import order

    s = line_subject("\nabc\n", "causal")
    s.data = SimpleNamespace(vocab_size=20000)  # 14.3 bits a character: four fit in 62 bits, five do not
    assert order.floor_orders(s) == (2, 3, 4)
