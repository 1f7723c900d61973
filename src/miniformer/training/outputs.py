"""What a finished (or diverged) training leaves beside its checkpoint: metrics.json is deterministic (same params +
seed on CPU -> same file); perf.json holds the timings, which are not."""

from __future__ import annotations

import json

import numpy as np

from miniformer.network.flops import count_params
from miniformer.runtime.files import atomic_write_text
from miniformer.runtime.provenance import digests, write_sealed_json
from miniformer.runtime.spikes import count_spikes
from miniformer.training.logs import write_log_tsv
from miniformer.training.trainer import Trainer


def write_outputs(tr: Trainer) -> dict:
    out, rows, t = tr.folder.out, tr.logs["rows"], tr.t
    write_log_tsv(out / "log.tsv", rows)
    atomic_write_text(out / "samples.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n"
                                                    for s in tr.logs["samples"]))
    write_sealed_json(out / "curve.json", {"eval_every": t.eval_every, "points": tr.logs["curve"],
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
        "fingerprint": tr.fingerprint,  # config + training code + data content: every reader checks it
        "config_fingerprint": tr.run.config_fingerprint(),
        "data_content": tr.data.data_hash,
        # the deterministic files written before this one (a kill between the writes leaves them apart)
        "files": digests(out, ("samples.jsonl", "curve.json")),
    }
    # timings are not deterministic, so they live apart from metrics.json, sealed and named by the same fingerprint;
    # they come from the checkpoint's record of the training that made it, not from this process
    write_sealed_json(out / "perf.json", {
        "fingerprint": tr.fingerprint,
        "train_seconds": tr.cost.seconds,
        "tokens_per_s_median": float(np.median([r["tokens_per_s"] for r in rows])) if rows else None,
        "peak_mem_mb": tr.cost.peak_mb(tr.step),
        "device": str(tr.device),
        "threads": t.threads,
        "tokens_trained": metrics["steps_done"] * t.batch_size * tr.run.model.block_size,
        "files": digests(out, ("log.tsv",)),  # the step log holds timings too: not deterministic, so recorded here
    })
    write_sealed_json(out / "metrics.json", metrics)  # last: it seals the training's outputs
    return metrics
