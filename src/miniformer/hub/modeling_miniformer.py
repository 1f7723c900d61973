"""transformers classes around the mini-former: a causal LM (causal, prefix and span-corruption objectives) and a
masked LM (the MLM objective), each reading a text the way its objective trained it to."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import Tensor
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput, MaskedLMOutput

from .configuration_miniformer import MiniFormerConfig
from .miniformer_network import MiniFormer, ModelConfig, PositionMethod, build_position, prefix_mask


def check_export(folder: str) -> None:
    """A folder `miniformer export` wrote records a digest of its config, tokenizer and weights (provenance.json); one
    edited since (another head count, another position method) would load into other numbers, so it is refused. A
    folder without the record (saved again by transformers, say) is not checked."""
    record = Path(folder) / "provenance.json"
    if not folder or not record.is_file():  # built from a config alone, or a folder without the record
        return
    for name, digest in json.loads(record.read_text(encoding="utf-8")).get("files", {}).items():
        path = Path(folder) / name
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest()[:16] != digest:
            raise ValueError(f"{path} is not the file `miniformer export` wrote (provenance.json records another): "
                             "export the run again, or delete provenance.json if you changed it on purpose")


class MiniFormerPreTrainedModel(PreTrainedModel):
    config_class = MiniFormerConfig
    base_model_prefix = "net"
    _tied_weights_keys = {"net.lm_head.weight": "net.wte.weight"}

    def __init__(self, config: MiniFormerConfig) -> None:
        super().__init__(config)
        check_export(getattr(config, "_name_or_path", "") or "")
        self.net = MiniFormer(ModelConfig.from_dict(config.model))
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: torch.nn.Module) -> None:
        """No weight: from_pretrained loads every one. What it does not load are the position method's constants
        (RoPE's frequencies, ALiBi's slopes: buffers outside the weights file), computed again here."""
        if isinstance(module, PositionMethod):
            cfg = self.config.model
            fresh = build_position(cfg["pos"], cfg["block_size"], cfg["n_embd"], cfg["n_head"])
            for name, buffer in fresh.named_buffers():
                module.get_buffer(name).copy_(buffer)
            if hasattr(module, "_cache"):
                module._cache = None  # rotations computed from the buffer before it was set

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.net.wte

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.net.lm_head

    @staticmethod
    def _right_padded(attention_mask: Tensor | None) -> Tensor | None:
        """The (B, T) mask of real tokens of a right-padded batch, or None when nothing is padded. Left padding is
        refused: it would move every real token to another position (a learned table reads absolute positions)."""
        if attention_mask is None or bool(attention_mask.all()):
            return None
        real = attention_mask.bool()
        if bool((real[:, 1:] & ~real[:, :-1]).any()):
            raise ValueError("miniformer reads right-padded batches only: set tokenizer.padding_side = 'right' (the "
                             "exported tokenizer's default), or pass texts one at a time")
        return real

    @staticmethod
    def _loss(logits: Tensor, labels: Tensor | None, shift: bool) -> Tensor | None:
        if labels is None:
            return None
        if shift:  # transformers' convention for causal LMs: labels are the inputs, the shift happens here
            logits, labels = logits[:, :-1], labels[:, 1:]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1),
                                                 ignore_index=-100)


class MiniFormerForCausalLM(MiniFormerPreTrainedModel, GenerationMixin):
    """Left to right, as a causal LM trained; ``prefix_length=n`` reads the first n tokens bidirectionally (the prefix
    LM's and span corruption's reading of their input). Each generated token recomputes the whole text: no KV cache."""

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                prefix_length: int | None = None, **_) -> CausalLMOutput:
        # right padding needs no mask here: a real token never reads a later position, so never a pad
        self._right_padded(attention_mask)
        mask = None
        if prefix_length is not None:
            lengths = torch.full((input_ids.size(0),), prefix_length, device=input_ids.device)
            mask = prefix_mask(lengths, input_ids.size(1), input_ids.device)
        logits = self.net(input_ids, attn_mask=mask)["logits"]
        return CausalLMOutput(loss=self._loss(logits, labels, shift=True), logits=logits)

    def prepare_inputs_for_generation(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                                      prefix_length: int | None = None, **_) -> dict:
        return {"input_ids": input_ids, "attention_mask": attention_mask, "prefix_length": prefix_length}


class MiniFormerForMaskedLM(MiniFormerPreTrainedModel):
    """Every token sees every other, as the masked LM trained; put [MASK] where a token is to be guessed."""

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                **_) -> MaskedLMOutput:
        real = self._right_padded(attention_mask)
        T = input_ids.size(1)
        mask = torch.ones(T, T, dtype=torch.bool, device=input_ids.device)
        if real is not None:  # every token reads every real token, never a pad: (B, T, T)
            mask = mask[None] & real[:, None, :]
        logits = self.net(input_ids, attn_mask=mask)["logits"]
        return MaskedLMOutput(loss=self._loss(logits, labels, shift=False), logits=logits)
