"""Stage `evaluate`: everything the report needs from one trained run, written to eval.json and attention.json."""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from miniformer.devices import pick_device
from miniformer.errors import UserError
from miniformer.files import write_json
from miniformer.memory import check_fits, evaluation_bytes
from miniformer.network.attention import make_causal_mask
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import IGNORE, Specials, objective_named
from miniformer.params import RunConfig
from miniformer.prepare import TokenData
from miniformer.scoring import BATCH, mean_loss, window_losses, windows
from miniformer.train import attention_entropy

ORDER_TIE = 1e-4  # nats: minimal-pair scores closer than this are a tie (float summation order, not a preference)
PER_POSITION_BINS = 32


def load_run_model(run_dir: Path, device: torch.device) -> tuple[MiniFormer, dict, dict]:
    path = Path(run_dir) / "ckpt.pt"
    if not path.exists():
        raise UserError(f"no checkpoint at {str(path)!r}; train this run first (`miniformer train`)")
    try:
        s = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001
        raise UserError(f"checkpoint {str(path)!r} is unreadable ({type(e).__name__}); re-train this run") from None
    model = MiniFormer(ModelConfig.from_dict(json.loads(s["model_config"]))).to(device)
    model.load_state_dict(s["model"])
    return model.eval(), json.loads(s["config"]), s


def training_finished(ckpt: dict, steps: int) -> bool:
    """The checkpoint reached its last step, or recorded a divergence (a result, not an interrupted run)."""
    return ckpt.get("divergence") not in (None, "null") or ckpt.get("step", 0) >= steps


def check_finished_training(ckpt: dict, run: RunConfig, run_dir: Path) -> None:
    """Evaluate only a finished training of the config asked for: a half-trained checkpoint, or one of another config
    left beside old outputs, would give a plausible number with nothing to say it is wrong."""
    name, command = f"{run.experiment}/seed{run.seed}", f"`miniformer train {run.experiment} --seed {run.seed}`"
    if ckpt.get("fingerprint") != run.fingerprint():
        raise UserError(f"run {name}: the checkpoint in {str(run_dir)!r} was trained with another config or training "
                        f"code than params.yaml gives this run; re-train it ({command}), then evaluate")
    if not training_finished(ckpt, run.train.steps):
        raise UserError(f"run {name}: its checkpoint stopped at step {ckpt.get('step')} of {run.train.steps} "
                        f"(training did not finish); finish it ({command}), then evaluate")


class Evaluator:
    def __init__(self, run: RunConfig, run_dir: Path, out_dir: Path, data_dir: Path) -> None:
        torch.set_num_threads(run.train.threads)
        self.run, self.dir = run, Path(out_dir)
        self.device = pick_device(run.train.device)
        self.data = TokenData(data_dir)
        check_fits(evaluation_bytes(run.model, run.eval.length_multiples, 0), self.device,
                   f"evaluating {run.experiment}/seed{run.seed}", "lower eval.length_multiples or model.block_size")
        self.model, _, self.ckpt = load_run_model(run_dir, self.device)
        check_finished_training(self.ckpt, run, run_dir)
        if self.ckpt["tokenizer_hash"] != self.data.meta["tokenizer_hash"]:
            raise UserError(
                f"run {str(run_dir)!r} was trained with another tokenizer than {str(data_dir)!r}; "
                "re-train it after `miniformer prepare`"
            )
        self._setup()

    @classmethod
    def for_model(cls, run: RunConfig, model: torch.nn.Module, data: TokenData) -> Evaluator:
        """An evaluator of a model already in memory (the cross-check's peer): the same code scores it."""
        ev = cls.__new__(cls)
        ev.run, ev.dir, ev.device, ev.data = run, None, torch.device("cpu"), data
        ev.model, ev.ckpt = model, {}
        ev._setup()
        return ev

    def _setup(self) -> None:
        self.per_window: dict = {}  # windows.json: per-window losses and per-item probe outcomes
        self.specials = Specials(self.data.vocab_size)
        self.objective = objective_named(self.run.train.objective)
        self.T = self.run.model.block_size
        self.tok = self.data.tokenizer

    @torch.no_grad()
    def split_loss(self, split: str, causal_override: bool = False) -> float:
        """Mean loss over every target token of a split (random masks from a fixed seed for MLM/span); the val
        split's per-window losses are kept for the report's intervals."""
        tokens = windows(
            self.data.splits[split], self.objective.window_length(self.T), self.run.eval.split_tokens or None
        )
        mask = make_causal_mask(tokens.size(1) - 1) if causal_override else None
        sums, counts = window_losses(self.model, tokens, self.objective, self.specials, self.device, mask)
        if split == "val":
            key = "val_with_causal_mask" if causal_override else "val"
            self.per_window[key] = {"sum": sums.round(4).tolist(), "count": counts.tolist()}
        return mean_loss(sums, counts)

    @torch.no_grad()
    def length_sweep(self) -> dict:
        """Causal loss and per-position loss at m × block_size, for each m (learned absolute: not applicable)."""
        out = {}
        for m in self.run.eval.length_multiples:
            L = m * self.T
            if self.run.model.pos == "learned" and L > self.T:
                out[str(m)] = {
                    "applicable": False,
                    "reason": "learned absolute positions have no vector past block_size",
                }
                continue
            if not self.objective.left_to_right:
                out[str(m)] = {"applicable": False, "reason": f"{self.objective.name} is not a left-to-right objective"}
                continue
            tokens = windows(self.data.splits["val"], L + 1, self.run.eval.max_tokens, stride=L)
            pos_sum, per_window = torch.zeros(L), []
            for i in range(0, len(tokens), max(1, BATCH // m)):
                chunk = tokens[i : i + max(1, BATCH // m)].to(self.device)
                logits = self.model(chunk[:, :-1])["logits"]
                nll = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="none")
                nll = nll.view(chunk.size(0), L).float().cpu()
                pos_sum += nll.sum(0)
                per_window.extend(nll.mean(1).tolist())
            self.per_window.setdefault("lengths", {})[str(m)] = [round(v, 4) for v in per_window]
            per_pos = (pos_sum / len(tokens)).tolist()
            bins = np.array_split(
                np.array(per_pos), min(PER_POSITION_BINS * m // max(self.run.eval.length_multiples), L)
            )
            out[str(m)] = {
                "applicable": True,
                "loss": float(np.mean(per_pos)),
                "loss_beyond_block": float(np.mean(per_pos[self.T :])) if L > self.T else None,
                "per_position": [float(b.mean()) for b in bins],
                "windows": len(tokens),
            }
        return out

    @torch.no_grad()
    def attention_on_probe(self) -> dict:
        ids, dropped = self.tok.encode_lossy(self.run.eval.probe_line)
        if len(ids) < 2:  # the probe line is in another script than the corpus: draw a held-out line instead
            lines = self._test_lines() or [self.tok.decode(self.data.splits["test"][: self.T].tolist())]
            ids, dropped = self.tok.encode_lossy(lines[0])
        ids = ids[: self.T]
        x = torch.tensor([ids], device=self.device)
        mask = self.objective.reading_mask(len(ids), self.device)  # each model drawn as it reads
        weights = self.model(x, attn_mask=mask, return_weights=True)["weights"]
        w = torch.stack([wl[0] for wl in weights]).float().cpu()  # (L, H, T, T)
        upper = w.triu(1)
        return {
            "tokens": [self.tok.decode([i]) for i in ids],
            "dropped_characters": dropped,
            "weights": w.tolist(),
            "upper_triangle_max": float(upper.abs().max()),
            "upper_triangle_zero": bool((upper == 0).all()),
        }

    @torch.no_grad()
    def head_stats(self) -> dict:
        """Entropy per layer and head diversity: mean pairwise Jensen-Shannon divergence between heads' maps."""
        tokens = windows(self.data.splits["val"], self.objective.window_length(self.T), 8 * self.T)[:8]
        b = self.objective.batch(tokens, self.specials, torch.Generator().manual_seed(0))
        mask = None if b.mask is None else b.mask.to(self.device)
        weights = self.model(b.x.to(self.device), attn_mask=mask, return_weights=True)["weights"]
        diversities = []
        for w in weights:  # (B, H, T, T)
            H = w.size(1)
            if H < 2:
                continue
            pairs = [(i, j) for i in range(H) for j in range(i + 1, H)]
            diversities.append(float(np.mean([js_divergence(w[:, i], w[:, j]) for i, j in pairs])))
        return {
            "attention_entropy": attention_entropy(weights),
            "head_diversity": float(np.mean(diversities)) if diversities else None,
        }

    @torch.no_grad()
    def order_sensitivity(self) -> dict:
        """Loss with the context shuffled minus loss with it intact ("我打你" vs "你打我").

        Left-to-right objectives: the first 3/4 of each window is shuffled and the loss is taken on the last quarter.
        MLM / span: the whole window is shuffled (masks move with their tokens) and the loss on masked tokens compared.
        """
        n = self.run.eval.order_windows
        tokens = windows(self.data.splits["val"], self.objective.window_length(self.T))[:n]
        rng = torch.Generator().manual_seed(0)
        shuffled = tokens.clone()
        if self.objective.left_to_right:
            cut = 3 * self.T // 4
            for row in shuffled:
                row[:cut] = row[:cut][torch.randperm(cut, generator=rng)]
            intact = self._tail_loss(tokens, cut)
            broken = self._tail_loss(shuffled, cut)
        else:
            perm = torch.randperm(tokens.size(1), generator=rng)
            intact = self._masked_loss(tokens, None)
            broken = self._masked_loss(tokens, perm)
        return {"intact": intact, "shuffled": broken, "delta": broken - intact}

    def _tail_loss(self, tokens: Tensor, cut: int) -> float:
        x, y = tokens[:, :-1].to(self.device), tokens[:, 1:].to(self.device)
        logits = self.model(x, attn_mask=make_causal_mask(x.size(1), self.device))["logits"]
        return float(F.cross_entropy(logits[:, cut:].flatten(0, 1), y[:, cut:].flatten()))

    def _masked_loss(self, tokens: Tensor, perm: Tensor | None) -> float:
        if perm is not None and self.objective.name == "span":
            return float("nan")  # not defined: shuffling would move sentinels between input and targets (-> null)
        b = self.objective.batch(tokens, self.specials, torch.Generator().manual_seed(0))
        x, y, mask = b.x, b.y, b.mask
        if perm is not None:
            x, y = x[:, perm], y[:, perm]
        logits = self.model(x.to(self.device), attn_mask=None if mask is None else mask.to(self.device))["logits"]
        return float(F.cross_entropy(logits.flatten(0, 1), y.to(self.device).flatten(), ignore_index=IGNORE))

    @torch.no_grad()
    def uniformity(self) -> float:
        """Mean pairwise cosine similarity of the last block's token states within a sequence (Dong 2021: -> 1)."""
        tokens = windows(self.data.splits["val"], self.T + 1)[:8]
        h = self.model(tokens[:, :-1].to(self.device), return_hidden=True)["hidden"].float()
        h = F.normalize(h, dim=-1)
        sim = h @ h.transpose(1, 2)
        T = sim.size(1)
        off_diag = sim.sum((1, 2)) - sim.diagonal(dim1=1, dim2=2).sum(1)
        return float((off_diag / (T * (T - 1))).mean())

    @functools.cached_property
    def held_out_lines(self) -> list[str]:
        """Lines of the test split the probes read: verse, not speaker names (which end with ':'), at least
        min(20, block_size/2) characters."""
        text = self.tok.decode(self.data.splits["test"].tolist())
        shortest = min(20, self.T // 2)
        return [ln for ln in text.split("\n") if len(ln) >= shortest and not ln.endswith(":")]

    def probe_items(self) -> list[tuple[list[int], int]]:
        """Held-out lines, each with one hidden position: the same items for every run."""
        lines = [ln[: self.T - 4] for ln in self.held_out_lines]  # cut to fit a tiny model's block
        rng = random.Random(0)
        rng.shuffle(lines)
        out = []
        for ln in lines:
            ids, dropped = self.tok.encode_lossy(ln)
            if not dropped and len(ids) >= 8:
                out.append((ids, rng.randrange(2, len(ids) - 2)))
            if len(out) == self.run.eval.probe_items:
                break
        return out

    @torch.no_grad()
    def shared_probe(self) -> dict:
        """One score every objective can be given: recover a hidden token of a held-out line; plus continuation loss.

        Per-item outcomes go to windows.json, so the report can put an interval on the accuracy and compare two runs
        item by item.
        """
        items = self.probe_items()
        outcomes, in_candidates, cont_losses = [], [], []
        for ids, i in items:
            pred, proposed = self.objective.recover(self.model, ids, i, self.specials)
            outcomes.append(int(pred == ids[i]))
            in_candidates.append(proposed)
            cont = self._continuation_loss(ids)
            if cont is not None:
                cont_losses.append(cont)
        self.per_window["probe"] = outcomes
        known = [c for c in in_candidates if c is not None]
        return {
            "recovery_accuracy": float(np.mean(outcomes)) if outcomes else None,
            "recovery_items": len(items),
            "candidate_recall": float(np.mean(known)) if known else None,
            "continuation_loss": float(np.mean(cont_losses)) if cont_losses else None,
            "continuation_note": None if cont_losses else f"not defined for the {self.objective.name} objective",
        }

    def order_pairs(self) -> list[tuple[list[int], list[int]]]:
        """Minimal pairs from held-out test lines: the line, and the line with two of its words swapped in place (two
        characters, for a text written without spaces). Same tokens, different order; fixed seed, same for every run."""
        return [(self._ids(a), self._ids(b)) for a, b in swapped_lines(self._test_lines(), self.run.eval.order_pairs)
                if self._ids(a) and self._ids(b)]

    def _ids(self, text: str) -> list[int]:
        ids, dropped = self.tok.encode_lossy(text)
        return [] if dropped or len(ids) > self.T or len(ids) < 4 else ids

    def _test_lines(self) -> list[str]:
        """Held-out lines that fit the block; if too few do (a tiny model), longer lines cut to the block follow."""
        lines = self.held_out_lines
        whole = [ln for ln in lines if len(ln) <= self.T]
        return whole if len(whole) >= self.run.eval.order_pairs else whole + [ln[: self.T] for ln in lines
                                                                               if len(ln) > self.T]

    @torch.no_grad()
    def minimal_pairs(self) -> dict:
        """How often the model scores the true order above the swapped one (ties count half): sequence log-likelihood
        for left-to-right objectives, pseudo-log-likelihood (each token hidden in turn, as in training) for MLM and
        span. Scores within ORDER_TIE nats are a tie: a bidirectional model without positions gives both orders the
        same score exactly, up to float summation order."""
        outcomes = []
        for true, swapped in self.order_pairs():
            a, b = self.sequence_score(true), self.sequence_score(swapped)
            outcomes.append(0.5 if abs(a - b) < ORDER_TIE else float(a > b))
        self.per_window["pairs"] = outcomes
        return {
            "pairs": len(outcomes),
            "true_order_preferred": float(np.mean(outcomes)) if outcomes else None,
            "ties": int(sum(o == 0.5 for o in outcomes)),
            "scoring": self.objective.scoring,
        }

    def sequence_score(self, ids: list[int]) -> float:
        """Log-likelihood of a token sequence in the objective's own reading (see minimal_pairs)."""
        return float(self.objective.sequence_log_likelihood(self.model, ids, self.specials).sum())

    def _continuation_loss(self, ids: list[int]) -> float | None:
        if not self.objective.left_to_right:
            return None
        half = len(ids) // 2
        x = torch.tensor([ids[:-1]], device=self.device)
        y = torch.tensor(ids[1:], device=self.device)
        mask = self.objective.context_mask(len(ids) - 1, half, self.device)
        logits = self.model(x, attn_mask=mask)["logits"][0]
        return float(F.cross_entropy(logits[half - 1 :], y[half - 1 :]))

    @torch.no_grad()
    def generations(self) -> dict:
        out = {}
        if not self.objective.left_to_right:
            return {"note": f"{self.objective.name} models do not generate left to right; see the recovery samples"}
        prompt, prefix_len = self.objective.generation_prompt(self.tok, self.data.splits["val"], self.T, self.run.seed)
        for m in self.run.eval.gen_multiples:
            n = m * self.T
            g = torch.Generator(device=self.device).manual_seed(self.run.seed)
            try:
                ids = self.model.generate(
                    torch.tensor([prompt], device=self.device),
                    n,
                    self.run.eval.temperature,
                    self.run.eval.top_k,
                    generator=g,
                    allowed_vocab=self.tok.vocab_size,
                    prefix_len=prefix_len,
                )
            except ValueError as e:  # learned absolute past block_size
                out[str(m)] = {"applicable": False, "reason": str(e).split(":")[0]}
                continue
            text = self.tok.decode(ids[0, len(prompt) :].tolist())
            out[str(m)] = {"applicable": True, "text": text, **text_stats(text)}
            if prefix_len is not None:
                out[str(m)]["prompt"] = self.tok.decode(prompt)
        return out

    def run_all(self) -> dict:
        diverged = json.loads(self.ckpt["divergence"]) if self.ckpt.get("divergence") else None
        result = {
            "fingerprint": self.ckpt.get("fingerprint"),  # the training evaluated (aggregate checks it)
            "objective": self.objective.name,
            "diverged": diverged is not None,
            "val_loss": self.split_loss("val"),
            "test_loss": self.split_loss("test"),
        }
        if self.objective.name == "causal" and not self.run.model.causal:
            result["val_loss_with_causal_mask"] = self.split_loss("val", causal_override=True)
        result["lengths"] = self.length_sweep()
        result.update(self.head_stats())
        result["order_sensitivity"] = self.order_sensitivity()
        result["minimal_pairs"] = self.minimal_pairs()
        result["hidden_uniformity"] = self.uniformity()
        result["probe"] = self.shared_probe()
        attention = self.attention_on_probe()
        result["attention_upper_triangle_zero"] = attention["upper_triangle_zero"]
        result["attention_upper_triangle_max"] = attention["upper_triangle_max"]
        gens = self.generations()
        write_json(self.dir / "attention.json", attention)
        write_json(self.dir / "generations.json", gens)
        result["generation_stats"] = {
            k: {s: v[s] for s in ("distinct_2", "repetition")}
            for k, v in gens.items()
            if isinstance(v, dict) and v.get("applicable")
        }
        write_json(self.dir / "windows.json", self.per_window)
        write_json(self.dir / "eval.json", result)
        return result


def swapped_lines(lines: list[str], count: int, seed: int = 0) -> list[tuple[str, str]]:
    """(line, the line with two different words swapped in place) for up to ``count`` lines; a line with fewer than
    three words (a text without spaces) swaps two different characters instead. Whitespace stays where it was."""
    rng = random.Random(seed)
    order = list(range(len(lines)))
    rng.shuffle(order)
    pairs = []
    for k in order:
        line = lines[k]
        parts = re.split(r"(\s+)", line.strip())
        units = parts[::2] if len(parts[::2]) >= 3 else list(line.strip())
        joiner = parts[1::2] if len(parts[::2]) >= 3 else [""] * (len(units) - 1)
        candidates = [(i, j) for i in range(len(units)) for j in range(i + 1, len(units)) if units[i] != units[j]]
        if not candidates:
            continue
        i, j = candidates[rng.randrange(len(candidates))]
        units[i], units[j] = units[j], units[i]
        swapped = units[0] + "".join(sep + u for sep, u in zip(joiner, units[1:]))
        pairs.append((line.strip(), swapped))
        if len(pairs) == count:
            break
    return pairs


def js_divergence(p: Tensor, q: Tensor) -> float:
    """Jensen-Shannon divergence (nats) between two stacks of attention distributions over the last dim."""
    m = 0.5 * (p + q)

    def kl(a: Tensor, b: Tensor) -> Tensor:
        return (a * (a.clamp_min(1e-12).log() - b.clamp_min(1e-12).log())).sum(-1)

    return float((0.5 * kl(p, m) + 0.5 * kl(q, m)).mean())


def text_stats(text: str) -> dict:
    """distinct-2 over words (diversity) and the share of repeated 8-character n-grams (degeneration)."""
    words = text.split()
    bigrams = list(zip(words, words[1:]))
    grams = [text[i : i + 8] for i in range(max(0, len(text) - 7))]
    return {
        "distinct_2": len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
        "repetition": 1 - len(set(grams)) / len(grams) if grams else 0.0,
    }


def evaluate(run: RunConfig, run_dir: Path, out_dir: Path, data_dir: Path) -> dict:
    return Evaluator(run, run_dir, out_dir, data_dir).run_all()
