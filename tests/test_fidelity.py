"""Fidelity: every variant learns what its source says it learns, and every objective is fed its training format.

The post-norm collapse once passed as "trains" because the bar was "the loss went down 15 %", which a model that only
learns character frequencies clears. Here the bar is the unigram loss of a corpus where context decides everything.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from miniformer.errors import UserError
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import (
    IGNORE,
    OBJECTIVES,
    Specials,
    corrupt_spans,
    demo_prompt,
    prefix_mask,
    recover_spans,
    span_batch,
)
from miniformer.network.positions import POSITION_METHODS
from miniformer.params import Study
from miniformer.stages.crosscheck import TRANSLATED

# A period-12 sequence: given the two previous tokens the next one is certain, while its unigram loss (6 tokens seen
# once and 3 seen twice per period) is ≈ 2.14 nats. A model that learns only frequencies stays there.
PATTERN = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 4, 6] * 40)
COUNTS = torch.bincount(PATTERN).float()
UNIGRAM = float(-(COUNTS[COUNTS > 0] / COUNTS.sum() * (COUNTS[COUNTS > 0] / COUNTS.sum()).log()).sum())


def tiny(**overrides) -> ModelConfig:
    base = dict(vocab_size=20, block_size=16, n_layer=2, n_head=4, n_embd=32)
    base.update(overrides)
    return ModelConfig(**base)


def final_loss(steps: int = 80, objective: str = "causal", **overrides) -> float:
    """Train a tiny model on PATTERN; the mean loss of the last 5 steps."""
    specials = Specials(10, n_sentinels=9)
    torch.manual_seed(0)
    model = MiniFormer(tiny(vocab_size=specials.model_vocab, **overrides))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    L = OBJECTIVES[objective].window_length(16)
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(PATTERN) - L, (8,), generator=g)
        b = OBJECTIVES[objective].batch(torch.stack([PATTERN[s : s + L] for s in starts]), specials, g)
        loss = model(b.x, b.y, attn_mask=b.mask)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return sum(losses[-5:]) / 5


ROOT = Path(__file__).resolve().parents[1]

LEARNING_SWITCHES = [
    *[dict(pos=p) for p in POSITION_METHODS],  # the registry's: a new method is tested without editing this list
    dict(attn_scale=False),
    dict(causal=False),
    dict(qkv_order="vkq"),
    dict(head_merge="mean"),
    dict(norm="rmsnorm"),
    dict(norm_placement="post"),
    dict(residual=False),  # two layers: shallow enough to train without residuals (see the depth test below)
    dict(mlp_ratio=0.25),
    dict(tie_weights=False, dropout=0.1),
    dict(init="gpt2"),
    dict(bias=True),
    dict(qk_tied=True),
    dict(value_proj=False),
    dict(pos="learned", pos_table="token"),
    *[dict(objective=o) for o in ("mlm", "prefix", "span")],
]
SIZES = {"vocab_size", "block_size", "n_layer", "n_head", "n_embd"}  # every config has them; tested across sizes


def test_every_model_switch_has_a_learning_case():
    """LEARNING_SWITCHES covers every ModelConfig field that is a switch: a field added to the model fails here until
    it has a case, instead of the list lagging the config."""
    covered = {k for case in LEARNING_SWITCHES for k in case}
    assert {f.name for f in dataclasses.fields(ModelConfig)} - SIZES <= covered


@pytest.mark.parametrize("overrides", LEARNING_SWITCHES, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_every_switch_learns_from_context(overrides):
    overrides = dict(overrides)
    loss = final_loss(objective=overrides.pop("objective", "causal"), **overrides)
    assert loss < 0.5 * UNIGRAM, f"final loss {loss:.3f} is {loss / UNIGRAM:.0%} of the unigram loss {UNIGRAM:.3f}"


def test_without_residuals_depth_collapses_to_the_unigram_loss():
    """Dong et al. 2021: without skip connections token representations collapse, faster with depth."""
    shallow, deep = final_loss(residual=False, n_layer=2), final_loss(residual=False, n_layer=6)
    assert shallow < 0.5 * UNIGRAM, f"2 layers: {shallow:.3f} vs unigram {UNIGRAM:.3f}"
    assert deep > 0.9 * UNIGRAM, f"6 layers: {deep:.3f} should sit at the unigram loss {UNIGRAM:.3f}"


def test_gpt2_init_without_residuals_learns_nothing():
    """The GPT-2 init (std 0.02) makes a residual-free network start near zero output: it stays at frequencies."""
    loss = final_loss(residual=False, init="gpt2")
    assert loss > 0.9 * UNIGRAM, f"{loss:.3f} vs unigram {UNIGRAM:.3f}"


def test_vaswani_init_scales_embeddings_and_gpt2_does_not():
    torch.manual_seed(0)
    vas, gpt = MiniFormer(tiny(n_embd=64, init="vaswani")), MiniFormer(tiny(n_embd=64, init="gpt2"))
    idx = torch.arange(20)[None]
    assert vas.wte(idx).mul(vas.embed_scale).std().item() == pytest.approx(1.0, rel=0.15)
    assert gpt.wte(idx).mul(gpt.embed_scale).std().item() == pytest.approx(0.02, rel=0.15)
    # q, k and v drawn as one 64 -> 192 Xavier matrix: std √(2 / (64 + 192)); GPT-2: 0.02
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert getattr(vas.blocks[0].attn, proj).weight.std().item() == pytest.approx(math.sqrt(2 / 256), rel=0.1)
        assert getattr(gpt.blocks[0].attn, proj).weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_bad_init_names_the_choices():
    with pytest.raises(ValueError, match="unknown init='xavier'; choose one of vaswani, gpt2"):
        tiny(init="xavier")


# --- each objective's demo and probe are fed its training format -----------------------------------------------------


class Recorder(torch.nn.Module):
    """Stands in for a model: records every (input, mask) and answers from a fixed table of next tokens."""

    def __init__(self, vocab: int, answer=None) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.vocab, self.answer, self.calls = vocab, answer, []

    def forward(self, x, targets=None, attn_mask=None, **_):
        self.calls.append((x.clone(), None if attn_mask is None else attn_mask.clone()))
        logits = torch.zeros(*x.shape, self.vocab)
        if self.answer is not None:
            for b in range(x.size(0)):
                for i, t in enumerate(self.answer(x[b].tolist())):
                    logits[b, i, t] = 10.0
        return {"logits": logits}


def test_prefix_generation_mask_is_the_training_prefix_mask():
    """Generation with a prefix reads the text under the mask training used: key j visible to query i if j is in the
    prefix or j <= i; checked on the masks generate actually passes to the model, against the rule written out."""
    torch.manual_seed(0)
    model = MiniFormer(tiny(pos="rope")).eval()
    original, seen = model.forward, []

    def spy(idx, *a, attn_mask=None, **k):
        seen.append(attn_mask)
        return original(idx, *a, attn_mask=attn_mask, **k)

    model.forward = spy
    for p, T in [(1, 5), (3, 7), (7, 9)]:
        seen.clear()
        model.generate(torch.arange(1, p + 1)[None], T - p, temperature=0, prefix_len=p)
        last = seen[-1]  # the final step reads T - 1 tokens
        n = last.size(-1)
        expected = torch.tensor([[j < p or j <= i for j in range(n)] for i in range(n)])
        assert torch.equal(last, expected)
        assert torch.equal(prefix_mask(torch.tensor([p]), n)[0], expected)  # the training batches' mask


def test_prefix_generation_reads_the_prompt_bidirectionally():
    torch.manual_seed(0)
    model = MiniFormer(tiny(pos="rope")).eval()
    seen = []
    original = model.forward

    def spy(idx, *a, attn_mask=None, cache=None, **k):
        seen.append((idx.size(1), attn_mask, cache))
        return original(idx, *a, attn_mask=attn_mask, cache=cache, **k)

    model.forward = spy
    prompt = torch.tensor([[1, 2, 3, 4, 5]])
    out = model.generate(prompt, 3, temperature=0, prefix_len=5)
    assert out.shape == (1, 8)
    for T, mask, cache in seen:
        assert cache is None  # every step recomputes: no cached keys under a mask that is not the default
        assert torch.equal(mask, prefix_mask(torch.tensor([5]), T)[0])
    # and a prefix changes what the prompt's last position predicts (its earlier tokens now see later ones)
    causal = MiniFormer.forward(model, prompt)["logits"][0, -1]
    bidirectional = MiniFormer.forward(model, prompt, attn_mask=prefix_mask(torch.tensor([5]), 5)[0])["logits"][0, -1]
    assert not torch.allclose(causal, bidirectional)


def test_span_demo_uses_sentinels_and_recovers_with_a_perfect_model():
    specials = Specials(10, n_sentinels=9)
    seq = PATTERN[:40].tolist()
    inputs, targets = corrupt_spans(seq, specials, torch.Generator().manual_seed(3))
    full = inputs + targets

    def oracle(x: list[int]) -> list[int]:  # the training target of position i: token i+1 of [inputs | targets]
        return full[1 : len(x) + 1]

    # a teacher-forced oracle: a correct alignment of predictions to hidden characters recovers every one of them
    model = Recorder(specials.model_vocab, oracle)
    r = recover_spans(model, seq, specials, torch.Generator().manual_seed(3))
    (x, mask), = model.calls
    assert specials.mask_id not in x[0].tolist(), "span models never see [MASK]"
    assert specials.sentinel(0) in x[0].tolist()
    assert r["filled"] == seq
    assert r["hidden_correct"] == r["hidden_total"] > 0
    assert r["masked"].count(specials.mask_id) == r["hidden_total"]
    # the mask and layout equal span_batch's for the same corruption
    b = span_batch(torch.tensor([seq]), specials, torch.Generator().manual_seed(3))
    assert torch.equal(x[0], b.x[0, : x.size(1)])
    assert torch.equal(mask, b.mask[0, : x.size(1), : x.size(1)])


def test_demo_prompt_is_a_fixed_held_out_window():
    split = torch.arange(1000).numpy().astype("uint16")
    a, b = demo_prompt(split, 16, seed=0), demo_prompt(split, 16, seed=0)
    assert a == b and len(a) == 16 and a == list(range(a[0], a[0] + 16))
    assert demo_prompt(split, 16, seed=1) != a


@pytest.fixture(scope="module")
def objective_runs(tmp_path_factory):
    """A tiny study with every objective trained a few steps, and its prepared data."""
    from miniformer.params import Study
    from miniformer.stages.prepare import prepare
    from miniformer.stages.train import train
    from tests.conftest import make_text, tiny_params

    tmp = tmp_path_factory.mktemp("objectives")
    (tmp / "corpus.txt").write_text(make_text(), encoding="utf-8")
    params = tiny_params(tmp / "corpus.txt")
    params["experiments"] = {
        "baseline": {"group": "reference"},
        **{f"obj_{o}": {"group": "objective", "train": {"objective": o}} for o in ("mlm", "prefix", "span")},
    }
    (tmp / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    study = Study.load(tmp / "params.yaml")
    prepare(study.data_config(), tmp / "data", min_tokens=200)
    for exp in study.experiments:
        train(study.config(exp, 0), tmp / "data", tmp / "runs" / exp, resume="never", progress=False)
    return study, tmp


def _samples(tmp, exp):
    return [json.loads(line) for line in (tmp / "runs" / exp / "samples.jsonl").read_text().splitlines()]


def test_training_samples_are_in_each_objectives_format(objective_runs):
    study, tmp = objective_runs
    T = study.config("baseline", 0).model.block_size
    prefix = _samples(tmp, "obj_prefix")[-1]
    assert prefix["kind"] == "generation" and len(prefix["prompt"]) == T // 2  # char tokens: T/2 characters
    for exp, hidden_as in [("obj_mlm", "[MASK]"), ("obj_span", "sentinel")]:
        s = _samples(tmp, exp)[-1]
        assert s["kind"] == "recovery" and hidden_as in s["hidden_as"]
        assert len(s["masked"]) == len(s["text"]) == len(s["original"])
        hidden = [i for i, c in enumerate(s["masked"]) if c == "_" and s["original"][i] != "_"]
        assert hidden, "some characters are hidden"
        kept = [i for i in range(len(s["original"])) if i not in hidden]
        assert all(s["text"][i] == s["original"][i] for i in kept), "only hidden characters are filled in"
    assert "prompt" not in _samples(tmp, "baseline")[-1]  # a causal LM is trained on every position: no prompt


def test_evaluation_probe_and_generation_use_each_objectives_format(objective_runs):
    from miniformer.evaluation.subject import Subject
    from miniformer.runtime.checkpoints import load_run_model
    from miniformer.runtime.tokendata import TokenData

    study, tmp = objective_runs
    data = TokenData(tmp / "data")
    specials = Specials(data.vocab_size)
    ids = data.splits["test"][:30].astype("int64").tolist()
    for exp in ("obj_mlm", "obj_span", "obj_prefix", "baseline"):
        run = study.config(exp, 0)
        model, _, _ = load_run_model(tmp / "runs" / exp, torch.device("cpu"))
        recorder = Recorder(model.cfg.vocab_size)
        ev = Subject(run, recorder, data, torch.device("cpu"))
        ev.objective.recover(ev.model, ids, 10, ev.specials)
        x, mask = recorder.calls[-1]
        mask = mask.reshape(mask.shape[-2:])  # one example: (1, T, T) or (T, T)
        if exp == "obj_mlm":
            assert x[0, 10] == specials.mask_id and mask.all()
        elif exp == "obj_span":
            s0 = specials.sentinel(0)
            assert x[0].tolist() == ids[:10] + [s0] + ids[11:] + [s0]
            assert torch.equal(mask, prefix_mask(torch.tensor([len(ids)]), len(ids) + 1)[0])
        elif exp == "obj_prefix":  # the characters before the hidden one are the bidirectional prefix
            assert torch.equal(mask, prefix_mask(torch.tensor([10]), len(ids) - 1)[0])
        else:
            assert torch.equal(mask, torch.ones(len(ids) - 1, len(ids) - 1, dtype=torch.bool).tril())
        assert IGNORE not in x


def test_prefix_generations_in_evaluation_continue_a_prompt(objective_runs):
    """A prefix LM generates from a held-out prompt of block_size/2 read as its prefix; every sample reaches the
    longest multiple and is scored in every position bin."""
    from miniformer.evaluation.generations import generations
    from miniformer.evaluation.subject import Subject
    from miniformer.runtime.checkpoints import load_run_model
    from miniformer.runtime.tokendata import TokenData

    study, tmp = objective_runs
    run = study.config("obj_prefix", 0)
    model, _, _ = load_run_model(tmp / "runs" / "obj_prefix", torch.device("cpu"))
    measured = generations(Subject(run, model, TokenData(tmp / "data"), torch.device("cpu")))
    gens = measured.files["generations.json"]
    T, top = run.model.block_size, max(run.eval.gen_multiples)
    assert len(gens["prompt"]) == T // 2 and not gens["unreached"]
    assert len(gens["texts"]) == run.eval.gen_samples
    assert all(len(t) == top * T - T // 2 for t in gens["texts"])
    assert set(measured.samples["generation"]) == {str(m) for m in run.eval.gen_multiples}
    # each sample's growth past the block: its n-gram loss in a bin minus its own inside the block
    by_bin, growth = measured.samples["generation"], measured.samples["generation_growth"]
    assert set(growth) == set(by_bin) - {"1"} and growth
    for label, per_sample in growth.items():
        assert per_sample == pytest.approx([b - a for a, b in zip(by_bin["1"], by_bin[label])])


# --- the cross-check against the peer implementation ----------------------------------------------------------------


@pytest.mark.slow
def test_crosscheck_agrees_with_the_peer_on_a_small_config(tmp_path):
    """Ours and x-transformers, same tokens, batches, schedule and evaluation: pre-norm RoPE and post-norm agree."""
    from miniformer.params import Study
    from miniformer.runtime.files import read_json_folder as read_crosscheck
    from miniformer.stages.crosscheck import crosscheck
    from miniformer.stages.evaluate import evaluate
    from miniformer.stages.prepare import prepare
    from miniformer.stages.train import train
    from miniformer.study.findings import Metrics, peer_comparisons
    from tests.conftest import make_text, tiny_params

    (tmp_path / "corpus.txt").write_text(make_text(), encoding="utf-8")
    params = tiny_params(tmp_path / "corpus.txt")
    steps = 600  # long enough that both are near this corpus' floor; at 150 steps both still fall ≈ 0.1 per 100
    params["model"] = {"block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32}
    params["train"].update(steps=steps, warmup=60, log_every=steps, sample_every=steps, ckpt_every=steps)
    params["eval"].update(split_tokens=8192, length_multiples=[1, 2])
    params["experiments"] = {
        "baseline": {"group": "reference", "peer": True},
        "block_post_norm": {"group": "block", "peer": True, "model": {"norm_placement": "post"}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    study = Study.load(tmp_path / "params.yaml")
    data = tmp_path / "data"
    prepare(study.data_config(), data, min_tokens=200)
    nested: dict = {}
    for exp, seed in study.runs():
        run = study.config(exp, seed)
        train(run, data, tmp_path / "runs" / exp / f"seed{seed}", resume="never", progress=False)
        ev = evaluate(run, tmp_path / "runs" / exp / f"seed{seed}", tmp_path / "eval" / exp / f"seed{seed}", data)
        nested.setdefault(exp, {})[f"seed{seed}"] = {"val_loss": ev["val_loss"]}
    peer = crosscheck(study, data, tmp_path / "crosscheck")
    assert read_crosscheck(tmp_path / "crosscheck") == json.loads(json.dumps(peer))
    assert peer.keys() == {"baseline", "block_post_norm"}
    rows = peer_comparisons(Metrics(nested), peer, {"baseline": "seed0", "block_post_norm": "seed0"})
    for r in rows:
        assert r.outcome == "agree", f"{r.experiment}: ours {r.ours:.3f} vs peer {r.peer:.3f} (tol {r.tolerance:.3f})"
        assert set(r.peer_at) == {"1", "2"}  # past block_size the two may differ by design; the report shows both

    # and the check can fail: 0.2 nats away is flagged, and explained by the init only when the peer under ours agrees
    def moved(own: float, ours_init: float) -> dict:
        return {e: {"inits": {"own": {**p["inits"]["own"], "val_loss": p["inits"]["own"]["val_loss"] + own},
                              "vaswani": {**p["inits"]["vaswani"], "val_loss": r.ours + ours_init}}}
                for (e, p), r in zip(peer.items(), rows)}

    assert {r.outcome for r in peer_comparisons(Metrics(nested), moved(0.2, 0.0), {})} == {"init"}
    assert {r.outcome for r in peer_comparisons(Metrics(nested), moved(0.2, 0.2), {})} == {"DISAGREE"}


def test_generate_command_reads_a_prefix_models_prompt_bidirectionally(objective_runs, monkeypatch):
    from miniformer.stages import explore

    study, tmp = objective_runs
    seen = {}
    for exp, expected in [("obj_prefix", True), ("baseline", False)]:
        run = explore.load(str(tmp / "runs" / exp), tmp / "runs", data_dir=tmp / "data")
        original = run.model.generate

        def spy(idx, *a, prefix_len=None, _original=original, **k):
            seen["prefix_len"], seen["prompt_len"] = prefix_len, idx.size(1)
            return _original(idx, *a, prefix_len=prefix_len, **k)

        monkeypatch.setattr(run.model, "generate", spy)
        text = explore.generate(run, "the king", 5, 0.8, 20, 0)
        assert text.startswith("the king") and len(text) == len("the king") + 5
        assert (seen["prefix_len"] == seen["prompt_len"] == len("the king")) if expected else seen["prefix_len"] is None
    span = explore.load(str(tmp / "runs" / "obj_span"), tmp / "runs", data_dir=tmp / "data")
    with pytest.raises(Exception, match="does not generate left to right"):
        explore.generate(span, "a", 3, 1, 5, 0)


def test_our_init_on_the_peer_adds_the_sinusoidal_table_at_full_scale():
    """The peer starts its scaled sinusoidal embedding at 1/√d; beside our unit-scale tokens that left the peer
    'with our init' almost without positions (its sinusoidal run scored like its no-position run). Ours adds the
    table raw, so our init on the peer sets that scale to 1."""
    from miniformer.params import Study
    from miniformer.stages.crosscheck import PeerLM, peer_spec, vaswani_init_
    from tests.conftest import tiny_params

    params = tiny_params("corpus.txt")
    params["experiments"]["pos_sinusoidal"] = {"group": "position", "model": {"pos": "sinusoidal"}}
    run = Study(params).config("pos_sinusoidal", 0)
    model = PeerLM(peer_spec(run), 20)
    scale = dict(model.net.named_parameters())["pos_emb.scale"]
    assert float(scale.detach()) == pytest.approx(run.model.n_embd ** -0.5)  # the peer's own start
    vaswani_init_(model)
    assert float(scale.detach()) == 1.0
    assert float(model.net.token_emb.emb.weight.detach().std()) == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(ModelConfig) if f.name not in TRANSLATED])
def test_the_peer_refuses_every_model_switch_it_does_not_translate(field, monkeypatch):
    """Every ModelConfig field is either translated into the peer's arguments or, changed from its default, refused in
    one line naming it: a switch added to the model can never reach the peer silently ignored. A position method the
    peer has no translation for (a toy one registered here) is refused too, not trained as a peer without positions."""
    from miniformer.network import positions
    from miniformer.stages.crosscheck import PEER_POSITIONS, peer_spec

    run = Study.load(ROOT / "params.yaml", "smoke").config("baseline", 0)
    default = getattr(run.model, field)
    peer_spec(run)  # the baseline itself translates
    changed = (not default) if isinstance(default, bool) else {"qkv_order": "kqv", "head_merge": "mean",
                                                              "pos_table": "token", "dropout": 0.1}.get(field)
    assert changed is not None, f"no test value for {field}: add one"
    setattr(run.model, field, changed)
    with pytest.raises(UserError, match=f"changes {field}, which the peer has no switch for"):
        peer_spec(run)

    class Toy(positions.NoPosition):
        name = "toy"

    monkeypatch.setitem(positions.POSITIONS, "toy", Toy)
    setattr(run.model, field, default)
    run.model.pos = "toy"
    assert "toy" not in PEER_POSITIONS
    with pytest.raises(UserError, match="pos='toy', which the peer has no equivalent of"):
        peer_spec(run)
