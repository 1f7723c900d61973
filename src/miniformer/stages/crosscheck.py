"""Stage `crosscheck`: train a peer library's equivalent of each variant on our tokens, schedule and evaluation code.

A variant that trains badly here may be a finding or a bug in our implementation. The peer is x-transformers
(MIT, pinned in the `crosscheck` extra): same width, depth, heads and head size, the same batches from the same
generator, the same warm-up + cosine schedule, AdamW groups and clipping, and our evaluation code for the numbers. What
differs is everything the peer decides for itself (its init, its feed-forward biases, its own module code) — which
is the point: if ours disagrees with it beyond the seed noise, ours has a bug until a measurement explains why.

The peer trains twice per variant: with its own init, and with ours (Vaswani's: Xavier-uniform matrices, unit-scale
token embeddings). Where ours differs from the first but not from the second, the init explains the difference.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import Tensor, nn

from miniformer.errors import UserError
from miniformer.evaluation.losses import length_sweep, split_loss
from miniformer.evaluation.subject import Subject
from miniformer.network.model import ModelConfig
from miniformer.params import RunConfig, Study
from miniformer.runtime.batches import sample_windows
from miniformer.runtime.files import write_json
from miniformer.runtime.optim import make_optimizer, set_lr, update
from miniformer.runtime.schedule import lr_at
from miniformer.runtime.tokendata import TokenData


@dataclass
class PeerSpec:
    """The peer's constructor arguments for one of our run configs."""

    wrapper: dict
    decoder: dict


# Each position method the peer has, as (where its switch goes, the arguments): a method missing here is refused.
PEER_POSITIONS: dict[str, tuple[str, Callable[[ModelConfig, int], dict]]] = {
    "none": ("wrapper", lambda m, head_dim: {}),
    "learned": ("wrapper", lambda m, head_dim: {"use_abs_pos_emb": True}),
    "sinusoidal": ("wrapper", lambda m, head_dim: {"use_abs_pos_emb": True, "scaled_sinu_pos_emb": True}),
    "rope": ("decoder", lambda m, head_dim: {"rotary_pos_emb": True, "rotary_emb_dim": head_dim}),  # full width
    "alibi": ("decoder", lambda m, head_dim: {"alibi_pos_bias": True}),
    "t5": ("decoder", lambda m, head_dim: {"rel_pos_bias": True, "rel_pos_max_distance": m.block_size}),
}
# The ModelConfig fields peer_spec translates (sizes, norm, placement, residual, positions; the init is chosen apart,
# PEER_INITS). Every other field is a switch the peer lacks: a run that changes one from its default is refused, so a
# new ModelConfig field is refused by the cross-check until it is translated here.
TRANSLATED = {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "mlp_ratio", "norm", "norm_placement",
              "residual", "pos", "init"}


def peer_spec(run: RunConfig) -> PeerSpec:
    """Translate our ModelConfig into x-transformers' TransformerWrapper + Decoder arguments."""
    m = run.model
    if run.train.objective != "causal":
        raise UserError(
            f"crosscheck: {run.experiment} uses the {run.train.objective} objective; only causal LM has a peer"
        )
    head_dim = m.n_embd // m.n_head
    longest = m.block_size * max(run.eval.length_multiples)
    wrapper = {"max_seq_len": m.block_size if m.pos == "learned" else longest, "use_abs_pos_emb": False}
    decoder = {
        "dim": m.n_embd,
        "depth": m.n_layer,
        "heads": m.n_head,
        "attn_dim_head": head_dim,
        "ff_mult": m.mlp_ratio,
        "pre_norm": m.norm_placement == "pre",
        "use_rmsnorm": m.norm == "rmsnorm",
    }
    if not m.residual:
        decoder["scale_residual_constant"] = 0.0  # the peer's switch that drops the identity path
    if m.pos not in PEER_POSITIONS:  # a new method marked `peer: true`: refused, never a peer without positions
        raise UserError(f"crosscheck: {run.experiment} uses pos={m.pos!r}, which the peer has no equivalent of; set "
                        "`peer: false` on it (or add its translation to stages/crosscheck.py's PEER_POSITIONS)")
    place, arguments = PEER_POSITIONS[m.pos]
    (wrapper if place == "wrapper" else decoder).update(arguments(m, head_dim))
    defaults = ModelConfig()
    unsupported = [f.name for f in fields(ModelConfig)
                   if f.name not in TRANSLATED and getattr(m, f.name) != getattr(defaults, f.name)]
    if unsupported:
        raise UserError(
            f"crosscheck: {run.experiment} changes {', '.join(unsupported)}, which the peer has no switch for"
        )
    return PeerSpec(wrapper, decoder)


class PeerLM(nn.Module):
    """The peer model behind our model's call signature, so that our evaluation probes score it unchanged."""

    def __init__(self, spec: PeerSpec, vocab_size: int) -> None:
        super().__init__()
        try:
            from x_transformers import Decoder, TransformerWrapper
        except ImportError:
            raise UserError(
                "crosscheck needs the peer library: pip install -e '.[crosscheck]' (x-transformers, pinned)"
            ) from None
        self.net = TransformerWrapper(
            num_tokens=vocab_size, attn_layers=Decoder(**spec.decoder, verbose=False), **spec.wrapper
        )

    def forward(self, idx: Tensor, targets: Tensor | None = None, attn_mask: Tensor | None = None, **_) -> dict:
        if attn_mask is not None and not bool(torch.equal(attn_mask, attn_mask.tril())):
            raise ValueError("the peer decoder is causal only")
        logits = self.net(idx)
        out = {"logits": logits}
        if targets is not None:
            out["loss"] = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        return out


PEER_INITS = ("own", "vaswani")


def vaswani_init_(model: PeerLM) -> None:
    """Our init on the peer's modules: Xavier-uniform matrices, zero biases, token embeddings N(0, 1) (what our
    √C-scaled N(0, 1/C) embeddings feed the first block), a zero T5 bias table, the sinusoidal table at scale 1. The
    peer's output layer stays untied."""
    for module in model.net.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    nn.init.normal_(model.net.token_emb.emb.weight, std=1.0)
    for name, p in model.net.named_parameters():
        if name.endswith("relative_attention_bias.weight"):  # T5 bias: ours starts at zero, the peer's at N(0, 1)
            nn.init.zeros_(p)
        elif name.endswith("pos_emb.scale"):  # sinusoidal: ours adds the table raw; the peer starts it at 1/√d,
            nn.init.ones_(p)  # which beside unit-scale tokens leaves the model with almost no position signal


def train_peer(run: RunConfig, data: TokenData, init: str = "own") -> tuple[PeerLM, list[dict]]:
    """Our schedule on the peer: same seed, batches, LR curve, optimizer and update step (runtime/optim.py)."""
    t = run.train
    torch.manual_seed(run.seed)
    model = PeerLM(peer_spec(run), data.vocab_size)
    if init == "vaswani":
        vaswani_init_(model)
    opt = make_optimizer(model, t, torch.device("cpu"))
    g = torch.Generator().manual_seed(run.seed)
    rows = []
    model.train()
    for step in range(t.steps):
        set_lr(opt, lr_at(step, t))
        tokens = sample_windows(data.splits["train"], run.model.block_size + 1, t.batch_size, g)
        loss_value, _ = update(model, opt, model(tokens[:, :-1], tokens[:, 1:])["loss"], t.grad_clip)
        if (step + 1) % t.log_every == 0 or step + 1 == t.steps:
            rows.append({"step": step + 1, "train_loss": loss_value})
    return model.eval(), rows


def crosscheck_one(run: RunConfig, data_dir: Path, inits: tuple[str, ...] = PEER_INITS) -> dict:
    """The peer's numbers for one variant under each init: val loss and loss at every length multiple."""
    data = TokenData(data_dir)
    torch.set_num_threads(run.train.threads)
    spec = peer_spec(run)
    result: dict = {
        "peer": "x-transformers",
        "peer_version": _peer_version(),
        "peer_args": {**spec.wrapper, **spec.decoder},
        "seed": run.seed,
        "steps": run.train.steps,
        "inits": {},
    }
    for init in inits:
        started = time.perf_counter()
        model, rows = train_peer(run, data, init)
        subject = Subject(run, model, data, torch.device("cpu"))
        lengths = length_sweep(subject).values["lengths"]
        result["inits"][init] = {
            "val_loss": split_loss(subject, "val")[0],
            "loss_at": {m: v["loss"] for m, v in lengths.items() if v.get("applicable")},
            "train_log": rows,
            "seconds": time.perf_counter() - started,
        }
    return result


def _peer_version() -> str:
    from importlib.metadata import version

    return version("x-transformers")


def crosscheck(study: Study, data_dir: Path, out_dir: Path, experiments: list[str] | None = None) -> dict:
    """Train the peer for each variant (seed = the study's first seed); one ``out_dir/<experiment>.json`` each, so
    variants run as parallel jobs and a killed cross-check keeps what it finished."""
    names = experiments or peer_experiments(study)
    unknown = [e for e in names if e not in study.experiments]
    if unknown:
        raise UserError(f"crosscheck: unknown experiment(s) {unknown}; known: {sorted(study.experiments)}")
    result = {}
    for name in names:
        run = study.config(name, study.seeds_for(name)[0])
        result[name] = crosscheck_one(run, data_dir)
        vals = ", ".join(f"{i} init {r['val_loss']:.4f}" for i, r in result[name]["inits"].items())
        print(f"crosscheck {name}: peer val {vals}", file=sys.stderr)
        write_json(Path(out_dir) / f"{name}.json", result[name])
    return result


def peer_experiments(study: Study) -> list[str]:
    """The study's experiments marked ``peer: true`` in params.yaml: those the peer has a documented switch for
    (peer_spec translates each; objectives and the attention breakages have no peer equivalent)."""
    return [e for e, exp in study.experiments.items() if exp.get("peer") and study.active(e)]
