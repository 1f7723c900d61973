"""What every probe reads: the model under test, its run config, its data, and the held-out lines probes share."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from miniformer.network.objectives import Objective, Specials, objective_named
from miniformer.params import RunConfig
from miniformer.runtime.ngram import NgramModel
from miniformer.runtime.tokendata import TokenData


@dataclass
class Measured:
    """A probe's result: values for eval.json, per-item samples for windows.json, files of its own (name -> JSON)."""

    values: dict
    samples: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reading:
    """One of a probe's numbers as the report shows it: a column headed ``label`` in the probe's table, one row per
    experiment, the mean over its seeds of the metrics.json scalar ``key``, written with ``format``."""

    label: str
    key: str
    format: str = "{:.3f}"


@dataclass(frozen=True)
class Probe:
    """A probe as the study runs it, declared in its own module (a module-level ``PROBES`` tuple; evaluation/probes.py
    finds them): the function, its scalars (its eval.json values as flat numbers for metrics.json, what `dvc metrics
    diff` compares and the claims read; a key is there even when the probe did not apply, as None, so every run of a
    study has the same keys), where its values come in eval.json (``order``, lowest first), the files it writes beside
    eval.json (the workflow declares them), and the readings the report shows in a table of its own under ``title``."""

    measure: Callable[[Subject], Measured]
    scalars: Callable[[dict], dict]
    order: int
    files: tuple[str, ...] = ()
    title: str = ""
    readings: tuple[Reading, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.measure.__module__.rpartition('.')[2]}.{self.measure.__name__}"


class Subject:
    """A model to probe: ours from a checkpoint, or the cross-check's peer in memory (the same code scores both)."""

    def __init__(self, run: RunConfig, model: torch.nn.Module, data: TokenData, device: torch.device) -> None:
        self.run, self.model, self.data, self.device = run, model, data, device
        self.specials = Specials(data.vocab_size)
        self.objective: Objective = objective_named(run.train.objective)
        self.T = run.model.block_size
        self.tok = data.tokenizer
        self._ngrams: dict[int, NgramModel] = {}

    def ngram(self, order: int) -> NgramModel:
        """The train split's n-gram model of this order (built once per subject, on the counts of the highest order
        built so far: each order's table is counted once)."""
        if order not in self._ngrams:
            counted = self._ngrams[max(self._ngrams)] if self._ngrams else None
            self._ngrams[order] = NgramModel(np.asarray(self.data.splits["train"]), self.data.vocab_size, order,
                                             counted=counted)
        return self._ngrams[order]

    @functools.cached_property
    def held_out_lines(self) -> list[str]:
        """Lines of the test split the probes read: verse, not speaker names (which end with ':'), at least
        min(20, block_size/2) characters."""
        text = self.tok.decode(self.data.splits["test"].tolist())
        shortest = min(20, self.T // 2)
        return [ln for ln in text.split("\n") if len(ln) >= shortest and not ln.endswith(":")]

    def test_lines(self) -> list[str]:
        """Held-out lines that fit the block; if too few do (a tiny model), longer lines cut to the block follow."""
        lines = self.held_out_lines
        whole = [ln for ln in lines if len(ln) <= self.T]
        if len(whole) >= self.run.eval.order_pairs:
            return whole
        return whole + [ln[: self.T] for ln in lines if len(ln) > self.T]
