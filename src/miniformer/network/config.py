"""ModelConfig: the mini-former's sizes and every ablation switch, one field each, checked when it is made."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from miniformer.network.positions import POSITION_METHODS

INITS = ("vaswani", "gpt2")


def attention_errors(n_embd: int, n_head: int, qkv_order: str, head_merge: str) -> list[str]:
    """What is wrong with these attention settings (empty: nothing)."""
    checks = [
        (n_embd % n_head == 0, f"n_embd={n_embd} is not divisible by n_head={n_head}"),
        (sorted(qkv_order) == ["k", "q", "v"], f"qkv_order={qkv_order!r} must be a permutation of 'qkv'"),
        (head_merge in ("concat", "mean"), f"head_merge={head_merge!r} must be 'concat' or 'mean'"),
    ]
    return [message for ok, message in checks if not ok]


@dataclass
class ModelConfig:
    vocab_size: int = 128
    block_size: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False  # no biases in Linear/LayerNorm: as good and a little faster (nanoGPT's choice)
    pos: str = "rope"  # learned | sinusoidal | rope | alibi | t5 | none
    # pos=learned: "raw" adds the table as stored; "token" stores and scales it as the token embedding is (under the
    # vaswani init N(0, 1/C) times √C), so the optimiser moves both tables at one rate per step
    pos_table: str = "raw"
    attn_scale: bool = True  # divide scores by √head_dim
    causal: bool = True  # causal mask for the causal-LM objective (False = the leaking "no mask" breakage)
    qkv_order: str = "qkv"  # which projection plays Q, K, V; "kqv" swaps the query and key roles
    qk_tied: bool = False  # the key projection is the query's: symmetric scores (a breakage)
    value_proj: bool = True  # False: the values are the block's input itself, no W_v
    head_merge: str = "concat"  # concat | mean
    norm: str = "layernorm"  # layernorm | rmsnorm
    norm_placement: str = "pre"  # pre | post
    residual: bool = True
    mlp_ratio: float = 4.0  # hidden width of the MLP = mlp_ratio * n_embd
    tie_weights: bool = True
    init: str = "vaswani"  # vaswani | gpt2: weight init and embedding scale, see model.init_weights

    def __post_init__(self) -> None:
        sizes = {"vocab_size": self.vocab_size, "block_size": self.block_size, "n_layer": self.n_layer,
                 "n_head": self.n_head, "n_embd": self.n_embd}
        for name, size in sizes.items():  # first: the checks below divide by them
            if size <= 0:
                raise ValueError(f"{name}={size} must be a positive integer")
        checks = [(False, message) for message in
                  attention_errors(self.n_embd, self.n_head, self.qkv_order, self.head_merge)] + [
            (self.pos in POSITION_METHODS, f"unknown pos={self.pos!r}; choose one of {', '.join(POSITION_METHODS)}"),
            (self.pos_table in ("raw", "token"), f"unknown pos_table={self.pos_table!r}; choose raw or token"),
            (self.pos_table == "raw" or self.pos == "learned", "pos_table='token' applies to pos=learned only"),
            (self.norm in ("layernorm", "rmsnorm"), f"unknown norm={self.norm!r}; choose layernorm or rmsnorm"),
            (self.norm_placement in ("pre", "post"), f"unknown norm_placement={self.norm_placement!r}; pre or post"),
            (self.init in INITS, f"unknown init={self.init!r}; choose one of {', '.join(INITS)}"),
            (self.mlp_ratio > 0, f"mlp_ratio={self.mlp_ratio} must be > 0"),
            (0 <= self.dropout < 1, f"dropout={self.dropout} must be in [0, 1)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        if self.pos == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError(f"pos=rope needs an even head dim; n_embd/n_head = {self.n_embd // self.n_head}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model key(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)
