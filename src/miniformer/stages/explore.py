"""Use any trained run: list runs, generate, score sentences, draw attention for your own text."""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from miniformer.devices import pick_device
from miniformer.errors import UserError
from miniformer.layout import DATA_DIR, eval_dir, run_name, seed_of, trained_runs
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import Objective, Specials, objective_named
from miniformer.network.positions import POSITIONS
from miniformer.runtime.checkpoints import CHECKPOINT, load_run_model, unfinished_note
from miniformer.runtime.memory import check_fits, inference_bytes
from miniformer.runtime.provenance import read_sealed_json
from miniformer.runtime.tokendata import check_same_tokenizer
from miniformer.tokenizer import tokenizer_from_json


@dataclass
class LoadedRun:
    path: Path
    model: MiniFormer
    config: dict
    tokenizer: object
    specials: Specials

    @property
    def objective(self) -> Objective:
        return objective_named(self.config["train"]["objective"])


def list_runs(results: Path, data_dir: Path | None = None) -> list[str]:
    """One line per trained run. The val loss shown is the evaluation of *this* training on the prepared data there
    now: an evaluation of an earlier training, of a training on other data (the corpus changed since), an edited file
    or a missing one shows why there is no number instead of a number."""
    if not Path(results).is_dir():
        raise UserError(f"no results folder at {str(results)!r}; run the study first, or pass --results")
    meta_path = Path(data_dir or DATA_DIR) / "meta.json"
    current = _plain_json_or_none(meta_path).get("content_hash")  # None: no data to hold the runs against
    runs = trained_runs(results)
    width = max([len("experiment"), *(len(run_name(results, r)) for r in runs)])
    lines = [f"{'experiment':{width}} {'seed':>4} {'steps':>6} {'val loss':>9}  path"]
    notes: list[str] = []
    for run in runs:
        name, seed = run_name(results, run), seed_of(run)
        m = _sealed_or_none(run / "metrics.json")
        steps = "…" if m is None else m.get("steps_done", "…")
        val, why = evaluated_val(m, eval_dir(results, name, seed) / "eval.json")
        if m is not None and current is not None and m.get("data_content") != current:
            val, why = None, f"trained on other prepared data than {meta_path.parent} holds now: re-train it"
        shown = f"{val:.4f}" if val is not None else "—"
        lines.append(f"{name:{width}} {seed:>4} {steps!s:>6} {shown:>9}  {run}" + (f"  ({why})" if why else ""))
        if why:
            notes.append(why)
    if len(lines) == 1:
        lines.append(f"(no trained runs under {results}/runs; run the study first)")
    if notes:
        lines.append("— : no val loss of this training (`miniformer evaluate EXPERIMENT --seed K` makes one)")
    return lines


def evaluated_val(metrics: dict | None, eval_path: Path) -> tuple[float | None, str | None]:
    """(val loss, None) when eval.json evaluates the training metrics.json describes; else (None, the reason)."""
    if metrics is None:
        return None, "training unfinished, or its metrics.json is unreadable or edited"
    if not eval_path.exists():
        return None, "not evaluated"
    ev = _sealed_or_none(eval_path)
    if ev is None:
        return None, "eval.json unreadable or edited since it was written"
    if ev.get("fingerprint") != metrics.get("fingerprint"):
        return None, "eval.json evaluates an earlier training"
    return ev.get("val_loss"), None


def _plain_json_or_none(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _sealed_or_none(path: Path) -> dict | None:
    """A listing shows what it can: a missing, unreadable or edited file is no entry, not a crash of the whole list."""
    try:
        return read_sealed_json(path, "")
    except UserError:
        return None


def resolve_run(spec: str, results: Path, seed: int | None) -> Path:
    """RUN is a run folder, or an experiment name (+ --seed, default the lowest trained seed)."""
    p = Path(spec)
    if (p / "ckpt.pt").exists():
        return p
    if p.is_absolute() or p.is_dir() or ".." in p.parts:
        raise UserError(f"no checkpoint in folder {spec!r}; give a run folder holding ckpt.pt, or an experiment name "
                        "(see `miniformer runs`)")
    # its own seeds, not its sweep points' (which live below it), lowest seed first
    seeds = sorted((r for r in trained_runs(results, spec) if run_name(results, r) == spec), key=seed_of)
    if seed is not None:
        seeds = [s for s in seeds if seed_of(s) == seed]
    if not seeds:
        known = sorted({run_name(results, r) for r in trained_runs(results)})
        raise UserError(
            f"unknown run {spec!r}{'' if seed is None else f' seed {seed}'}; trained runs: "
            f"{', '.join(known) or 'none'} (see `miniformer runs`)"
        )
    return seeds[0]


def load(spec: str, results: Path, seed: int | None = None, data_dir: Path | None = None,
         device: str = "cpu") -> LoadedRun:
    path = resolve_run(spec, results, seed)
    where = pick_device(device)
    check_model_fits(path, where)
    model, config, ckpt = load_run_model(path, where)
    note = unfinished_note(ckpt, config, spec)
    if note:  # generate, score and attention may use a checkpoint mid-training, but never without saying so
        print(note, file=sys.stderr)
    meta_path = Path(data_dir or DATA_DIR) / "meta.json"
    if not meta_path.exists():
        raise UserError(f"no tokenizer at {str(meta_path)!r}; run `miniformer prepare` (or pass --data)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    check_same_tokenizer(ckpt, meta, str(path), str(meta_path), "point --data at the data it was trained on")
    tok = tokenizer_from_json(meta["tokenizer_json"])
    return LoadedRun(path, model, config, tok, Specials(tok.vocab_size))


def check_model_fits(path: Path, device: torch.device) -> None:
    """The checkpoint's model estimated from its config before it is built: one too big for the machine is one line,
    not an allocation failure. The weights are mapped, not read; an unreadable file is load_run_model's to report."""
    try:
        s = torch.load(Path(path) / CHECKPOINT, map_location="cpu", weights_only=True, mmap=True)
        cfg = ModelConfig.from_dict(json.loads(s["model_config"]))
    except Exception:  # noqa: BLE001 - any unreadable checkpoint: load_run_model names the remedy
        return
    check_fits(inference_bytes(cfg), device, f"the model of {str(path)!r} ({cfg.n_layer} layers of width {cfg.n_embd})",
               "use it on a machine with more memory, or re-train it smaller")


MAX_SCORE_BLOCKS = 16  # a scored text may be this many blocks long: memory grows with its length squared
MAX_ATTENTION_TOKENS = 80  # a heatmap has one labelled cell per pair: beyond this it cannot be read


def check_length(run: LoadedRun, text: str, limit: int, what: str) -> None:
    """Refuse, before any work, a text whose token count is past ``limit``."""
    n = len(run.tokenizer.encode_lossy(text)[0])
    if n > limit:
        raise UserError(f"{what} has {n} tokens; at most {limit} can be taken at once — split it or shorten it")


def encode_reporting(run: LoadedRun, text: str, what: str, give: str) -> list[int]:
    """``text``'s ids; ``what`` names it and ``give`` says how to pass another (the flag), for the one-line errors."""
    if not text:
        raise UserError(f"{what} is empty; {give}")
    ids, dropped = run.tokenizer.encode_lossy(text)
    if dropped:
        print(f"note: characters not in the vocabulary were dropped: {''.join(dropped)!r}", file=sys.stderr)
    if not ids:
        raise UserError(f"{what} has no character the model knows; {give}, in the training corpus' alphabet")
    return ids


def generate(run: LoadedRun, prompt: str, tokens: int, temperature: float, top_k: int | None, seed: int) -> str:
    if not run.objective.left_to_right:
        raise UserError(f"{run.path} is a {run.objective.name} model: it does not generate left to right; use `score`")
    T = run.model.cfg.block_size
    check_length(run, prompt, MAX_SCORE_BLOCKS * T, "the prompt")  # memory grows with its length squared
    if prompt in ("", "\n") and not run.tokenizer.encode_lossy("\n")[0]:
        raise UserError("the default prompt, a line break, is not in this model's vocabulary (its corpus has no line "
                        "breaks); pass a prompt with --prompt")
    ids = encode_reporting(run, prompt or "\n", "the prompt", "pass one with --prompt")
    if POSITIONS[run.model.cfg.pos].undefined_past_block and len(ids) + tokens > T:
        raise UserError(
            f"learned absolute positions stop at block_size={T}: prompt + --tokens must be <= {T} "
            f"(got {len(ids) + tokens}); rope/alibi/t5/sinusoidal/none runs can go further"
        )
    device = next(run.model.parameters()).device
    g = torch.Generator(device=device).manual_seed(seed)
    # A prefix LM reads the prompt as its bidirectional prefix, as in training.
    out = run.model.generate(
        torch.tensor([ids], device=device),
        tokens,
        temperature,
        top_k,
        generator=g,
        allowed_vocab=run.tokenizer.vocab_size,
        prefix_len=run.objective.prompt_prefix(len(ids)),
    )
    return run.tokenizer.decode(out[0].tolist())


@torch.no_grad()
def compare(run: LoadedRun, a: str, b: str) -> str:
    """Which of two sentences the model finds likelier, in total nats: the minimal-pair probe for your own pair
    ("我打你" vs "你打我"). Totals compare fairly when both hold the same tokens in another order."""
    ra, rb = score(run, a), score(run, b)
    total_a, total_b = (sum(t["loss"] for t in r["tokens"]) for r in (ra, rb))
    if abs(total_a - total_b) < 1e-4:
        verdict = "no preference: both score the same (a model that cannot see order ties)"
    else:
        winner = "A" if total_a < total_b else "B"
        verdict = f"prefers {winner} by {abs(total_a - total_b):.3f} nats"
    note = "" if sorted(a) == sorted(b) else "\nnote: the two sentences hold different characters, so totals also " \
        "reflect what is said, not only the order"
    return (f"{ra['method']}; a total in nats is its negative: lower = likelier\n"
            f"  A {a!r}: {total_a:.3f} nats ({len(ra['tokens'])} tokens)\n"
            f"  B {b!r}: {total_b:.3f} nats ({len(rb['tokens'])} tokens)\n{verdict}{note}")


@torch.no_grad()
def score(run: LoadedRun, sentence: str) -> dict:
    """Mean loss (nats/token), perplexity and per-token losses. Left-to-right models: log p(token | left context);
    MLM / span: pseudo-log-likelihood (each position masked in turn)."""
    check_length(run, sentence, MAX_SCORE_BLOCKS * run.model.cfg.block_size, "the sentence")
    ids = encode_reporting(run, sentence, "the sentence", "give another sentence")
    if run.objective.left_to_right:
        ids = run.tokenizer.encode_lossy("\n")[0] + ids  # a line start as context for the first character
        if len(ids) < 2:  # a corpus without line breaks: a lone token has nothing to be read after
            raise UserError("the sentence is one token long and this model has no line break to read it after (its "
                            "corpus has none); give a longer sentence")
    log_probs = run.objective.sequence_log_likelihood(run.model, ids, run.specials)
    losses = (-log_probs).tolist()
    scored = ids[1:] if run.objective.left_to_right else ids
    method = run.objective.scoring
    mean = sum(losses) / len(losses)
    return {
        "text": sentence,
        "method": method,
        "mean_loss": mean,
        "perplexity": math.exp(mean),
        "tokens": [{"token": run.tokenizer.decode([t]), "loss": loss} for t, loss in zip(scored, losses)],
    }


def score_file(run: LoadedRun, lines: list[str], out: Path | None) -> list[dict]:
    for i, line in enumerate(lines, 1):  # every line checked before the first is scored
        check_length(run, line, MAX_SCORE_BLOCKS * run.model.cfg.block_size, f"line {i} of --file")
    rows = [score(run, line) for line in lines if line.strip()]
    handle = open(out, "w", newline="", encoding="utf-8") if out else sys.stdout
    w = csv.writer(handle)
    w.writerow(["text", "mean_loss", "perplexity", "tokens", "method"])
    for r in rows:
        w.writerow([r["text"], f"{r['mean_loss']:.4f}", f"{r['perplexity']:.3f}", len(r["tokens"]), r["method"]])
    if out:
        handle.close()
    return rows


@torch.no_grad()
def attention_figure(run: LoadedRun, text: str, layer: int | None, head: int | None, all_heads: bool, out: Path):
    from miniformer.study.figures import attention_heatmap, glyph_note, head_grid

    check_length(run, text, MAX_ATTENTION_TOKENS, "--text")
    ids = encode_reporting(run, text, "the text", "pass the text to draw with --text")
    cfg = run.model.cfg
    if POSITIONS[cfg.pos].undefined_past_block and len(ids) > cfg.block_size:
        raise UserError(f"learned absolute positions stop at block_size={cfg.block_size}; use a shorter text")
    mask = run.objective.reading_mask(len(ids))
    device = next(run.model.parameters()).device
    mask = None if mask is None else mask.to(device)
    weights = run.model(torch.tensor([ids], device=device), attn_mask=mask, return_weights=True)["weights"]
    weights = [w.cpu() for w in weights]
    tokens = [run.tokenizer.decode([i]) for i in ids]
    L = len(weights) - 1 if layer is None else layer
    if not 0 <= L < len(weights):
        raise UserError(f"--layer {layer} out of range: the model has {len(weights)} layers (0..{len(weights) - 1})")
    H = weights[L].size(1)
    h = head or 0
    if not all_heads and not 0 <= h < H:
        raise UserError(f"--head {head} out of range: layer {L} has {H} heads (0..{H - 1})")
    heads = range(H) if all_heads else [h]
    if Path(out).suffix == ".html":  # hoverable: query, key and weight in each cell's title
        from miniformer.runtime.files import atomic_write_text
        from miniformer.study.hovermap import attention_page

        maps = [(f"layer {L}, head {k}", weights[L][0, k].tolist()) for k in heads]
        atomic_write_text(out, attention_page(maps, tokens, f"{run.path}: attention"))
        return out
    note = glyph_note("".join(tokens))
    if note:  # one line naming the fix, rather than matplotlib's warning per missing glyph
        print(note, file=sys.stderr)
    if all_heads:
        fig = head_grid(weights[L][0].tolist(), tokens, f"{run.path}: layer {L}, all heads")
    else:
        fig = attention_heatmap(weights[L][0, h].tolist(), tokens, f"{run.path}: layer {L}, head {h}")
    fig.savefig(out, dpi=110, bbox_inches="tight")
    return out
