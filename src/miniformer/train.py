"""Stage `train`: one experiment × seed. Resumable, logged every N steps, divergence recorded rather than raised.

Outputs in the run folder: log.tsv (step log), dvclive/ (the same series for DVC), samples.jsonl, ckpt.pt,
metrics.json (deterministic: same params + seed on CPU -> same file) and perf.json (timings, which are not).
"""

from __future__ import annotations

import csv
import fcntl
import json
import math
import os
import resource
import shutil
import sys
import time
from io import StringIO
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from miniformer.devices import pick_device
from miniformer.errors import UserError
from miniformer.files import atomic_torch_save, atomic_write_text, write_json
from miniformer.memory import check_fits, training_bytes
from miniformer.network.flops import count_params
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import Specials, objective_named
from miniformer.params import RunConfig
from miniformer.prepare import TokenData
from miniformer.scoring import mean_loss, spread_windows, window_losses

LOG_FIELDS = ["step", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "peak_mem_mb"]
# What a training writes beside its checkpoint: removed when a checkpoint of another config is set aside, so a run
# folder never holds one training's step log beside another's checkpoint.
DERIVED_FILES = ("metrics.json", "log.tsv", "samples.jsonl", "curve.json", "perf.json")
LOCK_FILE = ".train.lock"


def lr_at(step: int, cfg) -> float:
    """Linear warm-up to lr, then cosine decay to min_lr at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(1.0, progress)))


def sample_windows(data: np.ndarray, length: int, batch: int, g: torch.Generator) -> Tensor:
    starts = torch.randint(0, len(data) - length, (batch,), generator=g).tolist()
    return torch.from_numpy(np.stack([data[s : s + length].astype(np.int64) for s in starts]))


def build_model(run: RunConfig, base_vocab: int) -> tuple[MiniFormer, Specials]:
    specials = Specials(base_vocab)
    cfg = ModelConfig.from_dict({**run.model.to_dict(), "vocab_size": specials.model_vocab})
    return MiniFormer(cfg), specials


def make_optimizer(model: MiniFormer, run: RunConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not norms, biases), as one fused kernel per parameter.

    Fused on CPU too: several times faster than the default per-tensor loop (benchmarks/RESULTS.md).
    """
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": run.train.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    t = run.train
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=device.type in ("cpu", "cuda"))


def attention_entropy(weights: list[Tensor]) -> list[float]:
    """Mean entropy (nats) of each layer's attention distributions, over heads, queries and the batch."""
    return [float(-(w * w.clamp_min(1e-12).log()).sum(-1).mean()) for w in weights]


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    if device.type == "mps":
        return torch.mps.driver_allocated_memory() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


class Trainer:
    def __init__(self, run: RunConfig, data_dir: Path, out_dir: Path) -> None:
        self.run, self.out = run, Path(out_dir)
        self.t = run.train
        torch.set_num_threads(self.t.threads)
        self.device = pick_device(self.t.device)
        self.data = TokenData(data_dir)
        self.data.check_made_from(run.data, data_dir)
        torch.manual_seed(run.seed)
        self.model, self.specials = build_model(run, self.data.vocab_size)
        check_fits(training_bytes(self.model.cfg, self.t.batch_size, count_params(self.model)), self.device,
                   f"training {run.experiment}/seed{run.seed}",
                   "lower train.batch_size or model.block_size / n_embd / n_layer")
        self.model.to(self.device)
        self.opt = make_optimizer(self.model, run, self.device)
        self.batch_gen = torch.Generator().manual_seed(run.seed)  # which windows and masks: part of resume state
        self.objective = objective_named(self.t.objective)
        self.window = self.objective.window_length(run.model.block_size)
        self.step = 0
        self.first_loss: float | None = None
        self.divergence: dict | None = None
        self.rows: list[dict] = []
        self.samples: list[dict] = []
        # the val loss on the same spread-out windows at every eval_every steps, kept per window (see scoring)
        self.curve: list[dict] = []
        n_windows = max(1, self.t.curve_tokens // self.window)
        self.curve_windows = spread_windows(self.data.splits["val"], self.window, n_windows)
        self.train_seconds = 0.0
        self.autocast = self.device.type == "cuda" and self.t.bf16

    # --- state -------------------------------------------------------------------------------------------------------

    @property
    def ckpt_path(self) -> Path:
        return self.out / "ckpt.pt"

    def state(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "step": self.step,
            "first_loss": self.first_loss,
            "batch_gen": self.batch_gen.get_state(),
            "torch_rng": torch.get_rng_state(),
            "fingerprint": self.run.fingerprint(),
            "config": json.dumps(self.run.to_dict()),
            "model_config": json.dumps(self.model.cfg.to_dict()),
            "tokenizer_hash": self.data.meta["tokenizer_hash"],
            "rows": json.dumps(self.rows),
            "samples": json.dumps(self.samples),
            "curve": json.dumps(self.curve),
            "divergence": json.dumps(self.divergence),
        }

    def save(self) -> None:
        atomic_torch_save(self.state(), self.ckpt_path)

    def resume(self, mode: str) -> bool:
        """mode 'auto': resume a checkpoint of this config, set aside one of another config and start fresh;
        'require': a checkpoint of another config is an error; 'never': start fresh."""
        if mode == "never" or not self.ckpt_path.exists():
            return False
        try:
            s = torch.load(self.ckpt_path, map_location=self.device, weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable file is the same user problem
            raise UserError(
                f"checkpoint {str(self.ckpt_path)!r} is unreadable ({type(e).__name__}); "
                "delete it to train from scratch"
            ) from None
        if s.get("fingerprint") != self.run.fingerprint():
            if mode == "auto":
                self.set_aside(str(s.get("fingerprint")))
                return False
            raise UserError(
                f"checkpoint {str(self.ckpt_path)!r} was trained with a different config or training code; delete "
                "it, or restore the params and code it was made with, to resume"
            )
        self.model.load_state_dict(s["model"])
        self.opt.load_state_dict(s["optimizer"])
        self.step, self.first_loss = s["step"], s["first_loss"]
        self.batch_gen.set_state(s["batch_gen"])
        torch.set_rng_state(s["torch_rng"])
        self.rows = json.loads(s["rows"])
        self.samples, self.divergence = json.loads(s["samples"]), json.loads(s["divergence"])
        self.curve = json.loads(s.get("curve", "[]"))
        return True

    def set_aside(self, old_fingerprint: str) -> None:
        """Keep a checkpoint of another config under its own name (one per fingerprint, so a second change does not
        delete the first original) and remove what that training wrote beside it."""
        stale = self.ckpt_path.with_name(f"ckpt.stale-{old_fingerprint}.pt")
        os.replace(self.ckpt_path, stale)  # its derived files go with the fresh start (Trainer._fit)
        print(f"checkpoint {self.ckpt_path} is from another config or training code: moved to {stale.name} (with "
              "any set aside earlier), its step log and metrics removed; training from scratch", file=sys.stderr)

    def clear_derived(self) -> None:
        """Remove what an earlier training wrote beside its checkpoint: a fresh start must not sit beside them."""
        for name in DERIVED_FILES:
            (self.out / name).unlink(missing_ok=True)
        shutil.rmtree(self.out / "dvclive", ignore_errors=True)

    # --- one step ----------------------------------------------------------------------------------------------------

    def batch(self, split: str, g: torch.Generator):
        tokens = sample_windows(self.data.splits[split], self.window, self.t.batch_size, g)
        b = self.objective.batch(tokens, self.specials, g)
        to = self.device
        return b.x.to(to), b.y.to(to), None if b.mask is None else b.mask.to(to)

    def forward_loss(self, x: Tensor, y: Tensor, mask: Tensor | None) -> Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            return self.model(x, y, attn_mask=mask)["loss"]

    def train_step(self) -> tuple[float, float]:
        lr = lr_at(self.step, self.t)
        for group in self.opt.param_groups:
            group["lr"] = lr
        x, y, mask = self.batch("train", self.batch_gen)
        loss = self.forward_loss(x, y, mask)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t.grad_clip))
        loss_value = float(loss.detach())
        if math.isfinite(loss_value) and math.isfinite(grad_norm):
            self.opt.step()
        return loss_value, grad_norm

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
                out = self.model(x[:4], attn_mask=few, return_weights=True)
                entropy = attention_entropy(out["weights"])
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

    @torch.no_grad()
    def sample(self) -> dict:
        """A demo in the objective's training format, on a fixed seed: causal LM generates from a line break; prefix
        LM continues a held-out prompt read as its bidirectional prefix; MLM fills [MASK]s; span fills sentinels."""
        self.model.eval()
        g = torch.Generator(device=self.device).manual_seed(self.run.seed)
        tok, T = self.data.tokenizer, self.run.model.block_size
        if self.objective.left_to_right:
            prompt, prefix_len = self.objective.generation_prompt(tok, self.data.splits["val"], T, self.run.seed)
            ids = self.model.generate(
                torch.tensor([prompt], device=self.device),
                self.t.sample_tokens,
                temperature=0.8,
                top_k=20,
                generator=g,
                window=T,
                allowed_vocab=tok.vocab_size,
                prefix_len=prefix_len,
            )
            out = {"step": self.step, "kind": "generation", "text": tok.decode(ids[0, len(prompt) :].tolist())}
            if prefix_len is not None:
                out["prompt"] = tok.decode(prompt)
        else:
            out = {"step": self.step, "kind": "recovery", **self.recovery_demo()}
        self.model.train()
        return out

    def recovery_demo(self) -> dict:
        """Hide characters of one held-out window the way training does and show the model's fill-in ('_' = hidden)."""
        tok, specials = self.data.tokenizer, self.specials
        cpu_g = torch.Generator().manual_seed(self.run.seed)
        tokens = sample_windows(self.data.splits["val"], self.window, 1, cpu_g)
        seq = tokens[0].tolist()
        masked, filled = self.objective.fill_in(self.model, seq, specials, cpu_g)

        def show(ids: list[int]) -> str:  # a hidden position has no character: draw it as '_'
            return "".join("_" if i == specials.mask_id else tok.decode([i]) for i in ids)

        return {"text": show(filled), "masked": show(masked), "original": tok.decode(seq),
                "hidden_as": self.objective.hidden_as}

    # --- the loop ----------------------------------------------------------------------------------------------------

    def check_divergence(self, loss: float, grad_norm: float) -> dict | None:
        if not math.isfinite(loss):
            return {"step": self.step, "reason": f"non-finite loss ({loss})"}
        if not math.isfinite(grad_norm):
            return {"step": self.step, "reason": f"non-finite gradient norm ({grad_norm})"}
        if self.first_loss is not None and loss > self.t.diverge_factor * self.first_loss:
            return {
                "step": self.step,
                "reason": f"loss blow-up: {loss:.3f} > {self.t.diverge_factor} x first loss {self.first_loss:.3f}",
            }
        return None

    def fit(self, resume: str, progress: bool) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        with run_lock(self.out, f"{self.run.experiment}/seed{self.run.seed}"):
            return self._fit(resume, progress)

    def _fit(self, resume: str, progress: bool) -> dict:
        resumed = self.resume(resume)
        if not resumed:
            self.clear_derived()
            self.save()  # step 0: a valid checkpoint exists from the start (divergence falls back to the last good one)
        live = DvcLiveMirror(self.out / "dvclive", self.rows)
        bar = make_bar(self.t.steps, self.step, progress, f"{self.run.experiment}/seed{self.run.seed}")
        self.model.train()
        tokens_per_step = self.t.batch_size * self.run.model.block_size
        last_log_time, last_log_step = time.perf_counter(), self.step
        last_good = self.step
        while self.step < self.t.steps and self.divergence is None:
            t0 = time.perf_counter()
            loss, grad_norm = self.train_step()
            self.train_seconds += time.perf_counter() - t0
            if self.first_loss is None:
                self.first_loss = loss
            self.divergence = self.check_divergence(loss, grad_norm)
            if self.divergence:
                break
            self.step += 1
            bar.update(1)
            if self.step % self.t.log_every == 0 or self.step == self.t.steps:
                val, entropy = self.estimate_val()
                now = time.perf_counter()
                row = {
                    "step": self.step,
                    "train_loss": loss,
                    "val_loss": val,
                    "lr": lr_at(self.step - 1, self.t),
                    "grad_norm": grad_norm,
                    "tokens_per_s": tokens_per_step * (self.step - last_log_step) / max(now - last_log_time, 1e-9),
                    "peak_mem_mb": peak_memory_mb(self.device),
                }
                row.update({f"entropy_l{i}": e for i, e in enumerate(entropy)})
                self.rows.append(row)
                live.log(row)
                bar.set_postfix_str(f"train {loss:.3f} val {val:.3f}")
                if not progress:
                    print(
                        f"[{self.run.experiment}/seed{self.run.seed}] step {self.step}/{self.t.steps} "
                        f"train {loss:.4f} val {val:.4f} {row['tokens_per_s']:.0f} tok/s",
                        file=sys.stderr,
                    )
                last_log_time, last_log_step = time.perf_counter(), self.step
            if self.step % self.t.sample_every == 0 or self.step == self.t.steps:
                self.samples.append(self.sample())
            if self.step % self.t.eval_every == 0 or self.step == self.t.steps:
                self.curve.append(self.curve_point())
            if self.step % self.t.ckpt_every == 0 or self.step == self.t.steps:
                self.save()
                last_good = self.step
        bar.close()
        if self.divergence:
            print(
                f"[{self.run.experiment}/seed{self.run.seed}] diverged at step {self.divergence['step']}: "
                f"{self.divergence['reason']}; keeping the checkpoint of step {last_good}",
                file=sys.stderr,
            )
            self.record_divergence_in_checkpoint()
        return self.finish()

    def record_divergence_in_checkpoint(self) -> None:
        """Keep the last good weights, but with the divergence recorded, so a re-run does not train again."""
        s = torch.load(self.ckpt_path, map_location="cpu", weights_only=True)
        s["divergence"] = json.dumps(self.divergence)
        s["rows"], s["samples"], s["curve"] = json.dumps(self.rows), json.dumps(self.samples), json.dumps(self.curve)
        atomic_torch_save(s, self.ckpt_path)

    def finish(self) -> dict:
        write_log_tsv(self.out / "log.tsv", self.rows)
        atomic_write_text(
            self.out / "samples.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in self.samples)
        )
        write_json(self.out / "curve.json", {"eval_every": self.t.eval_every, "points": self.curve})
        last = self.rows[-1] if self.rows else {}
        metrics = {
            "steps_done": self.step if not self.divergence else self.divergence["step"],
            "steps_planned": self.t.steps,
            "final_train_loss": last.get("train_loss"),
            "final_val_loss_estimate": last.get("val_loss"),
            "diverged": self.divergence is not None,
            "divergence_step": self.divergence["step"] if self.divergence else None,
            "divergence_reason": self.divergence["reason"] if self.divergence else None,
            "n_params": count_params(self.model),
            "loss_spikes": count_spikes([r["train_loss"] for r in self.rows]),
            "fingerprint": self.run.fingerprint(),  # evaluate and aggregate check what they read against these
            "config_fingerprint": self.run.config_fingerprint(),
        }
        write_json(self.out / "metrics.json", metrics)
        perf = {
            "train_seconds_this_process": self.train_seconds,
            "tokens_per_s_median": float(np.median([r["tokens_per_s"] for r in self.rows])) if self.rows else None,
            "peak_mem_mb": peak_memory_mb(self.device),
            "device": str(self.device),
            "threads": self.t.threads,
            "tokens_trained": metrics["steps_done"] * self.t.batch_size * self.run.model.block_size,
        }
        write_json(self.out / "perf.json", perf)
        return metrics


def count_spikes(losses: list[float], factor: float = 1.5) -> int:
    """Logged train losses more than ``factor`` × the running minimum so far: how often training jumped back up."""
    spikes, best = 0, math.inf
    for loss in losses:
        if loss is None or not math.isfinite(loss):
            continue
        if loss > factor * best:
            spikes += 1
        best = min(best, loss)
    return spikes


class run_lock:  # noqa: N801 - used as a context manager, like open()
    """One training per run folder at a time: a second process of the same run says who holds it and exits."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path, self.name = Path(folder) / LOCK_FILE, name

    def __enter__(self) -> run_lock:
        self.file = open(self.path, "a+")  # noqa: SIM115 - held until __exit__
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise UserError(f"run {self.name} is being trained by process {holder} (lock {str(self.path)!r}); wait "
                            "for it to finish or stop it, then re-run") from None
        except OSError as e:  # a file system without locks (some NFS mounts): train, but say what is not guarded
            print(f"note: cannot lock {self.path} ({e.strerror}); a second training of {self.name} started "
                  "meanwhile would not be refused", file=sys.stderr)
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()
        return self

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)  # a run folder holds only outputs once training is over
        self.file.close()  # closing releases the lock


def write_log_tsv(path: Path, rows: list[dict]) -> None:
    fields = LOG_FIELDS + sorted({k for r in rows for k in r if k.startswith("entropy_")})
    buf = StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, delimiter="\t", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    atomic_write_text(path, buf.getvalue())


class DvcLiveMirror:
    """The step log mirrored into DVCLive. Rebuilt from the checkpoint's rows on resume, so a killed-and-resumed run
    has exactly one entry per logged step (DVCLive's own resume would keep rows logged after the last checkpoint)."""

    def __init__(self, folder: Path, rows: list[dict]) -> None:
        self.live = None
        try:
            from dvclive import Live
        except ImportError:  # the engine works without it; the pipeline installs it
            return
        shutil.rmtree(folder, ignore_errors=True)
        self.live = Live(dir=str(folder), dvcyaml=None, save_dvc_exp=False, report=None)
        # Live opens the DVC repo (and through it git pack files) only to name the experiment. Closed now, not by the
        # garbage collector at interpreter exit, where dulwich's __del__ fails with "sys.meta_path is None" noise
        # after every crash.
        repo = getattr(self.live, "_dvc_repo", None)
        if repo is not None:
            repo.close()
        for row in rows:
            self.log(row)

    def log(self, row: dict) -> None:
        if self.live is None:
            return
        self.live.step = row["step"]
        for k, v in row.items():
            if k != "step" and v is not None and math.isfinite(v):
                self.live.log_metric(k, v)
        self.live.make_summary()


def make_bar(total: int, initial: int, enabled: bool, desc: str):
    if enabled:
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True)

    class _NoBar:
        def update(self, n: int) -> None: ...
        def set_postfix_str(self, s: str) -> None: ...
        def close(self) -> None: ...

    return _NoBar()


def train(run: RunConfig, data_dir: Path, out_dir: Path, resume: str = "auto", progress: bool | None = None) -> dict:
    if progress is None:
        progress = sys.stderr.isatty()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return Trainer(run, data_dir, out_dir).fit(resume, progress)
