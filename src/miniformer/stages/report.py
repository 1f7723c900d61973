"""Stage `report`: figures + computed verdicts -> one self-contained report/report.html (images inlined as base64)."""

from __future__ import annotations

import difflib
import json
import math
import platform
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from miniformer.errors import UserError
from miniformer.evaluation.probes import REPORTED
from miniformer.layout import (
    DATA_DIR,
    INIT_FILE,
    PROVENANCE,
    eval_dir,
    loss_at_key,
    past_block_key,
    run_dir,
    seed_folder,
)
from miniformer.network.objectives import PROBE_CANDIDATES
from miniformer.params import RunConfig, Study
from miniformer.runtime import files
from miniformer.runtime.checkpoints import fingerprint
from miniformer.runtime.files import STAGES_FIRST, atomic_write_text, read_json, write_json
from miniformer.runtime.provenance import check_digest, read_sealed_json
from miniformer.runtime.schedule import decay_start
from miniformer.runtime.tokendata import TokenData
from miniformer.study import figures, hovermap
from miniformer.study.bibliography import REFERENCES
from miniformer.study.budgets import (
    at_longest_budget,
    budget_rows,
    design_marks,
    longer_marks,
    read_budgets,
    split_designs,
)
from miniformer.study.claim_table import (
    budget_mark,
    claim_files,
    claim_records,
    glance_rows,
    headline_effect,
    read_claims_document,
    sections_of_claims,
)
from miniformer.study.claims import CLAIMS, FLAT_DECAYING, TESTS, check_experiments, claims
from miniformer.study.contents import with_contents
from miniformer.study.findings import VERDICTS, Evidence, breakages, peer_comparisons
from miniformer.study.roles import (
    ENTROPY_RUNS,
    HEAD_RUNS,
    INIT_RUNS,
    LEARNED_POSITIONS,
    NO_MASK,
    SINGLE_HEAD,
    STABILITY_ROWS,
    VASWANI_HEAD_WIDTH,
    position_runs,
)
from miniformer.study.settings import read_settings, settings_context
from miniformer.study.stats import minus, source_quantity


def read_crosscheck(results: Path) -> dict:
    """The peer's result per experiment (results/crosscheck/<experiment>.json, when `miniformer crosscheck` ran); a
    file that is not JSON, or not a cross-check result, is one line naming it."""
    out = {}
    for path in sorted((Path(results) / "crosscheck").glob("*.json")):
        remedy = f"re-run `snakemake crosscheck` (or `miniformer crosscheck {path.stem}`), or delete it"
        result = files.read_json(path, remedy)
        inits = result.get("inits") if isinstance(result, dict) else None
        if not (isinstance(inits, dict) and all(isinstance(v, dict) for v in inits.values())):
            raise UserError(f"{str(path)!r} is not a cross-check result (no 'inits' of the peer's numbers per "
                            f"init); {remedy}")
        out[path.stem] = result
    return out


class RunFiles:
    """Reads one study's per-run files (first seed of each experiment unless asked), each checked against what
    aggregate recorded of it (results/provenance.json): the report never mixes an evaluation aggregated with another
    made or edited since."""

    def __init__(self, study: Study, results: Path, provenance: dict | None = None) -> None:
        self.study, self.results = study, results
        self.provenance = provenance if provenance is not None else read_provenance(results)

    def seed(self, exp: str) -> int:
        return self.study.seeds_for(exp)[0]

    def _run_file(self, exp: str, seed: int, name: str, recorder: str) -> Path | None:
        """A file training wrote beside its checkpoint, checked against the digest its sealed ``recorder`` records
        (None when the run has no such file: a run that never trained); an edit is refused, never drawn."""
        folder = run_dir(self.results, exp, seed)
        if not (folder / name).exists():
            return None
        retrain = (f"re-run `miniformer train {exp} --seed {seed}` (it rewrites the run's files from its finished "
                   "checkpoint), then `miniformer aggregate`")
        record = read_sealed_json(folder / recorder, retrain)
        check_digest(folder, name, record.get("files", {}), str(folder / recorder), retrain)
        return folder / name

    def log(self, exp: str, seed: int | None = None) -> pd.DataFrame:
        path = self._run_file(exp, self.seed(exp) if seed is None else seed, "log.tsv", "perf.json")
        return pd.read_csv(path, sep="\t") if path is not None else pd.DataFrame()

    def _recorded(self, exp: str) -> tuple[Path, dict, str]:
        seed = self.seed(exp)
        folder, remedy = eval_dir(self.results, exp, seed), AGGREGATE_AGAIN
        run = self.provenance["runs"].get(f"{exp}/{seed_folder(seed)}")
        if run is None:
            raise UserError(f"run {exp}/{seed_folder(seed)} is not in {str(self.results / PROVENANCE)!r}; {remedy}")
        return folder, run, remedy

    def eval(self, exp: str) -> dict:
        folder, run, remedy = self._recorded(exp)
        ev = read_sealed_json(folder / "eval.json", remedy)
        if ev.get("evaluation") != run["evaluation"]:
            raise UserError(f"{str(folder / 'eval.json')!r} is another evaluation than the one aggregated; {remedy}")
        return ev

    def _eval_file(self, exp: str, name: str) -> dict:
        folder, run, _ = self._recorded(exp)
        seed = self.seed(exp)  # aggregate does not rewrite an evaluation's files: evaluate does
        remedy = f"re-run `miniformer evaluate {exp} --seed {seed}`, then `miniformer aggregate`"
        check_digest(folder, name, run["eval_files"], str(self.results / PROVENANCE), remedy)
        return read_json(folder / name)

    def attention(self, exp: str) -> dict:
        return self._eval_file(exp, "attention.json")

    def generations(self, exp: str) -> dict:
        return self._eval_file(exp, "generations.json")

    def step_losses(self, exp: str) -> list[float]:
        """The train loss of every step (curve.json), [] for a run trained before it was kept."""
        path = run_dir(self.results, exp, self.seed(exp)) / "curve.json"
        return read_sealed_json(path, STAGES_FIRST).get("train_loss_per_step", []) if path.exists() else []

    def samples(self, exp: str) -> list[dict]:
        """The run's demo samples; the fields only some objectives write (masked input, prefix prompt) None where
        absent, so the template can ask for them."""
        path = self._run_file(exp, self.seed(exp), "samples.jsonl", "metrics.json")
        lines = path.read_text(encoding="utf-8").splitlines() if path else []
        return [{**dict.fromkeys(("masked", "hidden_as", "prompt")), **json.loads(line)} for line in lines]


REPORT_READS = ("metrics.json", "windows.json", "perf.json")  # the aggregates the report reads
AGGREGATE_AGAIN = "re-run `miniformer aggregate` (or the DAG), which rewrites it"


def read_provenance(results: Path) -> dict:
    """results/provenance.json, with the aggregates it records checked against their digests."""
    provenance = read_sealed_json(Path(results) / PROVENANCE, AGGREGATE_AGAIN)
    for name in REPORT_READS:  # not headline.json: DVC's summary, which the report does not read
        check_digest(results, name, provenance["files"], str(Path(results) / PROVENANCE), AGGREGATE_AGAIN)
    return provenance


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def group_of(study: Study, group: str) -> list[str]:
    return [e for e, spec in study.experiments.items() if spec["group"] == group]


def text_references(data: TokenData) -> tuple[float, float]:
    """The two ends of the generation-quality scale: held-out (val) text under the train split's trigram model, and
    the same characters shuffled (the quality probe's own check, see evaluation/generations.py)."""
    from miniformer.evaluation.generations import QUALITY_ORDER
    from miniformer.runtime.ngram import NgramModel

    model = NgramModel(np.asarray(data.splits["train"]), data.vocab_size, QUALITY_ORDER)
    val = np.asarray(data.splits["val"][:REFERENCE_CHARACTERS])
    return model.loss(val), model.loss(np.random.default_rng(0).permutation(val))


REFERENCE_CHARACTERS = 20000  # of the val split, for the generation-quality reference lines


def unigram_loss(data: TokenData) -> float:
    """Cross-entropy of the val split under the train split's token frequencies (add-one): the no-context floor."""
    V = data.vocab_size
    counts = np.bincount(np.asarray(data.splits["train"]), minlength=V).astype(np.float64) + 1
    logp = np.log(counts / counts.sum())
    val = np.asarray(data.splits["val"])
    return float(-logp[val].mean())


def characters_per_token(data: TokenData) -> float:
    """How many characters a token of the val split reads on average: 1 by character; under BPE the factor that turns
    the findings' per-character margins into this run's per-token losses."""
    if data.meta.get("tokenizer") == "char":
        return 1.0
    val = [int(t) for t in np.asarray(data.splits["val"])]
    return len(data.tokenizer.decode(val)) / max(1, len(val))


def prepared_data(data_dir: Path, provenance: dict) -> TokenData:
    """The prepared data the runs were aggregated on, whole: the report's reference lines (the unigram floor, the
    generation scale) and several verdicts read it, so data that is missing, damaged or another corpus's is refused,
    never rendered as a report without them."""
    data = TokenData(data_dir)  # missing, or token files that do not match their meta.json: one line
    if data.data_hash != provenance.get("data_content"):
        raise UserError(f"the prepared data in {str(data_dir)!r} is not the data the runs were aggregated on (the "
                        "corpus or its preparation changed since); re-run the DAG, or pass --data the data they read")
    return data


@dataclass
class ReportInputs:
    """What every section of the report reads: the study, its files, the evidence, and the figures drawn so far."""

    study: Study
    results: Path
    files: RunFiles
    ev: Evidence
    base: RunConfig
    figs: dict[str, str]
    text_references: tuple[float | None, float | None] = (None, None)  # trigram loss: held-out text, shuffled

    @property
    def m(self):
        return self.ev.m

    def half_width(self, exp: str) -> float:
        """The half-width of the 95 % interval of exp's val loss, as the claims compute it (0 when there is none)."""
        e = self.ev.effect(exp, None)
        return 0.0 if e is None or e.half_width != e.half_width else e.half_width

    @property
    def labels(self) -> dict[str, str]:
        """Run names as figures show them: a run at another learning rate than the reference says which."""
        lr = self.base.train.lr
        out = {}
        for name in self.study.names():
            run_lr = self.study.config(name, self.study.seeds[0]).train.lr
            out[name] = name if run_lr == lr or "lr=" in name else f"{name} (lr {run_lr:g})"
        return out

    def present(self, exps: list[str]) -> list[str]:
        return [e for e in exps if self.m.has(e)]

    def step_log_source(self, kind: str) -> str:
        """What a step-log curve shows, said under its title: the first seed of each run, and for val loss the
        trainer's running estimate, not the whole-split number the tables and claims use."""
        seed = self.study.seeds[0]
        if kind == "val":
            batches = self.base.train.val_batches
            return (f"seed {seed} of each run; the step log's estimate on {batches} fixed val batch"
                    f"{'es' if batches > 1 else ''} (the tables and claims use the whole val split)")
        return f"seed {seed} of each run; the train loss of the logged steps"

    def draw(self, name: str, fig) -> None:
        self.figs[name] = figures.to_base64_png(fig)


def positions_section(r: ReportInputs) -> dict:
    m, files, T = r.m, r.files, r.base.model.block_size
    pos = {k: v for k, v in position_runs(r.study.experiments).items() if m.has(v)}
    r.draw("pos_curves", figures.curves({k: files.log(v) for k, v in pos.items()}, "val_loss",
                                        "Position methods: val loss", unigram=r.ev.unigram,
                                        source=r.step_log_source("val")))
    multiples = [int(x) for x in r.base.eval.length_multiples]
    sweep = pd.DataFrame(
        {mult: [m.mean(v, loss_at_key(mult)) for v in pos.values()] for mult in multiples}, index=list(pos)
    )
    r.draw("pos_lengths", figures.length_sweep(sweep, T, r.ev.unigram))
    top = str(max(multiples))
    per_pos = {k: files.eval(v)["lengths"].get(top, {}).get("per_position") for k, v in pos.items()}
    r.draw("pos_per_position", figures.per_position({k: v for k, v in per_pos.items() if v}, int(top) * T, T,
                                                    r.ev.unigram))
    growth = [(k, m.mean(v, loss_at_key(1)), m.mean(v, past_block_key(2)),
               [minus(m.mean(v, loss_at_key(x)), m.mean(v, loss_at_key(1))) for x in multiples if x > 1])
              for k, v in pos.items()]
    learned_reason = (
        files.eval(LEARNED_POSITIONS)["lengths"].get(top, {}).get("reason") if LEARNED_POSITIONS in pos.values()
        else None
    )
    pairs = {}
    for e in r.study.experiments:
        mp = files.eval(e).get("minimal_pairs") if m.has(e) else None
        if mp and mp.get("true_order_preferred") is not None:
            pairs[e] = {"rate": m.mean(e, "order_preference"), "estimate_text": r.ev.text(r.ev.preference(e)),
                        "ties": mp["ties"], "pairs": mp["pairs"], "scoring": mp["scoring"],
                        "floor": m.mean(e, "order_preference_floor"), "floor_order": mp.get("floor_order"),
                        "floor_ties": mp.get("floor_ties"),
                        "orders": " / ".join(f"{n}: {v:.3f}" for n, v in (mp.get("ngram_true_order_preferred") or {})
                                             .items() if v is not None),
                        "floor_text": r.ev.text(r.ev.preference(e, against="floor")),
                        # without the causal mask a model reads the characters it scores: no reading of order
                        "caveat": "sees the characters it scores (no causal mask): not a reading of order"
                        if e == NO_MASK else ""}
    sweep_rows = [(name, [None if v is None or v != v else v for v in row]) for name, row in
                  zip(sweep.index, sweep.itertuples(index=False))]  # NaN: a length the method has no value at
    counts = [p["pairs"] for p in pairs.values()]
    usual = max(counts, key=counts.count, default=0)
    return {"multiples": multiples, "block_size": T, "sweep_rows": sweep_rows, "learned_reason": learned_reason,
            "growth": growth, "growth_multiples": [x for x in multiples if x > 1],
            "order": {k: {"delta": m.mean(v, "order_delta"), "seeds": len(m.values(v, "val_loss")),
                          **{x: files.eval(v)["order_sensitivity"][x] for x in ("intact", "shuffled")}}
                      for k, v in pos.items()}, "pairs": pairs,
            # a run told another count (params.yaml's eval.order_pairs) scores the first of the same pairs
            "pair_count": usual, "pair_other": {e: p["pairs"] for e, p in pairs.items() if p["pairs"] != usual},
            "pair_floor": m.mean(r.study.reference, "order_preference_floor"),
            **generation_quality(r, {**pos, NO_MASK: NO_MASK} if r.m.has(NO_MASK) else pos)}


def generation_quality(r: ReportInputs, runs: dict[str, str]) -> dict:
    """Per method: each position bin's trigram loss (mean over the samples ± its interval) and one sample's text."""
    table, series = {}, {}
    for name, exp in runs.items():
        gens = r.files.generations(exp)
        if "texts" not in gens:
            continue
        bins = []
        for label in gens["ngram_loss"]:
            e = r.ev.contrast(source_quantity(f"generation:{label}"), [f"generation:{label}"], [(exp, 1.0)])
            if e is not None:
                bins.append((label, e.value, e.half_width))
        series[name] = bins
        table[name] = {"bins": [(b, f"{v:.3f} ± {h:.3f}") for b, v, h in bins], "text": gens["texts"][0],
                       "samples": len(gens["texts"]), "unreached": gens.get("unreached", []),
                       "repetition": r.m.mean(exp, "gen_repetition")}
    real, shuffled = r.text_references
    if series:
        r.draw("generation_quality", figures.generation_quality(series, real, shuffled, r.base.model.block_size))
    return {"long_gens": table, "text_real": real, "text_shuffled": shuffled, "gen_samples": r.base.eval.gen_samples,
            "gen_temperature": r.base.eval.temperature, "gen_top_k": r.base.eval.top_k}


def attention_section(r: ReportInputs) -> dict:
    files = r.files
    single = files.attention(SINGLE_HEAD if r.m.has(SINGLE_HEAD) else r.study.reference)
    r.draw("heat_single", figures.attention_heatmap(*first_tokens(single["weights"][-1][0], single["tokens"]),
                                                    "single head, last layer (causal)"))
    nomask = files.attention(NO_MASK) if r.m.has(NO_MASK) else None
    if nomask:
        r.draw("heat_nomask", figures.attention_heatmap(*first_tokens(nomask["weights"][-1][0], nomask["tokens"]),
                                                        "single head, last layer, NO causal mask"))
    ent_runs = r.present([name for e in ENTROPY_RUNS if e in r.study.experiments for name in r.study.sweep_of(e)])
    ent_logs = {e: files.log(e) for e in ent_runs}
    if ent_logs:
        for df in ent_logs.values():
            cols = [c for c in df.columns if c.startswith("entropy_")]
            df["mean_entropy"] = df[cols].mean(axis=1) if cols else None
        r.draw("entropy", figures.loss_and_entropy({e: (files.step_losses(e), ent_logs[e]) for e in ent_runs}))
    attn_exps = r.present(group_of(r.study, "attention"))
    r.draw("attn_curves", figures.curves({e: files.log(e) for e in attn_exps}, "train_loss",
                                         "Attention breakages: train loss", unigram=r.ev.unigram, labels=r.labels))
    hover = hovermap.attention_svg(single["weights"][-1][0], single["tokens"],
                                   "hover a cell: query → key, weight (single head, last layer)")
    no_mask_losses = None
    if r.m.has(NO_MASK):
        no_mask_losses = {"train": r.m.mean(NO_MASK, "final_train_loss"),
                          "masked_train": r.m.mean(SINGLE_HEAD, "final_train_loss") or 0,
                          "restored": r.m.mean(NO_MASK, "val_loss_with_causal_mask") or 0}
    return {"single": single, "nomask": nomask, "single_hover": Markup(hover),  # built and escaped by hovermap
            "no_mask_losses": no_mask_losses}


HEATMAP_TOKENS = 24  # characters of the probe line a figure draws: enough to read, few enough to label legibly


def first_tokens(weights: list, tokens: list[str]) -> tuple[list, list[str]]:
    """The map among the probe line's first characters (for a causal model exactly its first rows and columns; the
    hover map and attention.json keep the whole line)."""
    n = min(HEATMAP_TOKENS, len(tokens))
    return [row[:n] for row in weights[:n]], tokens[:n]


def heads_section(r: ReportInputs) -> dict:
    m = r.m
    baseline_att = r.files.attention(r.study.reference)
    n = min(HEATMAP_TOKENS, len(baseline_att["tokens"]))
    r.draw("heads_grid", figures.head_grid([first_tokens(h, baseline_att["tokens"])[0] for h in
                                            baseline_att["weights"][0]], baseline_att["tokens"][:n],
                                           "baseline, layer 0: every head"))
    head_runs = {h: e for h, e in HEAD_RUNS.items() if m.has(e)}
    reference = next(h for h, e in HEAD_RUNS.items() if e == r.study.reference)
    contrasts = {h: r.ev.effect(e, r.study.reference) for h, e in head_runs.items() if h != reference}
    # a shape needs three head counts: with fewer (the default profile leaves the sweep to the long one) no figure
    if reference in head_runs and len(head_runs) >= 3 and all(c is not None for c in contrasts.values()):
        points = {h: (c.value, c.half_width, len(m.values(head_runs[h], "val_loss"))) for h, c in contrasts.items()}
        points[reference] = (0.0, 0.0, len(m.values(r.study.reference, "val_loss")))
        r.draw("head_count", figures.head_count(points, reference, r.base.model.n_embd, VASWANI_HEAD_WIDTH,
                                                rope=r.base.model.pos == "rope", unit=r.ev.unit[:4]))
    runs = r.present([r.study.reference, *group_of(r.study, "heads")])
    return {"diversity": [(e, m.mean(e, "head_diversity"), m.mean(e, "val_loss") or 0) for e in runs],
            "head_counts": sorted(head_runs), "sweep_heads": sorted(h for h in HEAD_RUNS if h not in head_runs)}


def block_section(r: ReportInputs) -> dict:
    m = r.m
    block_exps = r.present([r.study.reference, *group_of(r.study, "block")])
    r.draw("block_curves", figures.curves({e: r.files.log(e) for e in block_exps}, "train_loss",
                                          "Block variants: train loss", unigram=r.ev.unigram, labels=r.labels,
                                          source=r.step_log_source("train")))
    finals = {e: m.mean(e, "val_loss") for e in block_exps if m.mean(e, "val_loss") is not None}
    r.draw("block_bars", figures.point_estimates(finals, {e: r.half_width(e) for e in finals}, "Block variants",
                                                 "val loss (nats/char), mean over seeds ± 95 % interval", r.labels))
    if r.ev.init:
        r.draw("init_uniformity", figures.uniformity_vs_depth(r.ev.init))
    return {"uniformity": [(e, m.mean(e, "hidden_uniformity"), m.mean(e, "loss_spikes"), m.any_true(e, "diverged"))
                           for e in block_exps]}


def training_section(r: ReportInputs) -> dict:
    ref = r.study.reference
    base_logs = {seed_folder(s): r.files.log(ref, s) for s in r.study.seeds_for(ref)}
    r.draw("train_val", figures.curves(
        {f"{k} train": df.rename(columns={"train_loss": "y"}) for k, df in base_logs.items()}
        | {f"{k} val": df.rename(columns={"val_loss": "y"}) for k, df in base_logs.items()},
        "y",
        "Baseline: train and val loss per seed", unigram=r.ev.unigram,
    ))
    perf = read_json(r.results / "perf.json", "re-run `miniformer aggregate`, which rewrites it") \
        if (r.results / "perf.json").exists() else {}
    # No throughput figure: study jobs share the machine's cores, so their tokens/s vary with whatever else runs and
    # compare nothing; speed is measured quietly and paired in benchmarks/.
    return {"perf": perf, "base_samples": r.files.samples(ref)}


def objectives_section(r: ReportInputs) -> dict:
    obj_exps = r.present([r.study.reference, *group_of(r.study, "objective")])
    r.draw("obj_curves", figures.curves({e: r.files.log(e) for e in obj_exps}, "val_loss",
                                        "Objectives: val loss (NOT comparable across)",
                                        source=r.step_log_source("val")))
    m = r.m
    probe = {e: {**r.files.eval(e)["probe"], "seeds": len(m.values(e, "val_loss")),  # means over seeds, as the claims
                 "recovery_accuracy": m.mean(e, "recovery_accuracy"), "candidate_recall":
                 m.mean(e, "probe_candidate_recall"), "continuation_loss": m.mean(e, "continuation_loss")}
             for e in obj_exps if "probe" in r.files.eval(e)}
    # each model's fine-tunes (eval.finetune_seeds), shown for the first seed's: how much one fine-tune's luck moves
    finetune = [(e, {"accuracy": m.mean(e, "finetune_accuracy"), "per_seed": m.values(e, "finetune_accuracy"),
                     "items": r.files.eval(e)["finetune"]["items"],
                     "fine_tunes": r.files.eval(e)["finetune"].get("per_seed", [])})
                for e in obj_exps if "finetune" in r.files.eval(e)]
    return {"probe": probe, "probe_item_count": next(iter(probe.values()), {}).get("recovery_items"),
            "probe_floor": next(iter(probe.values()), {}).get("constant_guess"),
            "finetune": finetune,
            "samples": {e: r.files.samples(e) for e in obj_exps}, "probe_candidates": PROBE_CANDIDATES}


def fidelity_section(r: ReportInputs) -> dict:
    """The peer implementation's numbers beside ours, when `miniformer crosscheck` has run."""
    m = r.m
    peer = {e: v for e, v in read_crosscheck(r.results).items() if m.has(e)}
    return {"crosscheck": peer_comparisons(m, peer, {e: seed_folder(r.files.seed(e)) for e in peer}),
            "peer_version": next(iter(peer.values()), {}).get("peer_version"),
            "init_pair": {f"{norm}_{init}": m.mean(e, "val_loss") for (norm, init), e in INIT_RUNS.items() if m.has(e)},
            "init": r.base.model.init}


def statistics_section(r: ReportInputs, found: list) -> dict:
    """The stability map over the learning-rate sweeps, and each val-loss effect over training."""
    stability = r.ev.stability_map()
    if stability:
        r.draw("stability", figures.stability_map(stability, r.ev.unigram))
    # each line names the pair it draws: a claim comparing several pairs is followed through one of them
    over_training = {f"{c.claim} ({c.curve[0]} − {c.curve[1]})": r.ev.curve(*c.curve) for c in found if c.curve}
    over_training = {k: v for k, v in over_training.items() if len(v) >= 2}
    if over_training:
        r.draw("effects_over_training", figures.effects_over_training(over_training))
    return {"stability": stability, "stability_rows": STABILITY_ROWS, "curve_tokens": r.base.train.curve_tokens}


def declared_probes_section(r: ReportInputs) -> dict:
    """A table for each probe that declares readings (evaluation/: its Probe's ``readings``), one row per experiment
    with a value, each the mean over its seeds: a new probe reaches the report with no line of the template its own."""
    tables = []
    for probe in REPORTED:
        rows = []
        for e in r.study.names():
            with r.m.asking(f"the readings of the probe {probe.name!r}"):
                means = [r.m.mean(e, reading.key) for reading in probe.readings]
            if any(v is not None for v in means):
                rows.append((e, len(r.m.nested[e]), ["—" if v is None else reading.format.format(v)
                                                     for reading, v in zip(probe.readings, means)]))
        if rows:
            tables.append({"title": probe.title or probe.name, "labels": [x.label for x in probe.readings],
                           "rows": rows})
    return {"probe_tables": tables}


SECTIONS = (positions_section, attention_section, heads_section, block_section, training_section,
            objectives_section, fidelity_section, declared_probes_section)


def sections_context(r: ReportInputs, found: list) -> dict:
    """Every section's names for the template; refused in one line where a claim or a probe's reading asked for a
    metrics.json key that no run has (it would otherwise read as "not run")."""
    context: dict = {}
    for section in SECTIONS:
        with r.m.asking(f"the report's {section.__name__.removesuffix('_section')} section"):
            context.update(section(r))
    context.update(statistics_section(r, found))
    unknown = r.m.unknown()
    if unknown:
        near = {k: difflib.get_close_matches(k, r.m.keys(), n=1) for k in unknown}
        named = ", ".join(f"{k!r}" + (f" (did you mean {near[k][0]!r}?)" if near[k] else "")
                          + f" for {' and '.join(r.m.askers(k))}" for k in unknown)
        raise UserError(f"the report reads {named} from {r.results / 'metrics.json'}, which no run there has: a "
                        "misspelt key in a claim or a probe's readings, or metrics aggregated by older code (run "
                        "`miniformer aggregate` again)")
    return context


def load_evidence(study: Study, results: Path, data: TokenData) -> Evidence:
    again = "re-run `miniformer aggregate`, which rewrites it"
    nested = read_json(results / "metrics.json", again)
    foreign = sorted(set(nested) - set(study.names()))
    if foreign:  # aggregated under another profile: its runs would be read with this profile's seeds and rates
        raise UserError(f"{str(results / 'metrics.json')!r} holds runs the {study.profile!r} profile does not run "
                        f"({', '.join(foreign[:4])}{', …' if len(foreign) > 4 else ''}): it was aggregated under "
                        "another profile; pass that one (`--profile <name>`, as the run's claims file names it), or "
                        "re-run `miniformer aggregate` under this one")
    samples = read_json(results / "windows.json", again) if (results / "windows.json").exists() else {}
    # a run's config (its rate, its objective) is the same for every seed: the study's first seed reads it
    sweeps = {e: [(name, study.config(name, study.seeds[0]).train.lr) for name in study.sweep_of(e)]
              for e in study.experiments if study.active(e)}
    init = read_json(results / INIT_FILE, "run `miniformer init-probe`") if (results / INIT_FILE).exists() else None
    configs = {name: study.config(name, study.seeds[0]) for name in study.names()}
    peer = {e: {"own": p["inits"].get("own", {}).get("val_loss"), "ours": p["inits"].get("vaswani", {}).get("val_loss")}
            for e, p in read_crosscheck(results).items()}
    return Evidence(nested, samples, study.findings, unigram_loss(data), sweeps, study.reference, init,
                    {name: c.train.objective for name, c in configs.items()},
                    {name: c.train.lr for name, c in configs.items()}, peer,
                    {name: decay_start(c.train) for name, c in configs.items()}, characters_per_token(data),
                    configs[study.reference].model.n_embd)


def environment(base: RunConfig, perf: dict, data_hash: str) -> dict[str, str]:
    return {
        "git commit": git_commit(),
        "params hash": fingerprint(base, data_hash),
        "prepared data": data_hash,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": base.train.device + " (" + next(iter(perf.values()), {}).get("device", "?") + ")",
        "machine": platform.platform(),
    }


# Figures drawn only where the study has their runs (a sweep, the head counts, the init probe, ...): the template asks
# whether each is there; any other name it reads must have been drawn.
OPTIONAL_FIGURES = ("effects_over_training", "stability", "generation_quality", "heat_nomask", "entropy", "head_count",
                    "init_uniformity")


def template_environment() -> Environment:
    """The report's Jinja environment. StrictUndefined: a name the template reads and no section gave is an error,
    not an empty cell."""
    return Environment(loader=PackageLoader("miniformer.stages", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined)


def other_runs(results: Path, found: list, steps: int, profile: str) -> tuple[list, list[str]]:
    """The other budgets' claims files (results/budgets/), and per finding the marks both tables print: each
    converged claim's verdict at a longer budget, and another design's (the ladder's) where it judged on more seeds."""
    budgets, designs = split_designs(read_budgets(results), steps, profile)
    return budgets, [a + b for a, b in zip(longer_marks(found, steps, budgets), design_marks(found, designs))]


def build_report(study: Study, results: Path, out: Path, data_dir: Path = DATA_DIR) -> Path:
    check_experiments(study.experiments)
    figures.use_palette(study.names(), aliases=position_runs(study.experiments))  # one colour per method, every figure
    provenance = read_provenance(results)  # first: nothing is read from an aggregate edited since it was written
    data = prepared_data(data_dir, provenance)
    ev = load_evidence(study, results, data)
    r = ReportInputs(study, results, RunFiles(study, results, provenance), ev,
                     study.config(study.reference, study.seeds[0]), {}, text_references(data))
    found = claims(ev)
    steps = r.base.train.steps
    budgets, later = other_runs(results, found, steps, study.profile)
    totals = totals_context(found, steps, budgets)
    here = setting_of(study, r.base, data, ev)  # what this run's setting is: its claims file and the settings table
    context = sections_context(r, found)
    hypotheses = {e: spec.get("hypothesis", "") for e, spec in study.experiments.items()}
    groups = {e: spec["group"] for e, spec in study.experiments.items()}
    html = template_environment().get_template("report.html.j2").render(
        **context,
        glance=glance_rows(found, steps, later),
        budget_marks=[budget_mark(c, steps) + m for c, m in zip(found, later)],
        # a section whose runs no claim reads (a small study) has no claim numbers: an empty list, not unknown
        supports=defaultdict(list, sections_of_claims([c.runs for c in CLAIMS], groups)),
        profile=study.profile,
        figs={**dict.fromkeys(OPTIONAL_FIGURES), **r.figs},  # a figure a study cannot draw is None, not unknown
        claims=found,
        findings_cfg=ev.cfg,  # its margins in this run's unit (per token under BPE: Evidence)
        chars_per_token=ev.chars_per_token, margin_per_character=study.findings.equivalence_margin,
        breakages=breakages(ev, hypotheses, groups),
        unigram=ev.unigram,
        at_unigram=at_unigram_level(ev),
        run_count=len(ev.m.nested),
        noise=ev.m.noise(),
        baseline_seeds=ev.m.values(study.reference, "val_loss"),
        baseline_bits=(ev.m.mean(study.reference, "val_loss") or 0.0) / math.log(2),
        unit="character" if study.data_config().tokenizer == "char" else "token",
        env=environment(r.base, context["perf"], provenance["data_content"]),
        references=list(REFERENCES.items()),
        **totals,
        steps=steps,
        budgets=budgets,
        budget_table=budget_rows(found, budgets, headline_effect, steps),
        longest=max([steps, *(b.steps for b in budgets)]),
        **settings_context(claim_records(found), here, steps, read_settings(results)),
        **plateau_context(ev, found),
    )
    atomic_write_text(out, with_contents(html))
    # the claims as data: `miniformer compare`, a paper's table, another budget's report (results/budgets/)
    for name, text in claim_files(found, study.profile, steps, here).items():
        atomic_write_text(results / name, text)
    longest = {**dict(totals["longest_totals"]), "converged claims untested": totals["longest_untested"]}
    write_json(results / "verdicts.json", {**dict(totals["verdict_totals"]), "proxy": totals["proxy_count"],
                                           "converged claims untested": totals["untested_count"],
                                           "still changing": totals["still_changing"],
                                           "budgets": {b.profile: b.steps for b in budgets},
                                           "at the longest budget": longest})
    return out


def build_settings_page(results: Path, mine: Path, out: Path) -> Path:
    """The claims × settings table on a page of its own (report/replication.html): the claims file ``mine`` (this
    checkout's default study, or the reference in docs/) beside every replication setting's under results/settings/.
    Read from sealed claims files only, so it needs no run of the default study here."""
    document = read_claims_document(mine, "run `make study` (it writes results/claims.json), or pass another one")
    settings = read_settings(results)
    if not settings:
        raise UserError(f"no replication setting's claims under {results}/settings/; run `make replication` first")
    name = f"{document.get('profile')} ({mine})"
    html = template_environment().get_template("replication.html.j2").render(
        **settings_context(document["claims"], document.get("setting") or {}, document.get("steps"), settings, name))
    atomic_write_text(out, html)
    return out


def plateau_context(ev: Evidence, found: list) -> dict:
    """The method note's plateau test: how far the reference may still move per 100 steps at its peak rate, and how
    many converged claims resolve no finer than that (flattened for them)."""
    bound, text = ev.plateau()
    return {"plateau_bound": bound, "plateau_text": text, "flat_decaying": FLAT_DECAYING,
            "flattened_count": sum(c.counted and c.converged and bool(c.flattened) and not c.still_changing
                                   for c in found)}


def setting_of(study: Study, base: RunConfig, data: TokenData, ev: Evidence) -> dict:
    """What a claims file records of the setting it was measured in: the text, its reading, the model's size."""
    corpus = study.data_config()
    n_params = ev.m.mean(study.reference, "n_params")
    return {"corpus": corpus.corpus, "tokenizer": corpus.tokenizer, "vocab_size": data.vocab_size,
            "n_layer": base.model.n_layer, "n_head": base.model.n_head, "n_embd": base.model.n_embd,
            "block_size": base.model.block_size, "parameters": None if n_params is None else round(n_params)}


def totals_context(found: list, steps: int, budgets: list) -> dict:
    """This run's verdict totals; and, where a longer budget's claims are under results/budgets/, the same totals
    with each converged claim counted at the longest budget that ran it, on a line of their own."""
    converged = [c for c in found if c.counted and c.converged]
    counted = at_longest_budget(found, steps, budgets)
    longest = [c for c in counted if c.counted and c.converged]
    return {"verdict_totals": list(verdict_totals(found).items()), "converged_count": len(converged),
            "converged_totals": [(v, n) for v, n in verdict_totals(converged).items() if n],
            "untested_count": sum(c.untested_at_convergence for c in converged),
            "longest_totals": list(verdict_totals(counted).items()),
            "longest_converged_totals": [(v, n) for v, n in verdict_totals(longest).items() if n],
            "longest_untested": sum(c.untested_at_convergence for c in longest),
            # which ones, by their number in the claims table: a reader checks each row's reason
            "longest_untested_numbers": [i for i, c in enumerate(counted, 1)
                                         if c.counted and c.converged and c.untested_at_convergence],
            # this run the longest budget: the claims whose effect moved since a shorter one
            # are untested here too (the shorter budget's report counts them so)
            "moved_since_shorter": 0 if any(b.steps > steps for b in budgets) else
            sum(c.untested_at_convergence for c in longest) - sum(c.untested_at_convergence for c in converged),
            "check_totals": list(verdict_totals([c for c in found if is_check(c)]).items()),
            "proxy_count": sum(not c.counted for c in found), "still_changing": sum(c.still_changing for c in found)}


def at_unigram_level(ev: Evidence) -> list[str]:
    """Experiments whose mean val loss is no better than the unigram model's: they have not learned from context."""
    if ev.unigram is None:
        return []
    return [e for e in ev.m.nested if (v := ev.m.mean(e, "val_loss")) is not None and v >= ev.unigram]


def is_check(c) -> bool:
    """A first-principles or by-construction row: argued from the mechanism, with no published number."""
    return c.counted and (c.source == "first principles" or c.test == TESTS["structural"])


def verdict_totals(found: list) -> dict[str, int]:
    """How many claims reached each verdict, proxies and controls left out (they are counted apart)."""
    return {v: sum(c.verdict == v and c.counted for c in found) for v in VERDICTS}
