"""Long generations at each multiple of the training length, with simple text statistics."""

from __future__ import annotations

import torch

from miniformer.evaluation.subject import Measured, Subject


def text_stats(text: str) -> dict:
    """distinct-2 over words (diversity) and the share of repeated 8-character n-grams (degeneration)."""
    words = text.split()
    bigrams = list(zip(words, words[1:]))
    grams = [text[i : i + 8] for i in range(max(0, len(text) - 7))]
    return {
        "distinct_2": len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
        "repetition": 1 - len(set(grams)) / len(grams) if grams else 0.0,
    }


@torch.no_grad()
def long_generations(s: Subject) -> dict:
    if not s.objective.left_to_right:
        return {"note": f"{s.objective.name} models do not generate left to right; see the recovery samples"}
    out = {}
    prompt, prefix_len = s.objective.generation_prompt(s.tok, s.data.splits["val"], s.T, s.run.seed)
    for m in s.run.eval.gen_multiples:
        g = torch.Generator(device=s.device).manual_seed(s.run.seed)
        try:
            ids = s.model.generate(torch.tensor([prompt], device=s.device), m * s.T, s.run.eval.temperature,
                                   s.run.eval.top_k, generator=g, allowed_vocab=s.tok.vocab_size, prefix_len=prefix_len)
        except ValueError as e:  # a position method undefined past block_size
            out[str(m)] = {"applicable": False, "reason": str(e).split(":")[0]}
            continue
        text = s.tok.decode(ids[0, len(prompt) :].tolist())
        out[str(m)] = {"applicable": True, "text": text, **text_stats(text)}
        if prefix_len is not None:
            out[str(m)]["prompt"] = s.tok.decode(prompt)
    return out


def generations(s: Subject) -> Measured:
    gens = long_generations(s)
    stats = {k: {t: v[t] for t in ("distinct_2", "repetition")} for k, v in gens.items()
             if isinstance(v, dict) and v.get("applicable")}
    return Measured({"generation_stats": stats}, files={"generations.json": gens})
