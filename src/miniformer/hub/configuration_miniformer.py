"""The transformers config of an exported mini-former: the study's model config and training params, as written."""

from __future__ import annotations

from transformers import PretrainedConfig


class MiniFormerConfig(PretrainedConfig):
    """``model`` is miniformer's ModelConfig as a dict, ``train`` the run's training params, ``base_vocab`` the
    tokenizer's vocabulary (the ids above it are the objectives' special tokens)."""

    model_type = "miniformer"

    def __init__(self, model: dict | None = None, train: dict | None = None, base_vocab: int | None = None,
                 **kwargs) -> None:
        self.model = dict(model or {})
        self.train = dict(train or {})
        self.base_vocab = base_vocab
        self.vocab_size = self.model.get("vocab_size")
        kwargs.setdefault("tie_word_embeddings", self.model.get("tie_weights", True))
        kwargs.setdefault("use_cache", False)  # every step recomputes the whole text (see MiniFormerForCausalLM)
        super().__init__(**kwargs)
