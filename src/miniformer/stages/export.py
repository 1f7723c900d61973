"""`miniformer export RUN DIR`: a trained run as a model someone else can load, without the study tree.

The folder holds the weights (safetensors: plain tensors, no pickled code, no optimizer state), the model config,
the tokenizer, and a model card (README.md). ``miniformer.load(DIR)`` gives back a model and tokenizer that generate
and score exactly as the run's checkpoint does. provenance.json records the training's fingerprint and a digest of
each file load reads, so an edited config (another head count, another position method) or tokenizer is refused
rather than loaded into other numbers.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import torch

from miniformer.errors import UserError
from miniformer.network.flops import count_params
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.runtime.files import atomic_write_text
from miniformer.runtime.provenance import check_digest, digests, read_sealed_json, write_sealed_json
from miniformer.tokenizer import tokenizer_from_json

WEIGHTS, CONFIG, TOKENIZER, CARD = "model.safetensors", "config.json", "tokenizer.json", "README.md"
PROVENANCE = "provenance.json"
CHECKED = (WEIGHTS, CONFIG, TOKENIZER)  # what load reads (the card is prose a user may edit for the Hub)


def _commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def _val_interval(windows: dict | None) -> str:
    """Val loss ± the 95 % normal interval of its per-window mean (evaluation sampling only: one run, one seed)."""
    if not windows or "val" not in windows:
        return "not evaluated (run `miniformer evaluate` first for a val loss)"
    sums, counts = windows["val"]["sum"], windows["val"]["count"]
    per_window = [s / c for s, c in zip(sums, counts) if c]
    mean = sum(sums) / sum(counts)
    n = len(per_window)
    sd = math.sqrt(sum((x - mean) ** 2 for x in per_window) / (n - 1)) if n > 1 else float("nan")
    return f"{mean:.4f} ± {1.96 * sd / math.sqrt(n):.4f} nats per token (95 % interval over {n} val windows; " \
           "evaluation sampling only, no seed spread)"


def model_card(config: dict, model: MiniFormer, meta: dict, windows: dict | None, name: str) -> str:
    cfg = config["model"]
    return f"""# miniformer model: {name}

A decoder-only Transformer trained by the miniformer study (run `{name}`, commit {_commit()}).

| | |
|---|---|
| objective | {config['train']['objective']} |
| positions | {cfg['pos']} |
| layers × heads × width | {cfg['n_layer']} × {cfg['n_head']} × {cfg['n_embd']} |
| block size (training length) | {cfg['block_size']} |
| norm, placement, residual | {cfg['norm']}, {cfg['norm_placement']}, {cfg['residual']} |
| parameters | {count_params(model):,} |
| training | {config['train']['steps']} steps, batch {config['train']['batch_size']}, lr {config['train']['lr']} |
| tokenizer | {meta['tokenizer']}, {meta['vocab_size']} tokens |
| corpus | {meta['corpus']} (train / val / test split: {meta.get('sources', {})}) |
| val loss | {_val_interval(windows)} |

## Load it

```python
import miniformer
model, tokenizer = miniformer.load("{name.replace('/', '_')}")   # this folder
ids = torch.tensor([tokenizer.encode("Romeo:")])
print(tokenizer.decode(model.generate(ids, 100, temperature=0.8, top_k=20)[0].tolist()))
```

Files: `{WEIGHTS}` (weights, safetensors), `{CONFIG}` (model config and training params), `{TOKENIZER}`.
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


def export_run(run_path: Path, meta: dict, eval_folder: Path | None, out: Path, name: str) -> Path:
    from safetensors.torch import save_model

    from miniformer.runtime.checkpoints import load_run_model, training_finished

    model, config, ckpt = load_run_model(run_path, torch.device("cpu"))
    windows = evaluation_windows(eval_folder, ckpt)
    if not training_finished(ckpt, config["train"]["steps"]):
        raise UserError(f"run {name} stopped at step {ckpt.get('step')} of {config['train']['steps']}; finish its "
                        "training before exporting it")
    if meta["tokenizer_hash"] != ckpt["tokenizer_hash"]:
        raise UserError(f"run {name} was trained with another tokenizer than the prepared data's; pass --data")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{str(out)!r} is not empty; export into a new folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        save_model(model, str(out / WEIGHTS))  # tied embedding and head: stored once
    except Exception as e:  # noqa: BLE001 - OSError, or safetensors' own error for the same unwritable file
        raise UserError(f"cannot write the export into {str(out)!r} ({getattr(e, 'strerror', None) or e}); choose a "
                        "folder you can write to") from None
    config_out = {"model": model.cfg.to_dict(), "train": config["train"], "base_vocab": meta["vocab_size"]}
    atomic_write_text(out / CONFIG, json.dumps(config_out, indent=1))
    atomic_write_text(out / TOKENIZER, meta["tokenizer_json"])
    atomic_write_text(out / CARD, model_card(config, model, meta, windows, name))
    write_sealed_json(out / PROVENANCE, {"fingerprint": ckpt.get("fingerprint"), "files": digests(out, CHECKED)})
    return out


def load(path: str | Path):
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
