"""What a finished (or diverged) training leaves beside its checkpoint: metrics.json is deterministic (same params +
seed on CPU -> same file); perf.json holds the timings, which are not."""

from __future__ import annotations

import json

import numpy as np

from miniformer.network.flops import count_params
from miniformer.runtime.checkpoints import fingerprint
from miniformer.runtime.files import atomic_write_text, write_json
from miniformer.training.divergence import count_spikes
from miniformer.training.logs import peak_memory_mb, write_log_tsv
from miniformer.training.trainer import Trainer


def write_outputs(tr: Trainer) -> dict:
    out, rows, t = tr.folder.out, tr.logs["rows"], tr.t
    write_log_tsv(out / "log.tsv", rows)
    atomic_write_text(out / "samples.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n"
                                                    for s in tr.logs["samples"]))
    write_json(out / "curve.json", {"eval_every": t.eval_every, "points": tr.logs["curve"],
                                    "train_loss_per_step": tr.logs["losses"]})
    last, div = (rows[-1] if rows else {}), tr.divergence
    metrics = {
        "steps_done": tr.step if not div else div["step"],
        "steps_planned": t.steps,
        "final_train_loss": last.get("train_loss"),
        "final_val_loss_estimate": last.get("val_loss"),
        "diverged": div is not None,
        "divergence_step": div["step"] if div else None,
        "divergence_reason": div["reason"] if div else None,
        "n_params": count_params(tr.model),
        "loss_spikes": count_spikes(tr.logs["losses"]),
        "fingerprint": fingerprint(tr.run),  # evaluate and aggregate check what they read against these
        "config_fingerprint": tr.run.config_fingerprint(),
    }
    write_json(out / "metrics.json", metrics)
    write_json(out / "perf.json", {
        "train_seconds_this_process": tr.train_seconds,
        "tokens_per_s_median": float(np.median([r["tokens_per_s"] for r in rows])) if rows else None,
        "peak_mem_mb": peak_memory_mb(tr.device),
        "device": str(tr.device),
        "threads": t.threads,
        "tokens_trained": metrics["steps_done"] * t.batch_size * tr.run.model.block_size,
    })
    return metrics
