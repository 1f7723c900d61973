"""Stage `init-probe`: token uniformity against depth at initialisation, with and without residuals, for the
reference run's architecture (evaluation/init_uniformity.py) -> results/init_uniformity.json."""

from __future__ import annotations

from pathlib import Path

import torch

from miniformer.evaluation.init_uniformity import uniformity_at_init
from miniformer.layout import INIT_FILE
from miniformer.params import Study
from miniformer.runtime.files import write_json


def init_probe(study: Study, results: Path) -> dict:
    run = study.config(study.reference, study.seeds[0])
    torch.set_num_threads(run.train.threads)
    out = uniformity_at_init(run.model)
    write_json(Path(results) / INIT_FILE, out)
    return out
