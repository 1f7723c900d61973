"""Generation quality inside and past the training length: several samples, each read by position bin.

Each sample is one long generation (the largest eval.gen_multiples × block_size tokens), drawn from the model's own
distribution (eval.temperature 1, no top-k). Its quality in a bin of positions — inside the block, then each multiple
past it — is the text's loss under the train split's trigram model (runtime/ngram.py): a character-soup detector,
low for text whose local character statistics are the training text's, high for soup, in any script. It reads local
spelling only (two characters of context), not sense. Per-sample values go to windows.json, so the report puts an
interval on each bin and on the growth past the block.
"""

from __future__ import annotations

import numpy as np
import torch

from miniformer.evaluation.subject import Measured, Probe, Subject

QUALITY_ORDER = 3  # the n-gram model generations are read by: two characters of context


def position_bins(block_size: int, multiples: list[int]) -> list[tuple[str, int, int]]:
    """(label, first position, end) per bin: [0, T) is "1", then [previous multiple × T, m × T) is "m"."""
    bins, start = [], 0
    for m in sorted(set(multiples)):
        bins.append((str(m), start, m * block_size))
        start = m * block_size
    return bins


def repetition(text: str) -> float:
    """The share of repeated 8-character n-grams (a degenerate loop scores near 1)."""
    grams = [text[i : i + 8] for i in range(max(0, len(text) - 7))]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def bin_losses(s: Subject, ids: list[int], prompt_len: int, bins: list[tuple[str, int, int]]) -> dict[str, float]:
    """The trigram loss of the generated tokens in each position bin (positions count the prompt too)."""
    token_loss = -s.ngram(QUALITY_ORDER).token_log_probs(ids)
    out = {}
    for label, lo, hi in bins:
        part = token_loss[max(lo, prompt_len) : hi]
        if len(part) and hi <= len(ids):
            out[label] = float(part.mean())
    return out


@torch.no_grad()
def sample_batch(s: Subject, prompt: list[int], prefix_len: int | None, length: int) -> list[list[int]]:
    """eval.gen_samples generations of up to ``length`` tokens in all (prompt included), one batch, seeded; cut to
    block_size when the position method is undefined past it."""
    start = torch.tensor([prompt] * s.run.eval.gen_samples, device=s.device)
    top_k = s.run.eval.top_k or None
    g = torch.Generator(device=s.device).manual_seed(s.run.seed)
    try:
        ids = s.model.generate(start, length - len(prompt), s.run.eval.temperature, top_k, generator=g,
                               allowed_vocab=s.tok.vocab_size, prefix_len=prefix_len)
    except ValueError:  # a position method undefined past block_size (learned): its in-block part only
        g = torch.Generator(device=s.device).manual_seed(s.run.seed)
        ids = s.model.generate(start, s.T - len(prompt), s.run.eval.temperature, top_k, generator=g,
                               allowed_vocab=s.tok.vocab_size, prefix_len=prefix_len)
    return ids.tolist()


def generations(s: Subject) -> Measured:
    if not s.objective.left_to_right:
        note = f"{s.objective.name} models do not generate left to right; see the recovery samples"
        return Measured({"generation_stats": {}}, files={"generations.json": {"note": note}})
    prompt, prefix_len = s.objective.generation_prompt(s.tok, s.data.splits["val"], s.T, s.run.seed)
    bins = position_bins(s.T, s.run.eval.gen_multiples)
    samples = sample_batch(s, prompt, prefix_len, bins[-1][2])
    per_sample = [bin_losses(s, ids, len(prompt), bins) for ids in samples]
    texts = [s.tok.decode(ids[len(prompt) :]) for ids in samples]
    reached = [label for label, _, _ in bins if all(label in p for p in per_sample)]
    by_bin = {label: [p[label] for p in per_sample] for label in reached}
    inside = bins[0][0]
    growth = {label: [p[label] - p[inside] for p in per_sample] for label in reached if label != inside}
    stats = {label: {"ngram_loss": float(np.mean(v)), "samples": len(v)} for label, v in by_bin.items()}
    stats["repetition"] = float(np.mean([repetition(t) for t in texts]))
    files = {"generations.json": {
        "bins": {label: [lo, hi] for label, lo, hi in bins},
        "unreached": [label for label, _, _ in bins if label not in reached],  # past a learned table's block
        "prompt": s.tok.decode(prompt),
        "texts": texts,
        "ngram_loss": by_bin,
    }}
    return Measured({"generation_stats": stats}, {"generation": by_bin, "generation_growth": growth}, files)


def generation_scalars(ev: dict) -> dict:
    stats = ev.get("generation_stats", {})
    out = {f"gen_{m}x_ngram_loss": r["ngram_loss"] for m, r in stats.items() if isinstance(r, dict)}
    out["gen_repetition"] = stats.get("repetition")
    return out


PROBES = (Probe(generations, generation_scalars, order=100, files=("generations.json",)),)
