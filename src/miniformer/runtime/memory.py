"""A rough memory estimate of a config, checked before a stage touches anything: a config that cannot fit is one
line saying how much it needs and how much the machine has, not an out-of-memory traceback after the old checkpoint
was set aside.

The estimate counts the float32 tensors that dominate: per layer the activations kept for the backward pass and the
attention maps (B·H·T² each, a few copies: scores, softmax, its gradient), the logits, and the weights with their
gradients and AdamW's two moments. It is meant to catch configs that are off by orders of magnitude (a block of
100 000 tokens, a batch of ten million), so it errs towards the low side: only a config that cannot fit is refused.
"""

from __future__ import annotations

from pathlib import Path

import torch

from miniformer.errors import UserError
from miniformer.network.model import ModelConfig
from miniformer.network.positions import POSITIONS

FLOAT = 4  # bytes
EVAL_BATCH = 16  # windows per forward at 1× block_size in evaluation (scoring.BATCH), fewer at longer lengths


def _forward_floats(cfg: ModelConfig, batch: int, length: int, kept: int) -> int:
    """Floats one forward over (batch, length) holds: ``kept`` copies of each layer's stream-sized tensors and of
    its attention maps."""
    hidden = max(1, int(cfg.mlp_ratio * cfg.n_embd))
    stream = batch * length * (4 * cfg.n_embd + hidden)
    maps = batch * cfg.n_head * length * length
    return cfg.n_layer * kept * (stream + maps) + 2 * batch * length * cfg.vocab_size


def param_count(cfg: ModelConfig) -> int:
    """The parameters of a MiniFormer of ``cfg``, from the config alone, so that a model too big for the machine is
    refused before any of it is allocated (network/flops.py counts a built model; a test keeps the two equal)."""
    C, V = cfg.n_embd, cfg.vocab_size
    hidden = max(1, int(cfg.mlp_ratio * C))
    proj_in = C if cfg.head_merge == "concat" else C // cfg.n_head
    norm = 2 * C if cfg.norm == "layernorm" and cfg.bias else C
    attention = 3 * C * C + proj_in * C + (4 * C if cfg.bias else 0)
    mlp = 2 * C * hidden + (hidden + C if cfg.bias else 0)
    position = POSITIONS[cfg.pos].parameter_count(cfg.block_size, C, cfg.n_head)  # each method counts its own
    final_norm = norm if cfg.norm_placement == "pre" else 0
    head = 0 if cfg.tie_weights else V * C
    return V * C + position + cfg.n_layer * (attention + mlp + 2 * norm) + final_norm + head


def training_bytes(cfg: ModelConfig, batch: int, n_params: int = 0) -> int:
    """The weights are counted from the config unless the caller has the count of a built model."""
    return FLOAT * (_forward_floats(cfg, batch, cfg.block_size, kept=3) + 4 * (n_params or param_count(cfg)))


def evaluation_bytes(cfg: ModelConfig, length_multiples: list[int], n_params: int = 0) -> int:
    """The longest evaluation length dominates: EVAL_BATCH // m windows of m × block_size tokens; the weights are
    counted from the config unless the caller has the count of a built model."""
    worst = max(_forward_floats(cfg, max(1, EVAL_BATCH // m), m * cfg.block_size, kept=1) for m in length_multiples)
    return FLOAT * (worst + (n_params or param_count(cfg)))


def inference_bytes(cfg: ModelConfig) -> int:
    """The weights and one forward over a block: the least that generate, score or attention needs."""
    return FLOAT * (_forward_floats(cfg, 1, cfg.block_size, kept=1) + param_count(cfg))


def available_bytes(device: torch.device) -> int | None:
    """Memory free for a new job on the device (None when the platform does not say)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_fits(needed: int, device: torch.device, what: str, fix: str) -> None:
    have = available_bytes(device)
    if have is not None and needed > have:
        raise UserError(f"{what} needs about {needed / 2**30:.1f} GiB of memory but {device.type} has "
                        f"{have / 2**30:.1f} GiB available; {fix}")
