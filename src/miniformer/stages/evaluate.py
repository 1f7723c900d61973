"""Stage `evaluate`: every probe (evaluation/probes.py) on one finished training, written to eval.json, windows.json
(per-item samples, for the report's intervals) and the probes' own files (attention.json, generations.json)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from miniformer.devices import pick_device
from miniformer.errors import UserError
from miniformer.evaluation.probes import PROBES
from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.params import RunConfig
from miniformer.runtime.checkpoints import check_finished_training, evaluation_fingerprint, load_run_model
from miniformer.runtime.files import write_json
from miniformer.runtime.memory import check_fits, evaluation_bytes
from miniformer.runtime.provenance import digests, write_sealed_json
from miniformer.runtime.tokendata import TokenData, check_same_tokenizer


def load_subject(run: RunConfig, run_dir: Path, data_dir: Path) -> tuple[Subject, dict]:
    """The trained model of a finished run, on the data it was trained on, and its checkpoint."""
    torch.set_num_threads(run.train.threads)
    device = pick_device(run.train.device)
    data = TokenData(data_dir)
    check_fits(evaluation_bytes(run.model, run.eval.length_multiples, 0), device,
               f"evaluating {run.experiment}/seed{run.seed}", "lower eval.length_multiples or model.block_size")
    model, _, ckpt = load_run_model(run_dir, device)
    check_finished_training(ckpt, run, run_dir, data.data_hash)
    check_same_tokenizer(ckpt, data.meta, str(run_dir), str(data_dir), "re-train it after `miniformer prepare`")
    return Subject(run, model, data, device), ckpt


def check_declared_files(probe: Probe, measured: Measured) -> None:
    """The files a probe wrote are the ones it declares: the workflow's outputs come from that declaration, so a file
    it did not declare would be left out of them, and one it declared but did not write fails the job late."""
    if sorted(measured.files) != sorted(probe.files):
        raise UserError(f"probe {probe.name} wrote {sorted(measured.files)} but declares files={probe.files}: "
                        "declare each file it writes in its Probe(files=...), and write each on every path (an empty "
                        "one where the probe does not apply)")


def evaluate(run: RunConfig, run_dir: Path, out_dir: Path, data_dir: Path) -> dict:
    subject, ckpt = load_subject(run, run_dir, data_dir)
    result = {
        "fingerprint": ckpt.get("fingerprint"),  # the training evaluated (aggregate checks it)
        "evaluation": evaluation_fingerprint(ckpt["fingerprint"], run),  # + eval params + evaluation code
        "objective": subject.objective.name,
        "diverged": bool(ckpt.get("divergence")) and json.loads(ckpt["divergence"]) is not None,
    }
    samples, files = {}, {}
    for probe in PROBES:
        measured = probe.measure(subject)
        check_declared_files(probe, measured)
        result.update(measured.values)
        samples.update(measured.samples)
        files.update(measured.files)
    for name, content in files.items():
        write_json(Path(out_dir) / name, content)
    write_json(Path(out_dir) / "windows.json", samples)
    # last, sealed, with the digests of the files written before it: a kill between the writes (or an edit) leaves
    # a windows.json that eval.json does not vouch for, and aggregate refuses the mix
    result["files"] = digests(out_dir, sorted([*files, "windows.json"]))
    write_sealed_json(Path(out_dir) / "eval.json", result)
    return result
