"""The demo a training logs every sample_every steps, in the objective's own format, on a fixed seed: causal LM
generates from a line break; prefix LM continues a held-out prompt read as its bidirectional prefix; MLM fills
[MASK]s; span fills sentinels."""

from __future__ import annotations

import torch

from miniformer.network.model import MiniFormer
from miniformer.network.objectives import Objective, Specials
from miniformer.params import RunConfig
from miniformer.runtime.batches import sample_windows
from miniformer.runtime.tokendata import TokenData


@torch.no_grad()
def demo(model: MiniFormer, objective: Objective, data: TokenData, run: RunConfig, step: int,
         device: torch.device) -> dict:
    model.eval()
    g = torch.Generator(device=device).manual_seed(run.seed)
    tok, T = data.tokenizer, run.model.block_size
    if objective.left_to_right:
        prompt, prefix_len = objective.generation_prompt(tok, data.splits["val"], T, run.seed)
        ids = model.generate(torch.tensor([prompt], device=device), run.train.sample_tokens, temperature=0.8,
                             top_k=20, generator=g, window=T, allowed_vocab=tok.vocab_size, prefix_len=prefix_len)
        out = {"step": step, "kind": "generation", "text": tok.decode(ids[0, len(prompt) :].tolist())}
        if prefix_len is not None:
            out["prompt"] = tok.decode(prompt)
    else:
        out = {"step": step, "kind": "recovery", **recovery_demo(model, objective, data, run)}
    model.train()
    return out


def recovery_demo(model: MiniFormer, objective: Objective, data: TokenData, run: RunConfig) -> dict:
    """Hide characters of one held-out window the way training does and show the model's fill-in ('_' = hidden)."""
    tok, specials = data.tokenizer, Specials(data.vocab_size)
    cpu_g = torch.Generator().manual_seed(run.seed)
    tokens = sample_windows(data.splits["val"], objective.window_length(run.model.block_size), 1, cpu_g)
    seq = tokens[0].tolist()
    masked, filled = objective.fill_in(model, seq, specials, cpu_g)

    def show(ids: list[int]) -> str:  # a hidden position has no character: draw it as '_'
        return "".join("_" if i == specials.mask_id else tok.decode([i]) for i in ids)

    return {"text": show(filled), "masked": show(masked), "original": tok.decode(seq), "hidden_as": objective.hidden_as}
