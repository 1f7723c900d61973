"""A method check, not a speed benchmark: how the downstream fine-tune's accuracy depends on its own rate and its own
seed, on the pre-trained models of a finished study. Run from a study's folder after `make study`:

    python benchmarks/finetune_rate.py obj_mlm:0 obj_mlm:1 --lrs 3e-4 1e-3 --seeds 3

Prints one line per (model, rate, fine-tune seed): the held-out accuracy. A fine-tune that stays at chance under one
seed and learns under another is the fine-tune's luck, not the pre-training's: what `eval.finetune_seeds` averages."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from miniformer.evaluation.finetune import finetune_seeds, finetuned_outcomes
from miniformer.layout import run_dir
from miniformer.params import Study
from miniformer.stages.evaluate import load_subject


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="experiment:seed")
    ap.add_argument("--lrs", nargs="+", type=float, default=[3e-4, 1e-3])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--results", default="results")
    ap.add_argument("--data", default="data/prepared")
    args = ap.parse_args()
    study = Study.load("params.yaml", None)
    for spec in args.runs:
        experiment, seed = spec.split(":")
        run = study.config(experiment, int(seed))
        subject, _ = load_subject(run, run_dir(Path(args.results), experiment, int(seed)), Path(args.data))
        for lr in args.lrs:
            for ft_seed in finetune_seeds(int(seed), args.seeds):
                outcomes, _ = finetuned_outcomes(subject, lr, ft_seed)
                print(f"{spec}\tlr {lr:g}\tfine-tune seed {ft_seed}\taccuracy {np.mean(outcomes):.3f}", flush=True)


if __name__ == "__main__":
    main()
