"""The verdict engine on synthetic metrics: every branch, so no verdict can be a constant."""

from __future__ import annotations

import pytest

from miniformer.findings import Metrics, breakages, claims, directional, equality


def test_directional_branches():
    assert directional(None, 0.01) == "not run"
    assert directional(0.001, 0.01) == "within noise"
    assert directional(0.5, 0.01) == "reproduced"
    assert directional(-0.5, 0.01) == "not reproduced"
    assert directional(-0.5, 0.01, expect_positive=False) == "reproduced"


def test_equality_branches():
    assert equality(None, 0.1) == "not run"
    assert equality(0.05, 0.1) == "reproduced"
    assert equality(0.5, 0.1) == "not reproduced"


def seeds(val: float, **extra) -> dict:
    return {"seed0": {"val_loss": val, **extra}}


def base(**extra) -> dict:
    return {f"seed{i}": {"val_loss": 2.0 + d, "hidden_uniformity": 0.5 + d, "recovery_accuracy": 0.3 + d,
                         "attention_entropy": 2.0 + d, "loss_at_1x": 2.0, "loss_at_4x": 2.3, "final_train_loss": 2.0,
                         **extra}
            for i, d in enumerate((0.0, 0.01, -0.01))}


def by_claim(metrics: dict) -> dict[str, str]:
    return {f.claim: f.verdict for f in claims(Metrics(metrics))}


def test_claims_follow_the_numbers():
    good = {
        "baseline": base(),
        "pos_learned": seeds(2.0, loss_at_1x=2.0, loss_at_4x=None),
        "pos_sinusoidal": seeds(2.005, loss_at_1x=2.0, loss_at_4x=4.0),
        "pos_alibi": seeds(2.01, loss_at_1x=2.0, loss_at_4x=2.0),
        "block_rmsnorm": seeds(2.0),
        "block_no_residual": seeds(3.0, hidden_uniformity=0.99),
        "obj_mlm": seeds(1.5, recovery_accuracy=0.9),
        "obj_mlm_nope": seeds(3.5),
    }
    v = by_claim(good)
    assert v["Learned ≈ sinusoidal positions in distribution"] == "reproduced"
    assert v["Past the training length: sinusoidal worst, RoPE degrades, ALiBi best"] == "reproduced"
    assert v["ALiBi stays flat past the training length"] == "reproduced"
    assert v["Learned absolute positions cannot extrapolate"] == "reproduced"
    assert v["RMSNorm ≈ LayerNorm"] == "reproduced"
    assert v["No residual → token representations collapse toward uniform"] == "reproduced"
    assert v["Masked LM without positions fails"] == "reproduced"
    assert v["Denoising objectives beat plain LM on a recovery probe"] == "reproduced"
    assert v["Head count has a U-shape at fixed width"] == "not run"

    bad = dict(good, pos_sinusoidal=seeds(2.5, loss_at_1x=2.0, loss_at_4x=2.0),
               block_rmsnorm=seeds(2.6), obj_mlm_nope=seeds(1.5), pos_alibi=seeds(2.0, loss_at_1x=2.0, loss_at_4x=3.0))
    v = by_claim(bad)
    assert v["Learned ≈ sinusoidal positions in distribution"] == "not reproduced"
    assert v["Past the training length: sinusoidal worst, RoPE degrades, ALiBi best"] == "not reproduced"
    assert v["ALiBi stays flat past the training length"] == "not reproduced"
    assert v["RMSNorm ≈ LayerNorm"] == "not reproduced"
    assert v["Masked LM without positions fails"] == "within noise"


def test_head_count_u_shape():
    m = {"baseline": base(), "attn_single_head": seeds(2.3), "heads_2": seeds(2.1), "heads_8": seeds(1.95),
         "heads_16": seeds(2.0), "heads_32": seeds(2.4)}
    assert by_claim(m)["Head count has a U-shape at fixed width"] == "reproduced"
    m["heads_32"] = seeds(1.96)
    assert by_claim(m)["Head count has a U-shape at fixed width"] == "within noise"


def test_breakage_log_records_divergence_and_objective_caveat():
    m = Metrics({"baseline": base(), "block_x": seeds(9.0, diverged=True, divergence_step=12),
                 "obj_mlm": seeds(1.0), "heads_8": seeds(2.001)})
    rows = {r["experiment"]: r for r in breakages(m, {"block_x": "blows up"}, {"obj_mlm": "objective"})}
    assert rows["block_x"]["outcome"] == "diverged at step 12"
    assert "not comparable" in rows["obj_mlm"]["outcome"]
    assert rows["heads_8"]["outcome"] == "within noise of the baseline"


def test_breakage_log_flags_runs_stuck_at_the_unigram_loss():
    m = Metrics({"baseline": base(), "pos_x": seeds(3.24), "heads_8": seeds(2.3)})
    rows = {r["experiment"]: r for r in breakages(m, {}, {}, unigram_loss=3.25)}
    assert rows["pos_x"]["outcome"].startswith("stuck at the unigram loss (3.250)")
    assert rows["heads_8"]["outcome"] == "worse than the baseline"


def test_post_norm_warmup_claim_needs_both_comparisons():
    claim = "Post-norm needs warm-up; pre-norm trains without"
    m = {"baseline": base(), "block_post_norm_no_warmup": seeds(3.2), "block_pre_norm_no_warmup": seeds(2.3),
         "block_post_norm": seeds(2.2)}
    assert by_claim(m)[claim] == "reproduced"
    m["block_post_norm"] = seeds(3.2)  # post-norm fails with warm-up too: warm-up is not what it lacks
    assert by_claim(m)[claim] == "within noise"
    m["block_post_norm"] = seeds(3.5)
    assert by_claim(m)[claim] == "not reproduced"


def test_breakage_log_explains_a_leak():
    m = Metrics({"baseline": base(), "attn_no_mask": seeds(0.03, val_loss_with_causal_mask=4.7)})
    (row,) = breakages(m, {}, {})
    assert row["outcome"].startswith("leaked: 0.030 reading the future, 4.700 once the causal mask is restored")


# --- every claim, every verdict it can return, on metrics where the answer is known ----------------------------------
# The baseline's seeds give σ = 0.01 for every key (2σ = 0.02).

HEADS_MONOTONE = {"attn_single_head": seeds(2.3), "heads_2": seeds(2.2), "heads_8": seeds(1.9),
                  "heads_16": seeds(1.85), "heads_32": seeds(1.8)}
ENTROPY = {"attn_single_head": seeds(2.0, attention_entropy=2.0, loss_spikes=0)}
LEAK = {"attn_single_head": seeds(2.0, final_train_loss=2.0)}
POSITIONS = {"pos_sinusoidal": seeds(2.0, loss_at_1x=2.0, loss_at_4x=4.0)}

CLAIM_CASES = [
    ("Head count has a U-shape at fixed width", HEADS_MONOTONE, "not reproduced"),
    ("Head count has a U-shape at fixed width", {}, "not run"),
    ("Learned ≈ sinusoidal positions in distribution", {"pos_learned": seeds(2.01), "pos_sinusoidal": seeds(2.0)},
     "reproduced"),
    ("Learned ≈ sinusoidal positions in distribution", {"pos_learned": seeds(2.1), "pos_sinusoidal": seeds(2.0)},
     "not reproduced"),
    ("Learned ≈ sinusoidal positions in distribution", {"pos_learned": seeds(2.1)}, "not run"),
    ("1/√d keeps softmax out of saturation (no-scale: lower entropy)",
     {**ENTROPY, "attn_no_scale": seeds(2.0, attention_entropy=1.0)}, "reproduced"),
    ("1/√d keeps softmax out of saturation (no-scale: lower entropy)",
     {**ENTROPY, "attn_no_scale": seeds(2.0, attention_entropy=3.0)}, "not reproduced"),
    ("1/√d keeps softmax out of saturation (no-scale: lower entropy)",
     {**ENTROPY, "attn_no_scale": seeds(2.0, attention_entropy=1.995)}, "within noise"),
    ("1/√d keeps softmax out of saturation (no-scale: lower entropy)", ENTROPY, "not run"),
    ("Past the training length: sinusoidal worst, RoPE degrades, ALiBi best", POSITIONS, "not run"),
    ("ALiBi stays flat past the training length", POSITIONS, "not run"),
    ("At short training length ALiBi does not win in distribution",
     {"pos_alibi": seeds(2.01), "pos_sinusoidal": seeds(2.0)}, "reproduced"),
    ("At short training length ALiBi does not win in distribution",
     {"pos_alibi": seeds(1.9), "pos_sinusoidal": seeds(2.0)}, "not reproduced"),
    ("At short training length ALiBi does not win in distribution", {"pos_alibi": seeds(1.9)}, "not run"),
    ("Learned absolute positions cannot extrapolate",
     {"pos_learned": seeds(2.0, loss_at_1x=2.0, loss_at_2x=None, loss_at_4x=None)}, "reproduced"),
    ("Learned absolute positions cannot extrapolate",
     {"pos_learned": seeds(2.0, loss_at_1x=2.0, loss_at_2x=2.1, loss_at_4x=None)}, "not reproduced"),
    ("Learned absolute positions cannot extrapolate", {"pos_learned": seeds(2.0, loss_at_1x=2.0)}, "not run"),
    ("Learned absolute positions cannot extrapolate", {}, "not run"),
    ("Causal LM without positions is close to with", {"pos_none": seeds(2.005)}, "within noise"),
    ("Causal LM without positions is close to with", {"pos_none": seeds(2.1)}, "reproduced"),
    ("Causal LM without positions is close to with", {"pos_none": seeds(2.5)}, "not reproduced"),
    ("Causal LM without positions is close to with", {}, "not run"),
    ("Masked LM without positions fails", {"obj_mlm": seeds(1.5), "obj_mlm_nope": seeds(1.0)}, "not reproduced"),
    ("Masked LM without positions fails", {"obj_mlm": seeds(1.5)}, "not run"),
    ("Post-norm needs warm-up; pre-norm trains without", {"block_post_norm": seeds(2.0)}, "not run"),
    ("With warm-up, pre-norm is not always better at the end", {"block_post_norm": seeds(2.01)}, "reproduced"),
    ("With warm-up, pre-norm is not always better at the end", {"block_post_norm": seeds(2.5)}, "not reproduced"),
    ("With warm-up, pre-norm is not always better at the end", {}, "not run"),
    ("RMSNorm ≈ LayerNorm", {}, "not run"),
    ("No residual → token representations collapse toward uniform",
     {"block_no_residual": seeds(3.0, hidden_uniformity=0.51)}, "not reproduced"),
    ("No residual → token representations collapse toward uniform",
     {"block_no_residual": seeds(2.0, hidden_uniformity=0.99)}, "not reproduced"),
    ("No residual → token representations collapse toward uniform", {}, "not run"),
    ("Low attention entropy goes with instability",
     {**ENTROPY, "attn_no_scale": seeds(2.0, attention_entropy=1.0, loss_spikes=3)}, "reproduced"),
    ("Low attention entropy goes with instability",
     {**ENTROPY, "attn_no_scale": seeds(2.0, attention_entropy=1.0, loss_spikes=0)}, "not reproduced"),
    ("Low attention entropy goes with instability",
     {**ENTROPY, "attn_no_scale": seeds(2.0, attention_entropy=3.0, loss_spikes=3)}, "not reproduced"),
    ("Low attention entropy goes with instability", ENTROPY, "not run"),
    ("Denoising objectives beat plain LM on a recovery probe", {"obj_mlm": seeds(1.5, recovery_accuracy=0.1)},
     "not reproduced"),
    ("Denoising objectives beat plain LM on a recovery probe", {"obj_mlm": seeds(1.5, recovery_accuracy=0.305)},
     "within noise"),
    ("Denoising objectives beat plain LM on a recovery probe", {}, "not run"),
    ("No causal mask → leaked, too-low train loss",
     {**LEAK, "attn_no_mask": seeds(0.5, final_train_loss=0.5, val_loss_with_causal_mask=4.0)}, "reproduced"),
    ("No causal mask → leaked, too-low train loss",
     {**LEAK, "attn_no_mask": seeds(2.0, final_train_loss=2.0, val_loss_with_causal_mask=4.0)}, "not reproduced"),
    ("No causal mask → leaked, too-low train loss",
     {**LEAK, "attn_no_mask": seeds(0.5, final_train_loss=0.5, val_loss_with_causal_mask=2.0)}, "not reproduced"),
    ("No causal mask → leaked, too-low train loss", LEAK, "not run"),
    ("Swapping Q/K roles is a relabelling (no change)",
     {"attn_single_head": seeds(2.0), "attn_qkv_swap": seeds(2.01)}, "reproduced"),
    ("Swapping Q/K roles is a relabelling (no change)",
     {"attn_single_head": seeds(2.0), "attn_qkv_swap": seeds(2.3)}, "not reproduced"),
    ("Swapping Q/K roles is a relabelling (no change)", {"attn_single_head": seeds(2.0)}, "not run"),
]


def test_every_claim_is_covered_by_the_cases():
    named = {c.claim for c in claims(Metrics({"baseline": base()}))}
    assert named == {claim for claim, _, _ in CLAIM_CASES}


@pytest.mark.parametrize("claim,runs,expected", CLAIM_CASES, ids=[f"{c[0][:40]}->{c[2]}" for c in CLAIM_CASES])
def test_each_claim_returns_each_of_its_verdicts(claim, runs, expected):
    assert by_claim({"baseline": base(), **runs})[claim] == expected



def test_the_floor_is_two_sigma():
    assert directional(0.025, 0.01) == "reproduced"  # beyond 2σ = 0.02 ...
    assert directional(0.015, 0.01) == "within noise"  # ... and inside it
    assert equality(0.025, 0.01) == "not reproduced"


def test_extrapolation_order_needs_rope_between_sinusoidal_and_alibi():
    claim = "Past the training length: sinusoidal worst, RoPE degrades, ALiBi best"
    runs = {"baseline": base(loss_at_1x=2.0, loss_at_4x=2.3),
            "pos_sinusoidal": seeds(2.0, loss_at_1x=2.0, loss_at_4x=4.0),
            "pos_alibi": seeds(2.0, loss_at_1x=2.0, loss_at_4x=2.0)}
    assert by_claim(runs)[claim] == "reproduced"
    runs["pos_alibi"] = seeds(2.0, loss_at_1x=2.0, loss_at_4x=2.5)  # ALiBi grows more than RoPE
    assert by_claim(runs)[claim] == "not reproduced"


def test_peer_comparison_outcomes():
    from miniformer.findings import PeerComparison

    def row(ours, peer, peer_our_init):
        return PeerComparison("x", ours, peer, peer_our_init, 0.07, {}, {})

    assert row(2.0, 2.05, None).outcome == "agree"
    assert row(2.0, 2.2, 2.03).outcome == "init"
    assert row(2.0, 2.2, 2.2).outcome == "DISAGREE"
    assert row(2.0, 1.8, None).outcome == "DISAGREE"
    assert row(None, 2.0, 2.0).outcome == "n/a"
    assert row(2.0, 2.2, 2.03).diff == pytest.approx(-0.2) and row(2.0, 2.2, 2.03).diff_our_init == pytest.approx(-0.03)
