"""`miniformer export RUN DIR`: a trained run as a model someone else can load, without the study tree.

The folder is a Hugging Face model folder: the weights (safetensors: plain tensors, no pickled code, no optimizer
state), config.json, the tokenizer in the `tokenizers` library's format, a generation config, the modeling code
transformers loads with ``trust_remote_code=True`` (see miniformer.hub) and a model card with Hub metadata.
``miniformer.load(DIR)`` gives back a model and tokenizer that generate and score exactly as the run's checkpoint
does. provenance.json records the training's fingerprint and a digest of each file load reads, so an edited config
(another head count, another position method) or tokenizer is refused rather than loaded into other numbers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from miniformer.errors import UserError
from miniformer.network.flops import count_params
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import OBJECTIVES, Specials
from miniformer.runtime.files import atomic_write_text
from miniformer.runtime.provenance import check_digest, digests, read_sealed_json, write_sealed_json
from miniformer.tokenizer import BPETokenizer, CharTokenizer, library_format, tokenizer_from_json

WEIGHTS, CONFIG, TOKENIZER, CARD = "model.safetensors", "config.json", "tokenizer.json", "README.md"
TOKENIZER_CONFIG, GENERATION, PROVENANCE = "tokenizer_config.json", "generation_config.json", "provenance.json"
HUB = Path(__file__).resolve().parent.parent / "hub"
MODELING = ("configuration_miniformer.py", "modeling_miniformer.py")  # copied as they are
NETWORK_FILE = "miniformer_network.py"  # written from the package's network modules (hub/network_file.py)
# What loading reads, the modeling code transformers runs included (the card is prose a user may edit for the Hub)
CHECKED = (WEIGHTS, CONFIG, TOKENIZER, TOKENIZER_CONFIG, GENERATION, NETWORK_FILE, *MODELING)
MASK_TOKEN = "[MASK]"


def special_tokens(base_vocab: int) -> list[str]:
    """The names of the ids above the tokenizer's vocabulary, in id order: [MASK], then T5's sentinel names."""
    return [MASK_TOKEN] + [f"<extra_id_{k}>" for k in range(Specials(base_vocab).n_sentinels)]


def _commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent)
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def val_interval(windows: dict | None) -> tuple[float, float, int] | None:
    """Val loss, the half-width of the 95 % normal interval of its per-window mean, and the number of windows
    (evaluation sampling only: one run, one seed); None when the run was not evaluated."""
    if not windows or "val" not in windows:
        return None
    sums, counts = windows["val"]["sum"], windows["val"]["count"]
    per_window = [s / c for s, c in zip(sums, counts) if c]
    mean = sum(sums) / sum(counts)
    n = len(per_window)
    sd = math.sqrt(sum((x - mean) ** 2 for x in per_window) / (n - 1)) if n > 1 else float("nan")
    return mean, 1.96 * sd / math.sqrt(n), n


@dataclass
class ExportSource:
    """What an export says about where its model came from."""

    name: str  # the run (or a fine-tune of it)
    config: dict  # {"model": ..., "train": ...}: the run's params; a fine-tune adds what it did under "finetune"
    meta: dict  # the prepared data's meta.json: tokenizer, corpus, splits
    fingerprint: str | None  # the training's fingerprint (None: a model trained outside the study, e.g. a LoRA merge)
    windows: dict | None  # the evaluation's per-window val losses of this very model, or None
    prompt: str  # a few tokens of the corpus, for the card's snippets

    @property
    def objective(self) -> str:
        return self.config["train"]["objective"]


def _metadata(source: ExportSource, model: MiniFormer) -> str:
    """The card's YAML block: what the Hub shows beside the model and indexes it by."""
    left_to_right = OBJECTIVES[source.objective].left_to_right
    tags = ["miniformer", "custom_code", f"{source.objective}-lm", f"pos-{model.cfg.pos}",
            f"{source.meta['tokenizer']}-tokenizer"]
    meta: dict = {"license": "mit", "library_name": "transformers", "pipeline_tag":
                  "text-generation" if left_to_right else "fill-mask", "tags": tags,
                  "datasets": [str(source.meta["corpus"])]}
    interval = val_interval(source.windows)
    if interval is not None:
        loss, half, n = interval
        metrics = [{"type": "loss", "name": f"val loss (nats per token, {n} windows)", "value": round(loss, 4)},
                   {"type": "loss_ci95_half_width", "name": "95 % interval half-width (evaluation sampling only)",
                    "value": round(half, 4)},
                   {"type": "perplexity", "name": "val perplexity", "value": round(math.exp(loss), 3)}]
        task = "text-generation" if left_to_right else "fill-mask"
        meta["model-index"] = [{"name": source.name, "results": [{
            "task": {"type": task, "name": f"{source.objective} language modelling"},
            "dataset": {"type": str(source.meta["corpus"]), "name": f"{source.meta['corpus']} (val split)",
                        "split": "val"},
            "metrics": metrics}]}]
    return "---\n" + yaml.safe_dump(meta, allow_unicode=True, sort_keys=False) + "---\n"


def _val_line(windows: dict | None, from_study: bool) -> str:
    interval = val_interval(windows)
    if interval is None and not from_study:
        return "not evaluated (exported from memory: no study evaluation vouches for these weights)"
    if interval is None:
        return "not evaluated (run `miniformer evaluate` first for a val loss)"
    loss, half, n = interval
    return (f"{loss:.4f} ± {half:.4f} nats per token (95 % interval over {n} val windows; evaluation sampling only, "
            "no seed spread)")


def _snippets(source: ExportSource, folder: Path) -> str:
    """Code that runs as written from any folder: transformers (the Hub's way) and miniformer's own."""
    # the folder as exported; once pushed to the Hub, its repository id ("user/name") goes here instead
    where, prompt = json.dumps(str(folder.resolve())), json.dumps(source.prompt, ensure_ascii=False)
    if OBJECTIVES[source.objective].left_to_right:
        reading = "" if source.objective == "causal" else ", prefix_length=ids.size(1)"
        hf = f"""from transformers import AutoModelForCausalLM, AutoTokenizer

folder = {where}
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
ids = tokenizer({prompt}, return_tensors="pt").input_ids
out = model.generate(ids, max_new_tokens=60, do_sample=True, temperature=0.8, top_k=20{reading})
print(tokenizer.decode(out[0], skip_special_tokens=True))"""
        own_generate = "model.generate(ids, 60, temperature=0.8, top_k=20, allowed_vocab=tokenizer.vocab_size" + (
            ")" if source.objective == "causal" else ", prefix_len=ids.size(1))")
        own = f"""import torch

import miniformer

model, tokenizer = miniformer.load({where})
ids = torch.tensor([tokenizer.encode({prompt})])
print(tokenizer.decode({own_generate}[0].tolist()))"""
    else:
        hf = f"""import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

folder = {where}
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)
ids = tokenizer({prompt}, return_tensors="pt").input_ids
ids[0, 1] = tokenizer.mask_token_id  # hide the second token
guess = model(ids).logits[0, 1, : model.config.base_vocab].argmax()
print(tokenizer.decode([guess]))"""
        own = f"""import torch

import miniformer

model, tokenizer = miniformer.load({where})
ids = torch.tensor([tokenizer.encode({prompt})])
print(model(ids, attn_mask=torch.ones(ids.size(1), ids.size(1), dtype=torch.bool))["logits"].shape)"""
    return f"""## Load it

With transformers (`pip install transformers`; the folder's own modeling code runs, hence `trust_remote_code`):

```python
{hf}
```

With miniformer (`pip install miniformer` from the study's repository):

```python
{own}
```
"""


def _fields(d: dict) -> str:
    return "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in d.items())


def _split_sizes(meta: dict) -> str:
    """How the corpus was split, in counts (the sources themselves are in the study's prepared data)."""
    sources = meta.get("sources") or {}
    counts = {split: len(v) if isinstance(v, list | tuple | dict) else v for split, v in sources.items()}
    return ", ".join(f"{n} {split}" for split, n in counts.items()) + " sources" if counts else "train / val / test"


def model_card(source: ExportSource, model: MiniFormer, folder: Path) -> str:
    cfg, train, meta = model.cfg, source.config["train"], source.meta
    finetune = source.config.get("finetune")
    trained = f"{train['steps']} steps, batch {train['batch_size']}, lr {train['lr']}" if "steps" in train else \
        "not recorded"
    return f"""{_metadata(source, model)}
# miniformer model: {source.name}

A decoder-only Transformer trained by the miniformer study (run `{source.name}`, commit {_commit()}): a small model
for studying what each part of a Transformer does, trained on one corpus ({meta['corpus']}). It is **not** a
general-purpose language model: it knows the characters and phrases of that corpus and nothing else, and has had no
instruction tuning, filtering or safety work.

| | |
|---|---|
| objective | {source.objective} |
| positions | {cfg.pos} |
| layers × heads × width | {cfg.n_layer} × {cfg.n_head} × {cfg.n_embd} |
| block size (training length) | {cfg.block_size} |
| norm, placement, residual | {cfg.norm}, {cfg.norm_placement}, {cfg.residual} |
| parameters | {count_params(model):,} |
| training | {trained} |
| fine-tune | {_fields(finetune) if finetune else "none"} |
| tokenizer | {meta['tokenizer']}, {meta['vocab_size']} tokens (+ {len(special_tokens(meta['vocab_size']))} special) |
| corpus | {meta['corpus']} ({_split_sizes(meta)}) |
| val loss | {_val_line(source.windows, source.fingerprint is not None)} |

Attention projections are named `q_proj`, `k_proj`, `v_proj`, `o_proj` and the MLP's `up_proj`, `down_proj`, the names
LoRA recipes target (peft's `target_modules`).

{_snippets(source, folder)}
Files: `{WEIGHTS}` (weights, safetensors), `{CONFIG}` (transformers config with the model config and training params),
`{TOKENIZER}` (the `tokenizers` library's format), `{GENERATION}` (keeps the special tokens out of generated text),
`{MODELING[0]}`, `{MODELING[1]}`, `{NETWORK_FILE}` (the modeling code), `{PROVENANCE}` (digests `miniformer.load`
checks).
"""


def evaluation_windows(eval_folder: Path | None, ckpt: dict) -> dict | None:
    """The run's per-window val losses, only from an evaluation of this very checkpoint (an evaluation of an earlier
    training, an edited eval.json or a windows.json eval.json does not vouch for gives no number on the card)."""
    if eval_folder is None or not (eval_folder / "eval.json").exists():
        return None
    try:
        ev = read_sealed_json(eval_folder / "eval.json", "")
        if ev.get("fingerprint") != ckpt.get("fingerprint"):
            return None
        check_digest(eval_folder, "windows.json", ev.get("files", {}), "eval.json", "")
        return json.loads((eval_folder / "windows.json").read_text(encoding="utf-8"))
    except (UserError, OSError, json.JSONDecodeError):
        return None


def _hub_config(model: MiniFormer, source: ExportSource) -> dict:
    """config.json: what transformers reads (model_type, auto_map) around what miniformer.load reads (model)."""
    left_to_right = OBJECTIVES[source.objective].left_to_right
    head = "MiniFormerForCausalLM" if left_to_right else "MiniFormerForMaskedLM"
    auto = "AutoModelForCausalLM" if left_to_right else "AutoModelForMaskedLM"
    extra = {k: v for k, v in source.config.items() if k not in ("model", "train")}
    return {"model_type": "miniformer", "architectures": [head],
            "auto_map": {"AutoConfig": "configuration_miniformer.MiniFormerConfig",
                         auto: f"modeling_miniformer.{head}"},
            "model": model.cfg.to_dict(), "train": source.config["train"], **extra,
            "base_vocab": source.meta["vocab_size"], "vocab_size": model.cfg.vocab_size,
            "tie_word_embeddings": model.cfg.tie_weights, "use_cache": False}


def _tokenizer_config(model: MiniFormer, base_vocab: int) -> dict:
    """What AutoTokenizer reads beside tokenizer.json: the class, the special tokens, and no space clean-up (a
    character model's text comes back exactly as it went in)."""
    names = special_tokens(base_vocab)
    past_block = model.position.undefined_past_block is not None
    # padding on the right with the last special id, which no text contains: the model masks pads out of what real
    # tokens read (modeling_miniformer.py), so `tok([...], padding=True)` batches score as the texts alone
    return {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
            "mask_token": MASK_TOKEN, "additional_special_tokens": names[1:],
            "pad_token": names[-1], "padding_side": "right",
            "model_max_length": model.cfg.block_size if past_block else 1_000_000}


def write_export(model: MiniFormer, source: ExportSource, out: Path) -> Path:
    """Write ``model`` as a Hugging Face model folder ``out`` (new or empty); every file readable by all (0644)."""
    from safetensors.torch import save_model

    from miniformer.hub.network_file import network_source

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{str(out)!r} is not empty; export into a new folder")
    tokenizer = tokenizer_from_json(source.meta["tokenizer_json"])
    base = source.meta["vocab_size"]
    try:
        out.mkdir(parents=True, exist_ok=True)
        save_model(model, str(out / WEIGHTS))  # tied embedding and head: stored once
    except Exception as e:  # noqa: BLE001 - OSError, or safetensors' own error for the same unwritable file
        raise UserError(f"cannot write the export into {str(out)!r} ({getattr(e, 'strerror', None) or e}); choose a "
                        "folder you can write to") from None
    generation = {"suppress_tokens": list(range(base, model.cfg.vocab_size)), "use_cache": False}
    texts = {CONFIG: json.dumps(_hub_config(model, source), indent=1),
             TOKENIZER: library_format(tokenizer, special_tokens(base)),
             TOKENIZER_CONFIG: json.dumps(_tokenizer_config(model, base), indent=1),
             GENERATION: json.dumps(generation, indent=1),
             NETWORK_FILE: network_source(),
             CARD: model_card(source, model, out)}
    for name, text in texts.items():
        atomic_write_text(out / name, text)
    for name in MODELING:
        shutil.copyfile(HUB / name, out / name)
    write_sealed_json(out / PROVENANCE, {"fingerprint": source.fingerprint, "files": digests(out, CHECKED)})
    mode = 0o666 & ~_umask()
    for path in out.iterdir():
        path.chmod(mode)
    return out


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def corpus_prompt(data, length: int = 12) -> str:
    """The start of the first line of the val split (``data``: TokenData) with some words on it: the snippets'
    prompt, which the tokenizer is sure to read (a character the train split lacks would be refused)."""
    text = data.tokenizer.decode(data.splits["val"][:2000].tolist())
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 4]
    return (lines[0] if lines else text.strip())[:length]


def export_run(run_path: Path, meta: dict, eval_folder: Path | None, out: Path, name: str, prompt: str) -> Path:
    from miniformer.runtime.checkpoints import load_run_model, training_finished

    model, config, ckpt = load_run_model(run_path, torch.device("cpu"))
    windows = evaluation_windows(eval_folder, ckpt)
    if not training_finished(ckpt, config["train"]["steps"]):
        raise UserError(f"run {name} stopped at step {ckpt.get('step')} of {config['train']['steps']}; finish its "
                        "training before exporting it")
    if meta["tokenizer_hash"] != ckpt["tokenizer_hash"]:
        raise UserError(f"run {name} was trained with another tokenizer than the prepared data's; pass --data")
    if ckpt.get("data_content") != meta.get("content_hash"):
        raise UserError(f"run {name} was trained on other prepared data than --data holds now (the corpus changed "
                        "since): its card would describe data it never read; re-train it, or pass --data the "
                        "prepared data it was trained on")
    source = ExportSource(name, {"model": config["model"], "train": config["train"]}, meta, ckpt.get("fingerprint"),
                          windows, prompt)
    return write_export(model, source, out)


def export_model(model: MiniFormer, data_dir: Path, out: Path, name: str, train: dict,
                 finetune: dict | None = None) -> Path:
    """An in-memory model (a LoRA fine-tune merged into its weights, a model trained in a notebook) as an export, with
    the tokenizer of the prepared data it was trained on. It carries no study fingerprint and no evaluation: the card
    says "not evaluated", and ``finetune`` (what was done to it, as a dict) is written into config.json and the card."""
    from miniformer.runtime.tokendata import TokenData

    data = TokenData(Path(data_dir))
    if data.vocab_size != model.cfg.vocab_size - len(special_tokens(data.vocab_size)):
        raise UserError(f"the model's vocabulary ({model.cfg.vocab_size}) is not the one of {str(data_dir)!r}'s "
                        "tokenizer; pass the data folder it was trained on")
    config = {"model": model.cfg.to_dict(), "train": train, **({"finetune": finetune} if finetune else {})}
    prompt = corpus_prompt(data)
    return write_export(model.eval(), ExportSource(name, config, data.meta, None, None, prompt), out)


def load(path: str | Path) -> tuple[MiniFormer, CharTokenizer | BPETokenizer]:
    """A model exported by `miniformer export` and its tokenizer: ``model, tokenizer = miniformer.load(DIR)``."""
    from safetensors.torch import load_model

    folder = Path(path)
    missing = [f for f in (WEIGHTS, CONFIG, TOKENIZER) if not (folder / f).is_file()]
    if missing:
        raise UserError(f"{str(folder)!r} is not an exported model (missing {', '.join(missing)}); make one with "
                        "`miniformer export RUN DIR`")
    reexport = "export the run again (`miniformer export RUN DIR`)"
    recorded = read_sealed_json(folder / PROVENANCE, reexport)
    for name in CHECKED:  # a changed head count, position method or tokenizer would load into other numbers
        check_digest(folder, name, recorded["files"], str(folder / PROVENANCE), reexport)
    config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    model = MiniFormer(ModelConfig.from_dict(config["model"]))
    load_model(model, str(folder / WEIGHTS))
    return model.eval(), tokenizer_from_json((folder / TOKENIZER).read_text(encoding="utf-8"))
