"""The claims table's cast: which params.yaml experiment plays which part in the claims and in the report.

With claims.py, the only place in src/ that names an experiment (tests/test_structure.py keeps it so). Findings,
figures and the report ask for runs by these roles or by params.yaml's ``group:``; renaming an experiment is an edit
here and in claims.py, which `check_experiments` then verifies against params.yaml.
"""

from __future__ import annotations

REFERENCE = "baseline"  # the run every verdict compares against: params.yaml gives it `group: reference`
HEAD_RUNS = {1: "attn_single_head", 2: "heads_2", 4: "baseline", 8: "heads_8", 16: "heads_16", 32: "heads_32"}
PAPER_HEADS = (1, 4, 8, 16, 32)  # Vaswani's Table 3 (A) arms; 2 heads is ours, where it runs
HEAD_ENDS = (1, 4, 32)  # what the sweep-ends proxy reads: both ends against the reference (the interior: shown)
# Vaswani's Table 3 (A) narrowest head (h = 32 at d_model 512): heads narrower than this (and, under RoPE, with
# fewer frequency pairs) are outside anything Vaswani trained: the figure shades them and the sweep-ends row is a proxy
VASWANI_HEAD_WIDTH = 16
POSITION_RUNS = {"rope (baseline)": "baseline", "learned": "pos_learned", "sinusoidal": "pos_sinusoidal",
                 "alibi": "pos_alibi", "t5": "pos_t5", "none": "pos_none"}


def position_runs(experiments: dict[str, dict]) -> dict[str, str]:
    """The report's position methods, label -> experiment: the claims' roles above and, after them, every other
    experiment of the position group (a method added in params.yaml alone), labelled by its `model.pos`, or by its
    name when that label is taken. A new method so reaches the position section's figures and tables."""
    out = dict(POSITION_RUNS)
    for name, spec in experiments.items():
        if spec.get("group") == "position" and name not in out.values():
            label = (spec.get("model") or {}).get("pos", name)
            out[name if label in out else label] = name
    return out


# The stability map: (norm placement, warm-up) -> the experiment whose learning-rate sweep fills that row.
# The stability map's rows, (norm placement, warm-up) -> experiment, in the order drawn: the reference's warm-up, none,
# and a long one (half the run: Xiong's remedy for post-norm, and the pre-norm run it is held to).
STABILITY_ROWS = {("pre", "warm-up"): "baseline", ("pre", "no warm-up"): "block_pre_norm_no_warmup",
                  ("pre", "long warm-up"): "block_pre_norm_long_warmup",
                  ("post", "warm-up"): "block_post_norm", ("post", "no warm-up"): "block_post_norm_no_warmup",
                  ("post", "long warm-up"): "block_post_norm_long_warmup"}
SINGLE_HEAD = "attn_single_head"  # the heatmap reference: one head, causal
NO_MASK = "attn_no_mask"  # the causal mask removed
ENTROPY_RUNS = ("attn_single_head", "attn_no_scale")  # attention entropy during training, with and without 1/√d
LEARNED_POSITIONS = "pos_learned"  # undefined past block_size: the report quotes its reason
LEARNED_TOKEN_SCALE = "pos_learned_token_scale"  # the learned table stored and scaled like the tokens (pos_table)
# The init control: (norm placement, init) -> experiment.
INIT_RUNS = {("post", "gpt2"): "block_post_norm_gpt2_init", ("post", "vaswani"): "block_post_norm",
             ("pre", "gpt2"): "block_gpt2_init", ("pre", "vaswani"): "baseline"}

# What the README's course table uses: `miniformer course` trains these on the course corpus.
NO_POSITIONS, NO_RESIDUAL = "pos_none", "block_no_residual"
COURSE_RUNS = (REFERENCE, SINGLE_HEAD, NO_POSITIONS, NO_RESIDUAL, "obj_mlm")
# The course notebook's breakage records: the model change -> (the reference study's run of it, the run it is read
# against there: the no-mask breakage is a one-head model, read against the one-head reference).
BREAKAGE_RUNS = {"pos": (NO_POSITIONS, REFERENCE), "residual": (NO_RESIDUAL, REFERENCE),
                 "causal": (NO_MASK, SINGLE_HEAD)}


def cast() -> set[str]:
    """Every experiment a role names."""
    return {REFERENCE, *HEAD_RUNS.values(), *POSITION_RUNS.values(), *STABILITY_ROWS.values(), SINGLE_HEAD, NO_MASK,
            *ENTROPY_RUNS, LEARNED_POSITIONS, LEARNED_TOKEN_SCALE, *INIT_RUNS.values(), *COURSE_RUNS}
