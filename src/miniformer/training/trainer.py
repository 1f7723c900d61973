"""The training loop of one experiment × seed: resumable, logged every N steps, divergence recorded rather than
raised. Its state (weights, optimizer, generators, logs) lives in one checkpoint (training/folder.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from miniformer.devices import pick_device
from miniformer.network.given import GivenCode
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import Specials, objective_named
from miniformer.params import RunConfig
from miniformer.runtime.batches import sample_windows
from miniformer.runtime.checkpoints import fingerprint
from miniformer.runtime.memory import check_fits, training_bytes
from miniformer.runtime.optim import make_optimizer, set_lr, update
from miniformer.runtime.provenance import combine
from miniformer.runtime.schedule import lr_at
from miniformer.runtime.scoring import attention_entropy, curve_windows, mean_loss, window_losses
from miniformer.runtime.tokendata import TokenData
from miniformer.training.cost import TrainingCost
from miniformer.training.demos import demo
from miniformer.training.divergence import divergence_at
from miniformer.training.folder import RunFolder
from miniformer.training.logs import StepMirrors, make_bar, peak_memory_mb

# What a checkpoint carries so that a resumed run keeps its logs whole: step-log rows, demos, val-curve points, and
# the train loss of every step (the spike detector reads it).
LOGS = ("rows", "samples", "curve", "losses")


def model_config(run: RunConfig, base_vocab: int) -> ModelConfig:
    """The run's model with the vocabulary it trains on: the tokenizer's plus the objectives' special tokens."""
    return dataclasses.replace(run.model, vocab_size=Specials(base_vocab).model_vocab)


def build_model(run: RunConfig, base_vocab: int) -> tuple[MiniFormer, Specials]:
    return MiniFormer(model_config(run, base_vocab)), Specials(base_vocab)


class Trainer:
    def __init__(self, run: RunConfig, data_dir: Path, out_dir: Path, given: GivenCode | None = None) -> None:
        self.run, self.t, self.folder = run, run.train, RunFolder(out_dir)
        self.name = f"{run.experiment}/seed{run.seed}"
        torch.set_num_threads(self.t.threads)
        self.device = pick_device(self.t.device)
        self.data = TokenData(data_dir)
        self.data.check_made_from(run.data, data_dir)
        # estimated from the config: a model too big for the machine is refused before any of it is allocated
        check_fits(training_bytes(model_config(run, self.data.vocab_size), self.t.batch_size), self.device,
                   f"training {self.name}", "lower train.batch_size or model.block_size / n_embd / n_layer")
        self.objective = objective_named(self.t.objective)
        self.window = self.objective.window_length(run.model.block_size)
        # the val loss on the same spread-out windows at every eval_every steps, kept per window (see scoring)
        self.curve_windows = curve_windows(self.data.splits["val"], self.window, self.t.curve_tokens)
        torch.manual_seed(run.seed)
        self.model, self.specials = build_model(run, self.data.vocab_size)
        self.model.use_given(given)  # a student's code builds its layers before the optimizer sees them
        self.model.to(self.device)
        self.opt = make_optimizer(self.model, self.t, self.device)
        self.batch_gen = torch.Generator().manual_seed(run.seed)  # which windows and masks: part of resume state
        self.step, self.first_loss, self.divergence = 0, None, None
        self.logs: dict[str, list] = {k: [] for k in LOGS}  # step log rows, demos, val-loss curve points
        self.cost = TrainingCost(self.device)
        self.fingerprint = fingerprint(run, self.data.data_hash)
        if given is not None:  # another code's training: never resumed as, or read as, the package's
            self.fingerprint = combine(self.fingerprint, given.fingerprint())
        self.autocast = self.device.type == "cuda" and self.t.bf16

    def state(self) -> dict:
        return {
            "model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "step": self.step, "first_loss":
            self.first_loss, "batch_gen": self.batch_gen.get_state(), "torch_rng": torch.get_rng_state(), "fingerprint":
            self.fingerprint, "config": json.dumps(self.run.to_dict()), "data_content": self.data.data_hash,
            "model_config": json.dumps(self.model.cfg.to_dict()), "tokenizer_hash": self.data.meta["tokenizer_hash"],
            **{k: json.dumps(v) for k, v in self.logs.items()}, "divergence": json.dumps(self.divergence),
            **self.cost.state(self.step),  # seconds and memory summed over resumes (training/cost.py)
        }

    def restore(self, s: dict) -> None:
        self.model.load_state_dict(s["model"])
        self.opt.load_state_dict(s["optimizer"])
        self.step, self.first_loss = s["step"], s["first_loss"]
        self.batch_gen.set_state(s["batch_gen"])
        torch.set_rng_state(s["torch_rng"])
        self.logs = {k: json.loads(s.get(k, "[]")) for k in LOGS}
        self.divergence = json.loads(s["divergence"])
        self.cost.restore(s)

    def batch(self, split: str, g: torch.Generator):
        tokens = sample_windows(self.data.splits[split], self.window, self.t.batch_size, g)
        b = self.objective.batch(tokens, self.specials, g)
        return b.x.to(self.device), b.y.to(self.device), None if b.mask is None else b.mask.to(self.device)

    def forward_loss(self, x: Tensor, y: Tensor, mask: Tensor | None) -> Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            return self.model(x, y, attn_mask=mask)["loss"]

    def train_step(self) -> tuple[float, float]:
        set_lr(self.opt, lr_at(self.step, self.t))
        x, y, mask = self.batch("train", self.batch_gen)
        return update(self.model, self.opt, self.forward_loss(x, y, mask), self.t.grad_clip)

    @torch.no_grad()
    def estimate_val(self) -> tuple[float, list[float]]:
        """Val loss on the same val_batches every time (fixed generator), and attention entropy on the first."""
        self.model.eval()
        g = torch.Generator().manual_seed(1234)
        losses, entropy = [], []
        for i in range(self.t.val_batches):
            x, y, mask = self.batch("val", g)
            losses.append(float(self.forward_loss(x, y, mask)))
            if i == 0:
                few = mask[:4] if mask is not None and mask.dim() == 3 else mask  # (T,T) masks are shared by the batch
                entropy = attention_entropy(self.model(x[:4], attn_mask=few, return_weights=True)["weights"])
        self.model.train()
        return sum(losses) / len(losses), entropy

    def curve_point(self) -> dict:
        """Val loss per window on the fixed curve windows: the report follows each effect over training with it."""
        self.model.eval()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            sums, counts = window_losses(self.model, self.curve_windows, self.objective, self.specials, self.device)
        self.model.train()
        losses = sums / np.maximum(counts, 1)
        return {"step": self.step, "val_loss": mean_loss(sums, counts), "windows": [round(float(v), 5) for v in losses]}

    def log_row(self, loss: float, grad_norm: float, since: tuple[float, int]) -> dict:
        """The step log's row; throughput counts the tokens trained since the last row over the time since then."""
        val, entropy = self.estimate_val()
        seconds = max(time.perf_counter() - since[0], 1e-9)
        tokens_per_s = self.t.batch_size * self.run.model.block_size * (self.step - since[1]) / seconds
        row = {"step": self.step, "train_loss": loss, "val_loss": val, "lr": lr_at(self.step - 1, self.t),
               "grad_norm": grad_norm, "tokens_per_s": tokens_per_s, "peak_mem_mb": peak_memory_mb(self.device)}
        row.update({f"entropy_l{i}": e for i, e in enumerate(entropy)})
        self.logs["rows"].append(row)
        return row

    def due(self, every: int) -> bool:
        return self.step % every == 0 or self.step == self.t.steps

    def loop(self, progress: bool, tensorboard: Path | None = None) -> int:
        """Train to the last step or a divergence (step log to ``tensorboard`` too); returns the last saved step."""
        live = StepMirrors(self.folder.out, self.logs["rows"], tensorboard)
        bar = make_bar(self.t.steps, self.step, progress, self.name)
        self.model.train()
        last_log, last_good = (time.perf_counter(), self.step), self.step
        while self.step < self.t.steps and self.divergence is None:
            t0 = time.perf_counter()
            loss, grad_norm = self.train_step()
            self.cost.seconds += time.perf_counter() - t0
            self.first_loss = loss if self.first_loss is None else self.first_loss
            self.logs["losses"].append(round(loss, 5))
            self.divergence = divergence_at(self.step, loss, grad_norm, self.first_loss, self.t.diverge_factor)
            if self.divergence:
                break
            self.step += 1
            bar.update(1)
            if self.due(self.t.log_every):
                row = self.log_row(loss, grad_norm, last_log)
                live.log(row)
                bar.set_postfix_str(f"train {loss:.3f} val {row['val_loss']:.3f}")
                if not progress:
                    print(f"[{self.name}] step {self.step}/{self.t.steps} train {loss:.4f} val {row['val_loss']:.4f} "
                          f"{row['tokens_per_s']:.0f} tok/s", file=sys.stderr)
                last_log = (time.perf_counter(), self.step)
            if self.due(self.t.sample_every):
                self.logs["samples"].append(demo(self.model, self.objective, self.data, self.run, self.step,
                                                 self.device))
            if self.due(self.t.eval_every):
                self.logs["curve"].append(self.curve_point())
            if self.due(self.t.ckpt_every):
                self.folder.save(self.state())
                last_good = self.step
        bar.close()
        return last_good

    def fit(self, resume: str, progress: bool, tensorboard: Path | None = None) -> None:
        """Resume or start fresh, train, and record a divergence in the checkpoint it falls back to."""
        s = self.folder.resumable(self.fingerprint, resume, self.device)
        if s is not None:
            self.restore(s)
        else:
            self.folder.clear_derived()
            self.folder.save(self.state())  # step 0: a valid checkpoint from the start (divergence falls back to it)
        last_good = self.loop(progress, tensorboard)
        if self.divergence:
            print(f"[{self.name}] diverged at step {self.divergence['step']}: {self.divergence['reason']}; keeping the "
                  f"checkpoint of step {last_good}", file=sys.stderr)
            self.folder.record_divergence(self.divergence, self.logs, self.cost.state(self.step))
