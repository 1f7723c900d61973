"""Behaviour of the model library: each test states a property the study relies on."""

from __future__ import annotations

import math

import pytest
import torch

from miniformer.course.answers import init_qkv_proj, self_attention
from miniformer.network.attention import (
    AttentionInputs,
    KVCache,
    SelfAttention,
    apply_causal_mask,
    attn_scaled,
    attn_softmax,
    compute_outputs,
    make_causal_mask,
    merge_heads,
    pairwise_similarities,
    split_heads,
    split_heads_qkv,
)
from miniformer.network.flops import count_params, flops_per_token
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import (
    IGNORE,
    OBJECTIVES,
    Specials,
    corrupt_spans,
    mlm_batch,
    prefix_batch,
    prefix_mask,
    reconstruct_spans,
    span_batch,
)
from miniformer.network.positions import POSITIONS as POSITION_REGISTRY
from miniformer.network.positions import Rotary, alibi_slopes, apply_rotary, sinusoidal_table

POSITIONS = list(POSITION_REGISTRY)  # every registered method: a new one is tested without editing this file
DEFINED_PAST_BLOCK = [m for m, cls in POSITION_REGISTRY.items() if cls.undefined_past_block is None]
TELLS_ORDER = [m for m, cls in POSITION_REGISTRY.items() if cls.tells_order]


def tiny(**overrides) -> ModelConfig:
    base = dict(vocab_size=20, block_size=16, n_layer=2, n_head=4, n_embd=32)
    base.update(overrides)
    return ModelConfig(**base)


def attention(n_embd: int, n_head: int, **switches) -> SelfAttention:
    """One SelfAttention layer with these ModelConfig switches (no position method: the tests hand in their own)."""
    return SelfAttention(ModelConfig(n_embd=n_embd, n_head=n_head, pos="none", **switches))


def attend(attn: SelfAttention, x: torch.Tensor, mask: torch.Tensor | None, **inputs) -> tuple:
    return attn(x, AttentionInputs(mask, **inputs))


def model_of(**overrides) -> MiniFormer:
    """A tiny model whose position parameters are random, not their init: T5's table starts at zero and the
    sinusoidal scale at one, so at init a test of either would not exercise the method at all."""
    torch.manual_seed(0)
    model = MiniFormer(tiny(**overrides)).eval()
    with torch.no_grad():
        for _, p in model.position.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() == 0 else 0.0))
    return model


def test_model_of_gives_t5_a_non_trivial_table():
    bias = model_of(pos="t5").position.score_bias(6, torch.device("cpu"))
    assert bias.std() > 0.1  # different offsets get different biases


# --- primitives ------------------------------------------------------------------------------------------------------


def test_primitives_compose_to_the_textbook_equation():
    torch.manual_seed(0)
    Q, K, V = (torch.randn(2, 5, 8) for _ in range(3))
    out = self_attention(Q, K, V, n_heads=1, causal=True)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(8)
    scores = scores.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf"))
    expected = torch.softmax(scores, -1) @ V
    torch.testing.assert_close(out, expected)
    assert pairwise_similarities(Q, K).shape == (2, 5, 5)
    torch.testing.assert_close(attn_scaled(torch.ones(1), 64, 4), torch.ones(1) / 4)
    torch.testing.assert_close(attn_softmax(torch.zeros(3, 4)).sum(-1), torch.ones(3))
    assert compute_outputs(torch.eye(5)[None], V).equal(V)


def test_causal_mask_is_lower_triangular_and_masks_to_minus_inf():
    m = make_causal_mask(4)
    assert m.equal(torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    A = apply_causal_mask(m, torch.zeros(4, 4))
    assert torch.isinf(A[0, 1]) and A[1, 0] == 0


def test_init_qkv_proj_gives_three_width_preserving_projections():
    projections = init_qkv_proj(24)
    assert len(projections) == 3 and len({id(p) for p in projections}) == 3  # three separate matrices
    for proj in projections:
        assert isinstance(proj, torch.nn.Linear) and (proj.in_features, proj.out_features) == (24, 24)


@pytest.mark.parametrize("kwargs,message", [
    (dict(n_head=5), "n_embd=32 is not divisible by n_head=5"),
    (dict(n_head=4, qkv_order="qqv"), "must be a permutation of 'qkv'"),
    (dict(n_head=4, head_merge="sum"), "must be 'concat' or 'mean'"),
])
def test_self_attention_refuses_impossible_switches(kwargs, message):
    with pytest.raises(ValueError, match=message):
        attention(32, **kwargs)


def test_kv_cache_of_a_one_layer_model():
    model = model_of(n_layer=1)
    idx = torch.randint(0, 20, (1, 6), generator=torch.Generator().manual_seed(0))
    cache = KVCache(1)
    full = model(idx)["logits"]
    for a, b in [(0, 1), (1, 4), (4, 6)]:  # a chunk of several queries after one cached position, too
        torch.testing.assert_close(model(idx[:, a:b], cache=cache)["logits"], full[:, a:b], atol=1e-5, rtol=1e-4)
    assert cache.length == 6


def test_split_then_merge_is_identity():
    X = torch.randn(3, 7, 24)
    assert merge_heads(split_heads(X, 6)).equal(X)
    q, k, v = split_heads_qkv(X, X, X, 4)
    assert q.shape == (3, 4, 7, 6)


# --- attention module ------------------------------------------------------------------------------------------------

SWITCHES = [
    dict(),
    dict(attn_scale=False),
    dict(causal=False),
    dict(qkv_order="kqv"),
    dict(head_merge="mean"),
    dict(n_head=1),
    *[dict(pos=p) for p in POSITIONS],
]


@pytest.mark.parametrize("overrides", SWITCHES, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()) or "base")
def test_sdpa_fast_path_equals_explicit_path(overrides):
    model = model_of(**overrides)
    idx = torch.randint(0, 20, (2, 16))
    fast = model(idx)["logits"]
    explicit = model(idx, return_weights=True)["logits"]
    torch.testing.assert_close(fast, explicit, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("objective", ["mlm", "prefix", "span"])
def test_sdpa_equals_explicit_under_objective_masks(objective):
    model = model_of(pos="alibi")
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 10, (3, OBJECTIVES[objective].window_length(16)))
    batch = OBJECTIVES[objective].batch(tokens, Specials(10, n_sentinels=9), g)
    fast = model(batch.x, attn_mask=batch.mask)["logits"]
    explicit = model(batch.x, attn_mask=batch.mask, return_weights=True)["logits"]
    torch.testing.assert_close(fast, explicit, rtol=1e-4, atol=1e-5)


# Hand-computed reference, one head of width 1 (so 1/√d = 1): q = (1, 2, 0), k = (1, 0, 1), v = (1, 2, 4).
# Scores q_i·k_j: row 0 (1, 0, 1), row 1 (2, 0, 2), row 2 (0, 0, 0). Outputs from softmax by hand, e = exp(1):
#   causal:  row 0 sees key 0 -> 1;  row 1 sees (2, 0) -> (e²·1 + 2)/(e² + 1);  row 2 sees all zeros -> (1+2+4)/3
#   prefix p=2: row 0 sees (1, 0) -> (e·1 + 2)/(e + 1);  rows 1, 2 as causal
#   full:    row 0 -> (e·1 + 2 + e·4)/(2e + 1);  row 1 -> (e²·1 + 2 + e²·4)/(2e² + 1);  row 2 -> 7/3
HAND_COMPUTED = {
    "causal": [1.0, 1.1192029220221176, 2.3333333333333335],
    "prefix": [1.268941421369995, 1.1192029220221176, 2.3333333333333335],
    "full": [2.422318798251518, 2.468310530833481, 2.3333333333333335],
}


# SDPA's causal hint replaces the mask by its own causal one, so it has only the causal case to be tested on.
HAND_CASES = [(k, p) for k in HAND_COMPUTED for p in ("explicit", "sdpa")] + [("causal", "sdpa-causal-hint")]


@pytest.mark.parametrize("kind,path", HAND_CASES, ids=[f"{p}-{k}" for k, p in HAND_CASES])
def test_attention_matches_a_hand_computed_example(kind, path):
    q, k, v = (torch.tensor(t, dtype=torch.float64).view(1, 1, 3, 1) for t in ([1, 2, 0], [1, 0, 1], [1, 2, 4]))
    mask = {"causal": make_causal_mask(3), "prefix": prefix_mask(torch.tensor([2]), 3)[0], "full": None}[kind]
    attn = attention(1, 1).double()
    if path == "explicit":
        out, _ = attn.explicit(q, k, v, mask, None)
    else:
        out = attn._sdpa(q, k, v, mask, None, is_causal_hint=path == "sdpa-causal-hint")
    assert out.flatten().tolist() == pytest.approx(HAND_COMPUTED[kind], abs=1e-12)


@pytest.mark.parametrize("pos", POSITIONS)
def test_causal_output_ignores_the_future_and_no_mask_does_not(pos):
    idx = torch.randint(0, 20, (1, 16))
    later = idx.clone()
    later[0, 10:] = (later[0, 10:] + 1) % 20
    causal = model_of(pos=pos)
    a, b = causal(idx)["logits"], causal(later)["logits"]
    torch.testing.assert_close(a[:, :10], b[:, :10])
    leaky = model_of(pos=pos, causal=False)
    assert not torch.allclose(leaky(idx)["logits"][:, :10], leaky(later)["logits"][:, :10])


def test_attention_weights_above_diagonal_are_exactly_zero():
    out = model_of()(torch.randint(0, 20, (2, 16)), return_weights=True)
    for w in out["weights"]:
        assert torch.all(w.triu(1) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    unmasked = model_of(causal=False)(torch.randint(0, 20, (2, 16)), return_weights=True)["weights"][0]
    assert unmasked.triu(1).sum() > 0


def test_no_scale_gives_sharper_attention():
    x = torch.randn(1, 16, 32) * 3
    scaled, unscaled = attention(32, 1, attn_scale=True), attention(32, 1, attn_scale=False)
    unscaled.load_state_dict(scaled.state_dict())
    mask = make_causal_mask(16)

    def entropy(w):
        return -(w * w.clamp_min(1e-12).log()).sum(-1).mean()

    sharp, soft = (attend(a, x, mask, return_weights=True)[1] for a in (unscaled, scaled))
    assert entropy(sharp) < entropy(soft)


def test_qkv_role_swap_is_a_relabelling_of_the_projections():
    a = attention(16, 2, qkv_order="qkv")
    b = attention(16, 2, qkv_order="kqv")
    b.k_proj.load_state_dict(a.q_proj.state_dict())  # b's key projection plays its query: it holds a's query weights
    b.q_proj.load_state_dict(a.k_proj.state_dict())
    b.v_proj.load_state_dict(a.v_proj.state_dict())
    b.o_proj.load_state_dict(a.o_proj.state_dict())
    x = torch.randn(2, 5, 16)
    mask = make_causal_mask(5)
    torch.testing.assert_close(attend(a, x, mask)[0], attend(b, x, mask)[0])


def test_head_mean_projects_from_one_head_width():
    torch.manual_seed(0)
    attn = attention(32, 4, head_merge="mean")
    assert attn.o_proj.in_features == 8
    x = torch.randn(1, 3, 32)
    q, k, v = split_heads_qkv(attn.q_proj(x), attn.k_proj(x), attn.v_proj(x), 4)
    per_head = attn_softmax(attn_scaled(pairwise_similarities(q, k), 32, 4)) @ v  # (1, 4, 3, 8), no mask
    expected = attn.o_proj(per_head.mean(dim=1))  # the heads' average, not their sum or concatenation
    torch.testing.assert_close(attend(attn, x, None)[0], expected)


# --- positions -------------------------------------------------------------------------------------------------------


def test_sinusoidal_matches_its_formula():
    table = sinusoidal_table(50, 16)
    for p in (0, 7, 49):
        for i in range(8):
            angle = p / 10000 ** (2 * i / 16)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_rope_scores_depend_only_on_relative_offset():
    rope = Rotary(8)
    torch.manual_seed(0)
    q, k = torch.randn(8), torch.randn(8)
    rot = rope.rotations(40, torch.device("cpu"))

    def score(i, j):
        return (apply_rotary(q, rot[i]) * apply_rotary(k, rot[j])).sum()

    torch.testing.assert_close(score(3, 1), score(30, 28))
    torch.testing.assert_close(score(10, 10), score(0, 0))
    assert not torch.allclose(score(3, 1), score(3, 2))


def test_rope_hook_rotates_query_and_key_per_head():
    """The RoPE hook on (B, T, H, D) query and key equals rotating each head's (T, D) slice by the position's angles,
    forward and backward; the gradient passes gradcheck in float64."""
    B, T, H, D = 2, 5, 3, 4
    rope = Rotary(D, H)
    rotate_qk = rope.rotary(T, torch.device("cpu"))
    rot = rope.rotations(T, torch.device("cpu"))
    torch.manual_seed(0)
    q, k = (torch.randn(B, T, H, D, requires_grad=True) for _ in range(2))
    hooked = rotate_qk(q * 1, k * 1)  # non-leaves, as the projections' outputs are in the model
    plain = [apply_rotary(t.transpose(1, 2), rot).transpose(1, 2) for t in (q, k)]
    grads = [torch.randn(B, T, H, D) for _ in range(2)]
    for a, b in zip(torch.autograd.grad(hooked, (q, k), grads), torch.autograd.grad(plain, (q, k), grads)):
        torch.testing.assert_close(a, b)
    for a, b in zip(hooked, plain):
        torch.testing.assert_close(a, b)
    assert not torch.allclose(hooked[0][:, 1:], q[:, 1:])  # position 0 is the identity, the others turn
    q64, k64 = (torch.randn(B, T, H, D, dtype=torch.float64, requires_grad=True) for _ in range(2))
    rope64 = Rotary(D, H).double().rotary(T, torch.device("cpu"))
    assert torch.autograd.gradcheck(lambda a, b: rope64(a.clone(), b.clone()), (q64, k64))


@pytest.mark.parametrize("order", ["qkv", "kqv", "vqk"])
def test_rope_attention_rotates_the_query_and_key_roles(order):
    """Under a role swap the rotation follows the role: the projection playing the query is the one rotated."""
    torch.manual_seed(0)
    attn = attention(8, 2, qkv_order=order)
    x = torch.randn(1, 4, 8)
    rotate_qk = Rotary(4, 2).rotary(4, torch.device("cpu"))
    seen = []

    def recording(q, k):
        seen.append((q.clone(), k.clone()))
        return rotate_qk(q, k)

    attend(attn, x, None, rotary=recording)
    proj = {"q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj}
    torch.testing.assert_close(seen[0][0], proj[order[0]](x).view(1, 4, 2, 4))
    torch.testing.assert_close(seen[0][1], proj[order[1]](x).view(1, 4, 2, 4))


def test_rope_in_bfloat16_matches_float32():
    """Half precision has no complex view: the rotation runs in fp32 and is cast back."""
    rope = Rotary(4, 2).rotary(6, torch.device("cpu"))
    q, k = torch.randn(1, 6, 2, 4), torch.randn(1, 6, 2, 4)
    full = rope(q.clone(), k.clone())
    half = rope(q.bfloat16(), k.bfloat16())
    for a, b in zip(half, full):
        torch.testing.assert_close(a.float(), b, rtol=2e-2, atol=2e-2)


def test_alibi_slopes_follow_press_et_al():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))
    six = alibi_slopes(6)  # non-power of two: 4 geometric slopes + every other slope of the 8-head set
    torch.testing.assert_close(six, torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]))


def test_bidirectional_model_without_positions_is_permutation_equivariant():
    model = model_of(pos="none", causal=False)
    idx = torch.randint(0, 20, (1, 16))
    perm = torch.randperm(16)
    torch.testing.assert_close(model(idx)["logits"][:, perm], model(idx[:, perm])["logits"], rtol=1e-4, atol=1e-5)
    with_pos = model_of(pos="rope", causal=False)
    assert not torch.allclose(with_pos(idx)["logits"][:, perm], with_pos(idx[:, perm])["logits"], atol=1e-4)


@pytest.mark.parametrize("pos", DEFINED_PAST_BLOCK)
def test_generate_runs_past_block_size(pos):
    model = model_of(pos=pos)
    out = model.generate(torch.zeros(1, 4, dtype=torch.long), max_new_tokens=40, top_k=5)
    assert out.shape == (1, 44)


@pytest.mark.parametrize("pos", POSITIONS)
def test_kv_cache_gives_the_logits_of_a_full_recompute(pos):
    """Prompt, then one token at a time, then a chunk of three: each step's logits equal the full forward's."""
    model = model_of(pos=pos)
    idx = torch.randint(0, 20, (2, 14), generator=torch.Generator().manual_seed(3))
    full = model(idx)["logits"]
    cache = KVCache(len(model.blocks))
    pieces = [(0, 6)] + [(t, t + 1) for t in range(6, 11)] + [(11, 14)]
    for a, b in pieces:
        torch.testing.assert_close(model(idx[:, a:b], cache=cache)["logits"], full[:, a:b], atol=1e-5, rtol=1e-4)
    assert cache.length == 14
    greedy = {c: model.generate(idx[:, :3], 12, temperature=0, use_cache=c) for c in (True, False)}
    assert torch.equal(greedy[True], greedy[False])
    windowed = {c: model.generate(idx[:, :3], 20, temperature=0, window=8, use_cache=c) for c in (True, False)}
    assert torch.equal(windowed[True], windowed[False])  # the cache serves until the window slides


def test_kv_cache_refuses_a_model_without_the_causal_mask():
    with pytest.raises(ValueError, match="KV cache is only valid for a causal model"):
        model_of(causal=False)(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(2))


def test_generate_past_block_size_fails_clearly_for_learned():
    model = model_of(pos="learned")
    with pytest.raises(ValueError, match="learned absolute positions cannot represent position 16"):
        model.generate(torch.zeros(1, 4, dtype=torch.long), max_new_tokens=40)


# --- objectives ------------------------------------------------------------------------------------------------------


def test_mlm_masking_rates_on_a_fixed_seed():
    specials = Specials(50)
    tokens = torch.randint(0, 50, (64, 256), generator=torch.Generator().manual_seed(1))
    batch = mlm_batch(tokens, specials, torch.Generator().manual_seed(2))
    chosen = batch.y != IGNORE
    rate = chosen.float().mean().item()
    assert rate == pytest.approx(0.15, abs=0.01)
    masked = (batch.x == specials.mask_id)[chosen].float().mean().item()
    unchanged = (batch.x == tokens)[chosen].float().mean().item()
    assert masked == pytest.approx(0.8, abs=0.02)
    assert unchanged == pytest.approx(0.1 + 0.1 / 50, abs=0.02)  # 10 % kept + random draws that hit the same token
    assert torch.equal(batch.x[~chosen], tokens[~chosen])
    assert batch.mask.all()


def test_prefix_mask_shape_and_loss_region():
    m = prefix_mask(torch.tensor([3]), 6)[0]
    assert m.shape == (6, 6)
    assert m[0, :3].all() and not m[0, 3:].any()  # prefix queries see the whole prefix, nothing after
    assert m[4, :5].all() and not m[4, 5]  # suffix queries are causal
    batch = prefix_batch(torch.arange(17)[None], torch.Generator().manual_seed(0))
    first_loss = int((batch.y[0] != IGNORE).nonzero()[0])
    p = int(batch.mask[0, 0].sum())
    assert first_loss == p - 1
    assert (batch.y[0, first_loss:] != IGNORE).all()


def test_span_corruption_inputs_and_targets_reconstruct_the_original():
    specials = Specials(30)
    g = torch.Generator().manual_seed(0)
    for L in (20, 57, 120):
        seq = torch.randint(0, 30, (L,), generator=g).tolist()
        inputs, targets = corrupt_spans(seq, specials, g)
        assert reconstruct_spans(inputs, targets, specials) == seq
        assert sum(t >= specials.sentinel(0) for t in inputs) >= 1
        assert len(targets) - sum(t >= specials.sentinel(0) for t in targets) == round(0.15 * L)


def test_span_batch_fits_block_and_takes_loss_on_targets_only():
    specials = Specials(30)
    T = 64
    tokens = torch.randint(0, 30, (4, OBJECTIVES["span"].window_length(T)))
    batch = span_batch(tokens, specials, torch.Generator().manual_seed(0))
    assert batch.x.shape[1] <= T
    replay = torch.Generator().manual_seed(0)  # the same draws, row by row, as span_batch made
    for b, seq in enumerate(tokens.tolist()):
        inputs, targets = corrupt_spans(seq, specials, replay)
        p = len(inputs)
        assert batch.x[b, :p].tolist() == inputs  # the corrupted input is read first ...
        taken = (batch.y[b] != IGNORE).nonzero().flatten().tolist()
        # ... and the loss is on exactly the targets: position i predicts token i+1, so from p-1 to the end of the
        # targets, never on the input (that would train a copy task) and never on the padding
        assert taken == list(range(p - 1, p - 1 + len(targets)))
        assert batch.y[b, taken].tolist() == targets
        assert torch.equal(batch.mask[b], prefix_mask(torch.tensor([p]), batch.x.shape[1])[0])


# --- training and counting -------------------------------------------------------------------------------------------

# Every switch learning from context (not merely lowering its loss) is tested in test_fidelity.py.


def test_param_and_flop_counts():
    model = model_of()
    assert count_params(model) == sum(p.numel() for p in model.parameters())
    assert count_params(model, non_embedding=True) == count_params(model) - 20 * 32
    learned = model_of(pos="learned")
    assert count_params(learned, non_embedding=True) == count_params(learned) - 20 * 32 - 16 * 32
    # By hand, C = 32, T = 16, 2 layers, MLP 128, vocab 20. Per layer: qkv 3·32·32 + out 32·32 + MLP 2·32·128 =
    # 12288 weights, 2 FLOPs each = 24576; attention QKᵀ and AV 2·2·16·32 = 2048. Head 2·32·20 = 1280.
    # Forward: 2·(24576 + 2048) + 1280 = 54528; training 3× that.
    assert flops_per_token(model, training=False) == 54528
    assert flops_per_token(model) == 3 * 54528
    # head_merge=mean projects from one head's width (8): out 8·32 instead of 32·32
    assert flops_per_token(model_of(head_merge="mean"), training=False) == 54528 - 2 * 2 * (32 * 32 - 8 * 32)
    assert flops_per_token(model, seq_len=32, training=False) == 54528 + 2 * 2 * 2 * 16 * 32
    # a tiny MLP keeps one hidden unit (int(0.01 · 32) = 0): MLP 2·32·1 weights instead of 2·32·128, per layer
    assert flops_per_token(model_of(mlp_ratio=0.01), training=False) == 54528 - 2 * 2 * (2 * 32 * 128 - 2 * 32 * 1)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(n_embd=30, n_head=4), "n_embd=30 is not divisible by n_head=4"),
        (dict(pos="xpos"), "unknown pos='xpos'"),
        (dict(norm="batchnorm"), "unknown norm='batchnorm'"),
        (dict(qkv_order="qqv"), "must be a permutation"),
        (dict(n_head=0), "n_head=0 must be a positive integer"),
        (dict(n_layer=0), "n_layer=0 must be a positive integer"),
        (dict(block_size=-1), "block_size=-1 must be a positive integer"),
        (dict(dropout=1.0), r"dropout=1.0 must be in \[0, 1\)"),
        (dict(n_embd=12, n_head=4, pos="rope"), "pos=rope needs an even head dim; n_embd/n_head = 3"),
    ],
)
def test_bad_model_config_names_the_key(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny(**overrides)


def test_config_from_a_dict_names_an_unknown_key():
    with pytest.raises(ValueError, match=r"unknown model key\(s\) \['n_layrs'\]"):
        ModelConfig.from_dict({"n_layrs": 2})


def test_linear_biases_start_at_zero_under_both_inits():
    for init in ("vaswani", "gpt2"):
        model = model_of(bias=True, init=init)
        biases = [m.bias for m in model.modules() if isinstance(m, torch.nn.Linear) and m.bias is not None]
        assert biases and all(torch.equal(b, torch.zeros_like(b)) for b in biases)


@pytest.mark.parametrize("pos", TELLS_ORDER)
def test_every_position_method_breaks_permutation_equivariance_of_a_bidirectional_model(pos):
    """Without positions a bidirectional model cannot tell orders apart (tested above); each method must."""
    model = model_of(pos=pos, causal=False)
    idx = torch.randint(0, 20, (1, 16), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(model(idx)["logits"][:, perm], model(idx[:, perm])["logits"], atol=1e-4)


# --- the block's two placements, the init, masks and generation, value by value --------------------------------------


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_the_block_computes_its_published_formula(placement):
    """pre-norm: x + f(norm(x)) for attention then MLP (GPT-2); post-norm: norm(x + f(x)) (Vaswani et al.)."""
    from miniformer.network.model import Block

    torch.manual_seed(0)
    block = Block(tiny(norm_placement=placement)).eval()
    x = torch.randn(2, 5, 32)
    inputs = AttentionInputs(make_causal_mask(5), causal_hint=True)

    def attn(h):
        return block.attn(h, inputs)[0]

    if placement == "pre":
        h = x + attn(block.norm1(x))
        expected = h + block.mlp(block.norm2(h))
    else:
        h = block.norm1(x + attn(x))
        expected = block.norm2(h + block.mlp(h))
    torch.testing.assert_close(block(x, inputs)[0], expected)


def test_a_tiny_mlp_keeps_at_least_one_hidden_unit():
    from miniformer.network.model import MLP

    assert MLP(tiny(mlp_ratio=0.01)).up_proj.out_features == 1  # int(0.01 · 32) = 0, kept at 1
    assert MLP(tiny(mlp_ratio=0.25)).up_proj.out_features == 8


def test_learned_positions_start_at_the_token_embeddings_scale_of_each_init():
    """GPT-2 init: every input embedding coordinate N(0, 0.02); Vaswani: tokens enter at unit scale (N(0, 1/C) × √C)
    and the learned positions beside them at N(0, 1)."""
    for init, std in (("gpt2", 0.02), ("vaswani", 1.0)):
        torch.manual_seed(0)
        model = MiniFormer(tiny(pos="learned", init=init, block_size=64, n_embd=64))
        assert model.position.wpe.weight.std().item() == pytest.approx(std, rel=0.1)


def test_a_prefix_mask_hides_the_suffix_future_and_shows_the_prefix_both_ways():
    model = model_of(pos="rope")
    idx = torch.randint(0, 20, (1, 10), generator=torch.Generator().manual_seed(0))
    mask = prefix_mask(torch.tensor([4]), 10)  # (B, T, T) as the prefix-LM batches give it
    base = model(idx, attn_mask=mask)["logits"]
    late = idx.clone()
    late[0, 8] = (late[0, 8] + 1) % 20  # a suffix token: positions before it must not change
    torch.testing.assert_close(model(late, attn_mask=mask)["logits"][:, :8], base[:, :8])
    early = idx.clone()
    early[0, 3] = (early[0, 3] + 1) % 20  # a prefix token: position 0 reads it
    assert not torch.allclose(model(early, attn_mask=mask)["logits"][:, 0], base[:, 0])


def test_generation_samples_only_the_allowed_vocabulary_at_temperature_one_by_default():
    model = model_of()
    prompt = torch.zeros(1, 3, dtype=torch.long)
    out = model.generate(prompt, 40, allowed_vocab=5, generator=torch.Generator().manual_seed(0))
    assert out[0, 3:].max() < 5
    default = model.generate(prompt, 20, generator=torch.Generator().manual_seed(1))
    explicit = model.generate(prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(1))
    assert torch.equal(default, explicit)


def test_span_source_length_is_the_longest_window_that_fits():
    """T = 64: L = 59 gives 9 noise tokens in 3 spans, 59 + 2·3 = 65 = T + 1 tokens; L = 60 would need 66."""
    from miniformer.network.objectives import span_counts, span_source_length

    assert span_source_length(64) == 59
    assert 59 + 2 * span_counts(59, 0.15, 3.0)[1] == 65 and 60 + 2 * span_counts(60, 0.15, 3.0)[1] > 65
    assert OBJECTIVES["span"].window_length(64) == 59


def test_span_corruption_uses_no_more_spans_than_there_are_sentinels():
    specials = Specials(30, n_sentinels=2)
    seq = list(range(30)) * 4
    inputs, targets = corrupt_spans(seq, specials, torch.Generator().manual_seed(0))
    assert sum(t >= specials.sentinel(0) for t in inputs) == 2  # 120 tokens would make 6 spans
    assert reconstruct_spans(inputs, targets, specials) == seq


def test_the_probe_rescores_the_likeliest_candidates():
    """Left-to-right recovery rescores the PROBE_CANDIDATES likeliest tokens: one forward for the left context, one
    batch of that many candidate lines."""
    from miniformer.network.objectives import PROBE_CANDIDATES

    model, calls = model_of(vocab_size=40), []
    original = model.forward

    def spy(idx, *a, **k):
        calls.append(idx.clone())
        return original(idx, *a, **k)

    model.forward = spy
    ids = list(range(1, 12))
    OBJECTIVES["causal"].recover(model, ids, 5, Specials(30))
    assert PROBE_CANDIDATES == 16 and [c.shape[0] for c in calls] == [1, 16]
    rows = calls[1]
    assert len(set(rows[:, 5].tolist())) == 16  # each row puts another candidate at the hidden position
    keep = [j for j in range(10) if j != 5]
    assert (rows[:, keep] == torch.tensor(ids[:10])[keep]).all()  # and keeps the rest of the line


def test_an_unknown_objective_names_the_choices():
    from miniformer.network.objectives import objective_named

    with pytest.raises(ValueError, match="unknown objective='gan'; choose one of causal, mlm, prefix, span"):
        objective_named("gan")


def test_each_objective_draws_attention_as_it_reads():
    causal3 = make_causal_mask(3)
    assert OBJECTIVES["causal"].reading_mask(3) is None  # the model's own default (causal, or none for no-mask)
    assert torch.equal(OBJECTIVES["prefix"].reading_mask(3), causal3)  # as it generates
    assert torch.equal(OBJECTIVES["mlm"].reading_mask(3), torch.ones(3, 3, dtype=torch.bool))  # bidirectional
    assert torch.equal(OBJECTIVES["span"].reading_mask(3), causal3)  # as its targets are generated
    assert repr(OBJECTIVES["span"]) == "SpanCorruption()"


def test_the_stream_starts_as_token_embedding_plus_position():
    """Under Vaswani's init the tokens are scaled by √C (§3.4) and the position vectors added to them."""
    for pos in ("learned", "sinusoidal"):
        model = model_of(pos=pos)
        idx = torch.randint(0, 20, (2, 7), generator=torch.Generator().manual_seed(0))
        seen: list[torch.Tensor] = []
        model.blocks[0].register_forward_hook(lambda mod, args, out, seen=seen: seen.append(args[0]))
        model(idx)
        expected = model.wte(idx) * 32**0.5 + model.position.embed(7, torch.device("cpu"))
        torch.testing.assert_close(seen[0], expected)


def test_position_parameters_start_as_each_scheme_says():
    torch.manual_seed(0)
    assert MiniFormer(tiny(pos="sinusoidal", init="vaswani")).position.scale.item() == 1.0  # the table added raw
    gpt2 = MiniFormer(tiny(pos="sinusoidal", init="gpt2")).position.scale.item()
    assert gpt2 == pytest.approx(0.02 * 2**0.5)  # entries of RMS 1/√2 scaled to the tokens' 0.02
    t5 = MiniFormer(tiny(pos="t5")).position.bias.weight
    assert torch.equal(t5, torch.zeros_like(t5))  # every offset equal at the start


def test_sampling_follows_temperature_and_top_k():
    model = model_of()
    prompt = torch.zeros(1, 2, dtype=torch.long)

    def sample(**kw):
        return model.generate(prompt, 30, generator=torch.Generator().manual_seed(0), **kw)

    greedy = sample(temperature=0)
    assert torch.equal(sample(temperature=1e-4), greedy)  # a cold softmax is the argmax
    assert torch.equal(sample(temperature=1.0, top_k=1), greedy)  # one candidate left: the argmax
    assert not torch.equal(sample(temperature=1.0), greedy)  # at temperature 1 it samples
    assert not torch.equal(sample(temperature=1.0, top_k=5), greedy)


def test_a_prefix_stays_bidirectional_while_the_window_slides_over_it():
    """Prompt of 5 tokens read as the prefix, a window of 6: after the window has dropped s tokens, the first 5 - s
    of what it sees are still the prefix."""
    torch.manual_seed(0)
    model = MiniFormer(tiny(pos="rope")).eval()
    original, seen = model.forward, []

    def spy(idx, *a, attn_mask=None, **k):
        seen.append((idx.size(1), attn_mask))
        return original(idx, *a, attn_mask=attn_mask, **k)

    model.forward = spy
    model.generate(torch.arange(1, 6)[None], 4, temperature=0, prefix_len=5, window=6)
    # steps read 5, 6, 6, 6 tokens: the window has dropped 0, 0, 1, 2 tokens
    assert [n for n, _ in seen] == [5, 6, 6, 6]
    for (n, mask), visible in zip(seen, [5, 5, 4, 3]):
        assert torch.equal(mask, prefix_mask(torch.tensor([visible]), n)[0])


def test_special_token_ids_follow_the_base_vocabulary():
    specials = Specials(50, n_sentinels=3)
    assert (specials.mask_id, specials.sentinel(0), specials.sentinel(2), specials.model_vocab) == (50, 51, 53, 54)


def test_mlm_random_replacements_cover_the_whole_base_vocabulary():
    specials = Specials(5)
    tokens = torch.full((200, 200), 4)
    batch = mlm_batch(tokens, specials, torch.Generator().manual_seed(0))
    replaced = batch.x[(batch.y != IGNORE) & (batch.x != specials.mask_id)]
    assert set(replaced.tolist()) == {0, 1, 2, 3, 4}  # BERT's random token may be any token, the first one too


def test_prefix_lengths_cover_every_split_point():
    batch = prefix_batch(torch.arange(9).repeat(400, 1), torch.Generator().manual_seed(0))
    lengths = batch.mask[:, 0].sum(1)  # query 0 sees exactly the prefix
    assert set(lengths.tolist()) == set(range(1, 8))  # a one-token prefix up to all but the last input


def test_span_counts_and_corruption_of_very_short_sequences():
    from miniformer.network.objectives import span_counts

    assert span_counts(3, 0.15, 3.0) == (1, 1)  # at least one noise token in at least one span
    assert span_counts(100, 0.15, 3.0) == (15, 5)
    inputs, _ = corrupt_spans(list(range(120)), Specials(200), torch.Generator().manual_seed(0))  # T5's defaults
    assert sum(t >= Specials(200).sentinel(0) for t in inputs) == 6  # 15 % of 120 = 18 noise tokens, mean span 3
    specials = Specials(30)
    seq = [1, 2, 3, 4]
    inputs, targets = corrupt_spans(seq, specials, torch.Generator().manual_seed(0), noise=0.75, mean_span=1.0)
    assert sum(t >= specials.sentinel(0) for t in inputs) == 1  # one kept token: room for one span only
    assert reconstruct_spans(inputs, targets, specials) == seq


def test_the_demo_prompt_is_a_window_of_the_split():
    import numpy as np

    from miniformer.network.objectives import demo_prompt

    split = np.arange(10, dtype=np.uint16)
    assert demo_prompt(np.arange(5, dtype=np.uint16), 4, seed=3) == [0, 1, 2, 3]  # only one window fits
    for seed in range(20):
        window = demo_prompt(split, 4, seed)
        assert len(window) == 4 and window == list(range(window[0], window[0] + 4))
    assert len({demo_prompt(split, 4, s)[0] for s in range(20)}) > 1  # the seed picks where


def test_gpt2_init_shrinks_the_residual_projections():
    """Radford et al. 2019: every matrix N(0, 0.02), the projections into the residual stream by 1/√(2·layers)."""
    torch.manual_seed(0)
    model = MiniFormer(tiny(init="gpt2", n_layer=3, n_embd=64))
    for block in model.blocks:
        assert block.attn.o_proj.weight.std().item() == pytest.approx(0.02 / 6**0.5, rel=0.06)
        assert block.mlp.down_proj.weight.std().item() == pytest.approx(0.02 / 6**0.5, rel=0.06)
        for proj in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj, block.mlp.up_proj):
            assert proj.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_dropout_reaches_the_embeddings_in_training_only():
    model = model_of(dropout=0.5, pos="none").train()
    seen: list[torch.Tensor] = []
    model.blocks[0].register_forward_hook(lambda mod, args, out, seen=seen: seen.append(args[0]))
    idx = torch.randint(0, 20, (4, 16), generator=torch.Generator().manual_seed(0))
    model(idx)
    assert (seen[-1] == 0).float().mean().item() == pytest.approx(0.5, abs=0.05)  # half the coordinates dropped
    model.eval()
    model(idx)
    assert (seen[-1] == 0).float().mean().item() < 0.01


# --- the Q/K/V breakages ----------------------------------------------------------------------------------------------


def test_tied_query_and_key_give_symmetric_scores():
    """k = q: score(i, j) = score(j, i), so log w_ij − log w_ji = log Z_j − log Z_i (the row normalisers) alone."""
    torch.manual_seed(0)
    attn = attention(16, 1, qk_tied=True).eval()
    _, w = attend(attn, torch.randn(1, 6, 16), None, return_weights=True)
    m = (w[0, 0].log() - w[0, 0].log().T).double()
    assert torch.allclose(m, m[0][None, :] - m[0][:, None], atol=1e-5)
    untied = attention(16, 1).eval()
    _, w = attend(untied, torch.randn(1, 6, 16), None, return_weights=True)
    m = (w[0, 0].log() - w[0, 0].log().T).double()
    assert not torch.allclose(m, m[0][None, :] - m[0][:, None], atol=1e-3)


def test_without_a_value_projection_the_values_are_the_input():
    torch.manual_seed(0)
    attn = attention(16, 2, value_proj=False).eval()
    x = torch.randn(2, 5, 16)
    y, w = attend(attn, x, make_causal_mask(5), return_weights=True)
    values = x.view(2, 5, 2, 8).transpose(1, 2)  # (B, H, T, D): the input split into heads
    expected = attn.o_proj((w @ values).transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(y, expected, atol=1e-5)
    fast, _ = attend(attn, x, make_causal_mask(5))  # the SDPA path reads the same values
    assert torch.allclose(fast, y, atol=1e-5)


@pytest.mark.parametrize("swap", ["swap_qk", "swap_qv", "swap_kv"])
def test_roles_swapped_at_evaluation_equal_swapped_projection_rows(swap):
    """roles_permuted reads the trained projections with exactly the two roles its name says exchanged: the same as a
    model whose two projections were exchanged by hand; and the roles come back afterwards."""
    from miniformer.evaluation.role_swap import SWAPS, roles_permuted

    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=12, block_size=8, n_layer=2, n_head=2, n_embd=16, pos="rope", bias=True)
    model = MiniFormer(cfg).eval()
    x = torch.randint(0, 12, (2, 8))
    a, b = {"swap_qk": ("q_proj", "k_proj"), "swap_qv": ("q_proj", "v_proj"), "swap_kv": ("k_proj", "v_proj")}[swap]
    with torch.no_grad():
        intact = model(x)["logits"]
        with roles_permuted(model, SWAPS[swap]):
            swapped = model(x)["logits"]
        assert torch.equal(model(x)["logits"], intact)  # restored
        by_hand = MiniFormer(cfg).eval()
        by_hand.load_state_dict(model.state_dict())
        for block in by_hand.blocks:
            first, second = getattr(block.attn, a), getattr(block.attn, b)
            for name in ("weight", "bias"):
                kept = getattr(first, name).clone()
                getattr(first, name).copy_(getattr(second, name))
                getattr(second, name).copy_(kept)
        assert torch.allclose(by_hand(x)["logits"], swapped, atol=1e-5)
        assert not torch.allclose(swapped, intact, atol=1e-3)
