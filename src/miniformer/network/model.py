"""The mini-former: token embedding, N blocks, final norm, output projection — every ablation is a ModelConfig field."""

from __future__ import annotations

from typing import TypedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from miniformer.network.attention import (
    AttentionInputs,
    KVCache,
    LayerKV,
    SelfAttention,
    make_causal_mask,
    prefix_mask,
)
from miniformer.network.config import ModelConfig
from miniformer.network.given import GivenCode
from miniformer.network.positions import build_position

__all__ = ["MLP", "Block", "MiniFormer", "ModelConfig", "ModelOutput", "sample_next"]  # ModelConfig: re-exported

# The projections that write into the residual stream: GPT-2 shrinks their init by 1/√(2·layers).
RESIDUAL_OUTPUTS = ("o_proj.weight", "down_proj.weight")


def make_norm(kind: str, n_embd: int, bias: bool) -> nn.Module:
    return nn.LayerNorm(n_embd, bias=bias) if kind == "layernorm" else nn.RMSNorm(n_embd)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        hidden = max(1, int(cfg.mlp_ratio * cfg.n_embd))
        self.up_proj = nn.Linear(cfg.n_embd, hidden, bias=cfg.bias)
        self.down_proj = nn.Linear(hidden, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.down_proj(F.gelu(self.up_proj(x))))


class Block(nn.Module):
    """Attention then MLP, each wrapped as pre-norm  x + f(norm(x))  or post-norm  norm(x + f(x)); residual optional."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre = cfg.norm_placement == "pre"
        self.residual = cfg.residual
        self.norm1 = make_norm(cfg.norm, cfg.n_embd, cfg.bias)
        self.attn = SelfAttention(cfg)
        self.norm2 = make_norm(cfg.norm, cfg.n_embd, cfg.bias)
        self.mlp = MLP(cfg)
        self.given = None  # a student's block code (network.given.GivenBlock): see forward_given

    def forward(self, x: Tensor, inputs: AttentionInputs, kv: LayerKV | None = None) -> tuple[Tensor, Tensor | None]:
        if self.given is not None:
            return self.forward_given(x, inputs, kv)
        if self.pre:
            y, weights = self.attn(self.norm1(x), inputs, kv)
            x = self.add(x, y)
            x = self.add(x, self.mlp(self.norm2(x)))
        else:
            y, weights = self.attn(x, inputs, kv)
            x = self.norm1(self.add(x, y))
            x = self.norm2(self.add(x, self.mlp(x)))
        return x, weights

    def add(self, skip: Tensor, branch: Tensor) -> Tensor:
        return skip + branch if self.residual else branch  # no identity path: the "no residual" breakage

    def forward_given(self, x: Tensor, inputs: AttentionInputs, kv: LayerKV | None) -> tuple[Tensor, Tensor | None]:
        """The block wired by a student's ``block_forward`` from this block's own layers: their MLP and norms where
        they wrote them, the layer's attention (itself on their attention code) as a function of its input."""
        g, weights = self.given, []

        def attn(h: Tensor) -> Tensor:
            y, w = self.attn(h, inputs, kv)
            weights.append(w)
            return y

        def mlp(h: Tensor) -> Tensor:
            if g.mlp_forward is None:
                return self.mlp(h)
            return self.mlp.drop(g.mlp_forward(h, self.mlp.up_proj, self.mlp.down_proj))

        x = g.block_forward(x, attn, mlp, given_norm(g, self.norm1), given_norm(g, self.norm2), self.pre,
                            self.residual)
        return x, weights[0] if weights else None


def given_norm(g, norm: nn.Module):
    """The student's layer_norm / rms_norm on this norm's weight and eps (the module itself where none is given, or
    where it has a bias the exercise does not take)."""
    if isinstance(norm, nn.LayerNorm) and g.layer_norm is not None and norm.bias is None:
        return lambda h: g.layer_norm(h, norm.weight, norm.eps)
    if isinstance(norm, nn.RMSNorm) and g.rms_norm is not None:
        return lambda h: g.rms_norm(h, norm.weight, norm.eps if norm.eps is not None else torch.finfo(h.dtype).eps)
    return norm


@torch.no_grad()
def init_qkv(attn: SelfAttention, cfg: ModelConfig) -> None:
    """Query, key and value drawn as one (3C, C) matrix and split: the scale (Xavier's bound counts the fused fan-out)
    and the random draws of the fused projection every reference run was trained with."""
    fused = torch.empty(3 * cfg.n_embd, cfg.n_embd)
    if cfg.init == "vaswani":
        nn.init.xavier_uniform_(fused)
    else:
        nn.init.normal_(fused, std=0.02)
    for proj, part in zip((attn.q_proj, attn.k_proj, attn.v_proj), fused.split(cfg.n_embd)):
        proj.weight.copy_(part)


def init_weights(model: MiniFormer) -> None:
    """Two published schemes, each matched to the block it was designed for.

    gpt2 (Radford et al. 2019, nanoGPT): every matrix N(0, 0.02), residual output projections shrunk by
    1/√(2·layers). Made for pre-norm, where each block adds a small update to a stream only the final norm rescales.
    vaswani (Vaswani et al. 2017, tensor2tensor): Xavier-uniform matrices, embeddings N(0, 1/C) scaled by √C. In a
    post-norm block the stream is re-normalised to unit scale after every sub-layer, so a branch initialised at
    std 0.02 adds ~2 % to it: the network starts as the identity, and with tied weights each character predicts
    itself, and post-norm with gpt2 init sits at the unigram loss.
    """
    cfg = model.cfg
    embed_std = 0.02 if cfg.init == "gpt2" else 1.0  # what one coordinate of an input embedding starts at
    for name, p in model.named_parameters():
        if name.startswith("position."):  # each method initialises its own (same order: same random draws)
            model.position.init_parameter(name.removeprefix("position."), p, cfg.init, embed_std / model.pos_scale)
        elif p.dim() < 2 or name.endswith(("k_proj.weight", "v_proj.weight")):
            continue  # norms and biases: ones and zeros (torch's defaults); k and v: drawn with q below
        elif name == "wte.weight":
            nn.init.normal_(p, std=0.02 if cfg.init == "gpt2" else cfg.n_embd**-0.5)
        elif name.endswith("q_proj.weight"):
            init_qkv(model.get_submodule(name.removesuffix(".q_proj.weight")), cfg)
        elif cfg.init == "vaswani":
            nn.init.xavier_uniform_(p)
        elif name.endswith(RESIDUAL_OUTPUTS):
            nn.init.normal_(p, std=0.02 / (2 * cfg.n_layer) ** 0.5)
        else:
            nn.init.normal_(p, std=0.02)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


class ModelOutput(TypedDict, total=False):
    """What MiniFormer.forward returns: logits always; the rest when targets are given or asked for."""

    logits: Tensor  # (B, T, vocab)
    loss: Tensor  # mean cross-entropy over targets != -100
    weights: list[Tensor]  # per layer (B, H, T, L)
    hidden: Tensor  # the last block's output (B, T, C)


class MiniFormer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.position = build_position(cfg.pos, cfg.block_size, cfg.n_embd, cfg.n_head)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        # Post-norm blocks already end in a norm; pre-norm needs one before the head (as in GPT-2).
        self.norm_f = make_norm(cfg.norm, cfg.n_embd, cfg.bias) if cfg.norm_placement == "pre" else nn.Identity()
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        # Vaswani et al. multiply the (tied) token embeddings by √C so that they enter at unit scale, like the blocks'
        # outputs in a post-norm stream; GPT-2 keeps them small (std 0.02) beside a pre-norm residual stream.
        self.embed_scale = cfg.n_embd**0.5 if cfg.init == "vaswani" else 1.0
        # a learned table stored like the tokens enters at their scale too (Adam moves a stored coordinate by about
        # the learning rate per step: √C times more once scaled — the rate the token table trains at)
        self.pos_scale = self.embed_scale if cfg.pos_table == "token" else 1.0
        init_weights(self)

    def use_given(self, given) -> MiniFormer:
        """Compute with someone else's code (network.given: a GivenCode, or attention Primitives alone), or with the
        package's own again (None). The given code's layers take over the current weights (see GivenAttention)."""
        code = GivenCode.of(given)
        if code is None:
            for block in self.blocks:
                block.attn.given, block.given = None, None
            self.position.use_given(None)
        else:
            code.install(self)
        return self

    def mask_for(self, T: int, start: int, attn_mask: Tensor | None, device: torch.device) -> Tensor | None:
        """The mask T new queries attend under, after ``start`` cached positions: the objective's if given, else the
        model's default (causal, or none at all when cfg.causal is off); with a cache, every cached key and the new
        keys up to the query itself."""
        if attn_mask is not None:
            return attn_mask[:, None] if attn_mask.dim() == 3 else attn_mask  # (B,T,T) -> (B,1,T,T): over heads
        if start == 0:
            return make_causal_mask(T, device) if self.cfg.causal else None
        return None if T == 1 else torch.ones(T, start + T, dtype=torch.bool, device=device).tril(start)

    def forward(
        self,
        idx: Tensor,
        targets: Tensor | None = None,
        attn_mask: Tensor | None = None,
        return_weights: bool = False,
        return_hidden: bool = False,
        cache: KVCache | None = None,
    ) -> ModelOutput:
        """idx (B,T) token ids; attn_mask (T,T) or (B,T,T) bool, True = may attend (None = cfg's default).

        ``cache``: idx continues the positions held in the cache (causal models, default mask only); their keys and
        values are reused and these are added. Returns a dict: logits, loss (mean over targets != -100, when targets
        given), weights (list per layer of (B,H,T,L), when asked), hidden (last block's output, when asked).
        """
        if cache is not None and (attn_mask is not None or not self.cfg.causal):
            raise ValueError("a KV cache is only valid for a causal model under its default mask")
        start = 0 if cache is None else cache.length
        x = self.drop(self.embed(idx, start))
        inputs = self.attention_inputs(idx.size(1), start, attn_mask, return_weights, idx.device)
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, inputs, None if cache is None else cache.layers[i])
            weights.append(w)
        logits = self.lm_head(self.norm_f(x))
        out: ModelOutput = {"logits": logits}
        if targets is not None:
            out["loss"] = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)
        if return_weights:
            out["weights"] = weights
        if return_hidden:
            out["hidden"] = x
        return out

    def embed(self, idx: Tensor, start: int) -> Tensor:
        """Token embeddings (scaled per the init scheme), plus the position embedding for additive methods."""
        x = self.wte(idx) * self.embed_scale
        pos_emb = self.position.embed(idx.size(1), idx.device, start)
        if pos_emb is None:
            return x
        return x + (pos_emb if self.pos_scale == 1.0 else self.pos_scale * pos_emb)

    def attention_inputs(self, T: int, start: int, attn_mask: Tensor | None, return_weights: bool,
                         device: torch.device) -> AttentionInputs:
        """The mask and position hooks every layer's attention reads for T queries after ``start`` cached ones."""
        return AttentionInputs(
            mask=self.mask_for(T, start, attn_mask, device),
            rotary=self.position.rotary(T, device, start),
            score_bias=self.position.score_bias(T, device, start),
            return_weights=return_weights,
            causal_hint=attn_mask is None and self.cfg.causal and start == 0,
        )

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        window: int | None = None,
        allowed_vocab: int | None = None,
        use_cache: bool = True,
        prefix_len: int | None = None,
    ) -> Tensor:
        """Sample max_new_tokens continuations of idx (B,T).

        The context is NOT cropped to block_size unless ``window`` says so: methods that define every position
        (rope, alibi, t5, sinusoidal, none) keep attending to the whole text, and learned absolute raises its clear
        error once the text outgrows block_size. ``allowed_vocab`` restricts sampling to the first ids (excludes the
        objectives' special tokens). Causal models reuse earlier keys/values (a KV cache) until a window starts to
        slide (positions shift, so cached keys no longer apply) or when ``use_cache`` is off; a model without the causal
        mask recomputes everything, since each new token changes what earlier positions see.

        ``prefix_len`` (prefix-LM models): the first prefix_len tokens of idx are read bidirectionally, as in training,
        and everything after them causally; the full text is recomputed each step under that mask.
        """
        cache = KVCache(len(self.blocks)) if use_cache and self.cfg.causal and prefix_len is None else None
        for _ in range(max_new_tokens):
            if cache is not None and window is not None and idx.size(1) > window:
                cache = None
            if cache is not None:
                ctx = idx[:, cache.length :]
            else:
                ctx = idx if window is None else idx[:, -window:]
            mask = None
            if prefix_len is not None:  # the prefix shrinks as a sliding window drops its first tokens
                visible_prefix = max(0, prefix_len - (idx.size(1) - ctx.size(1)))
                mask = prefix_mask(torch.tensor([visible_prefix]), ctx.size(1), ctx.device)[0]
            logits = self(ctx, attn_mask=mask, cache=cache)["logits"][:, -1, :]
            if allowed_vocab is not None:
                logits = logits[:, :allowed_vocab]
            idx = torch.cat((idx, sample_next(logits, temperature, top_k, generator)), dim=1)
        return idx


def sample_next(logits: Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> Tensor:
    """One token per row from (B, V) logits: greedy at temperature <= 0, else softmax(logits / T) over the top k."""
    if temperature <= 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1, generator=generator)
