"""Parameter and FLOP counts (used by benchmarks and the report's MFU numbers)."""

from __future__ import annotations

from miniformer.network.model import MiniFormer


def count_params(model: MiniFormer, non_embedding: bool = False) -> int:
    """All trainable parameters; with non_embedding, without the token/position embedding tables (as Kaplan et al.)."""
    n = sum(p.numel() for p in model.parameters())
    if non_embedding:
        n -= model.wte.weight.numel()
        tables = dict(model.position.named_parameters())
        n -= sum(tables[name].numel() for name in model.position.embedding_tables)
    return n


def flops_per_token(model: MiniFormer, seq_len: int | None = None, training: bool = True) -> float:
    """Matmul FLOPs per token: 2·(weights touched) for the forward, plus attention's 2·2·T·C per layer.

    Training (forward + backward) is 3× the forward (PaLM appendix B). Embedding lookups are not matmuls, but the
    output head is, so it counts even when tied.
    """
    cfg = model.cfg
    T = seq_len or cfg.block_size
    C, L = cfg.n_embd, cfg.n_layer
    head_width = C if cfg.head_merge == "concat" else C // cfg.n_head
    hidden = max(1, int(cfg.mlp_ratio * C))
    per_layer = 2 * (3 * C * C + head_width * C + 2 * C * hidden)
    attention = 2 * 2 * T * C  # QKᵀ and AV, averaged over a causal window would halve it; count the dense cost
    forward = L * (per_layer + attention) + 2 * C * cfg.vocab_size
    return float(3 * forward if training else forward)
