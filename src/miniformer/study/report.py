"""Stage `report`: figures + computed verdicts -> one self-contained report/report.html (images inlined as base64)."""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from jinja2 import Environment, PackageLoader, select_autoescape

from miniformer.crosscheck import read_crosscheck
from miniformer.files import atomic_write_text, write_json
from miniformer.layout import eval_dir, run_dir, seed_folder
from miniformer.network.objectives import PROBE_CANDIDATES
from miniformer.params import Study
from miniformer.study import figures
from miniformer.study.aggregate import read_json
from miniformer.study.claims import check_experiments, claims
from miniformer.study.findings import (
    HEAD_RUNS,
    POSITION_RUNS,
    STABILITY_ROWS,
    VERDICTS,
    Evidence,
    breakages,
    peer_comparisons,
)


class RunFiles:
    """Reads one study's per-run files (first seed of each experiment unless asked)."""

    def __init__(self, study: Study, results: Path) -> None:
        self.study, self.results = study, results

    def seed(self, exp: str) -> int:
        return self.study.seeds_for(exp)[0]

    def log(self, exp: str, seed: int | None = None) -> pd.DataFrame:
        path = run_dir(self.results, exp, self.seed(exp) if seed is None else seed) / "log.tsv"
        return pd.read_csv(path, sep="\t") if path.exists() else pd.DataFrame()

    def eval(self, exp: str) -> dict:
        return read_json(eval_dir(self.results, exp, self.seed(exp)) / "eval.json")

    def attention(self, exp: str) -> dict:
        return read_json(eval_dir(self.results, exp, self.seed(exp)) / "attention.json")

    def generations(self, exp: str) -> dict:
        return read_json(eval_dir(self.results, exp, self.seed(exp)) / "generations.json")

    def samples(self, exp: str) -> list[dict]:
        path = run_dir(self.results, exp, self.seed(exp)) / "samples.jsonl"
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def group_of(study: Study, group: str) -> list[str]:
    return [e for e, spec in study.experiments.items() if spec["group"] == group]


def unigram_loss(data_dir: Path) -> float | None:
    """Cross-entropy of the val split under the train split's token frequencies (add-one): the no-context floor."""
    from miniformer.prepare import TokenData

    try:
        data = TokenData(data_dir)
    except Exception:  # noqa: BLE001 - the report still renders without this reference line
        return None
    V = data.vocab_size
    counts = np.bincount(np.asarray(data.splits["train"]), minlength=V).astype(np.float64) + 1
    logp = np.log(counts / counts.sum())
    val = np.asarray(data.splits["val"])
    return float(-logp[val].mean())


def build_report(study: Study, results: Path, out: Path, data_dir: Path = Path("data/prepared")) -> Path:
    check_experiments(study.experiments)
    nested = read_json(results / "metrics.json")
    samples = read_json(results / "windows.json") if (results / "windows.json").exists() else {}
    unigram = unigram_loss(data_dir)
    sweeps = {e: [(name, study.config(name, study.seeds_for(name)[0]).train.lr) for name in study.sweep_of(e)]
              for e in study.experiments}
    ev = Evidence(nested, samples, study.findings, unigram, sweeps)
    m = ev.m
    found = claims(ev)
    files = RunFiles(study, results)
    base = study.config("baseline", study.seeds[0])
    T = base.model.block_size
    figs: dict[str, str] = {}
    present = lambda exps: [e for e in exps if e in nested]  # noqa: E731

    # 3. positions
    pos = {k: v for k, v in POSITION_RUNS.items() if v in nested}
    figs["pos_curves"] = figures.to_base64_png(
        figures.curves({k: files.log(v) for k, v in pos.items()}, "val_loss", "Position methods: val loss")
    )
    multiples = [int(x) for x in base.eval.length_multiples]
    sweep = pd.DataFrame(
        {mult: [m.mean(v, f"loss_at_{mult}x") for v in pos.values()] for mult in multiples}, index=list(pos)
    )
    figs["pos_lengths"] = figures.to_base64_png(figures.length_sweep(sweep, T))
    top = str(max(multiples))
    per_pos = {k: files.eval(v)["lengths"].get(top, {}).get("per_position") for k, v in pos.items()}
    figs["pos_per_position"] = figures.to_base64_png(
        figures.per_position({k: v for k, v in per_pos.items() if v}, int(top) * T, T)
    )
    learned_reason = (
        files.eval("pos_learned")["lengths"].get(top, {}).get("reason") if "pos_learned" in pos.values() else None
    )
    order = {k: files.eval(v)["order_sensitivity"] for k, v in pos.items()}
    pairs = {}
    for e in study.experiments:
        mp = files.eval(e).get("minimal_pairs") if m.has(e) else None
        if mp and mp.get("true_order_preferred") is not None:
            pairs[e] = {"rate": m.mean(e, "order_preference"), "estimate": ev.preference(e), "ties": mp["ties"],
                        "pairs": mp["pairs"], "scoring": mp["scoring"]}
    long_gens = {k: files.generations(v) for k, v in pos.items()}

    # 4. single head
    single = files.attention("attn_single_head") if "attn_single_head" in nested else files.attention("baseline")
    figs["heat_single"] = figures.to_base64_png(
        figures.attention_heatmap(single["weights"][-1][0], single["tokens"], "single head, last layer (causal)")
    )
    nomask = files.attention("attn_no_mask") if "attn_no_mask" in nested else None
    if nomask:
        figs["heat_nomask"] = figures.to_base64_png(
            figures.attention_heatmap(
                nomask["weights"][-1][0], nomask["tokens"], "single head, last layer, NO causal mask"
            )
        )
    ent_logs = {e: files.log(e) for e in present(["attn_single_head", "attn_no_scale"])}
    if ent_logs:
        for df in ent_logs.values():
            cols = [c for c in df.columns if c.startswith("entropy_")]
            df["mean_entropy"] = df[cols].mean(axis=1) if cols else None
        figs["entropy"] = figures.to_base64_png(
            figures.curves(ent_logs, "mean_entropy", "Attention entropy during training", "nats")
        )
    attn_exps = present(group_of(study, "attention"))
    figs["attn_curves"] = figures.to_base64_png(
        figures.curves({e: files.log(e) for e in attn_exps}, "train_loss", "Attention breakages: train loss")
    )

    # 5. heads
    baseline_att = files.attention("baseline")
    figs["heads_grid"] = figures.to_base64_png(
        figures.head_grid(baseline_att["weights"][0], baseline_att["tokens"], "baseline, layer 0: every head")
    )
    head_runs = {h: e for h, e in HEAD_RUNS.items() if e in nested}
    means = [m.mean(e, "val_loss") for e in head_runs.values()]
    if all(x is not None for x in means) and head_runs:
        stds = [m.noise("val_loss") if e == "baseline" else 0.0 for e in head_runs.values()]
        figs["head_count"] = figures.to_base64_png(figures.head_count(list(head_runs), means, stds, base.model.n_embd))
    diversity = {e: m.mean(e, "head_diversity") for e in present(["baseline", *group_of(study, "heads")])}

    # 6. block
    block_exps = present(["baseline", *group_of(study, "block")])
    figs["block_curves"] = figures.to_base64_png(
        figures.curves({e: files.log(e) for e in block_exps}, "train_loss", "Block variants: train loss")
    )
    finals = {e: m.mean(e, "val_loss") for e in block_exps if m.mean(e, "val_loss") is not None}
    figs["block_bars"] = figures.to_base64_png(
        figures.bars(finals, {"baseline": m.noise()}, "Block variants", "val loss")
    )
    uniformity = {e: m.mean(e, "hidden_uniformity") for e in block_exps}

    # 7. training of the mini-former
    base_logs = {seed_folder(s): files.log("baseline", s) for s in study.seeds_for("baseline")}
    figs["train_val"] = figures.to_base64_png(
        figures.curves(
            {f"{k} train": df.rename(columns={"train_loss": "y"}) for k, df in base_logs.items()}
            | {f"{k} val": df.rename(columns={"val_loss": "y"}) for k, df in base_logs.items()},
            "y",
            "Baseline: train and val loss per seed",
        )
    )
    perf = read_json(results / "perf.json") if (results / "perf.json").exists() else {}
    speed = {k.rsplit("/", 1)[0]: v.get("tokens_per_s_median") or 0 for k, v in perf.items()
             if k.endswith("seed0") and k.rsplit("/", 1)[0] in study.experiments}
    if speed:
        figs["speed"] = figures.to_base64_png(figures.bars(speed, None, "Training throughput", "tokens/s"))

    # 8. objectives
    obj_exps = present(["baseline", *group_of(study, "objective")])
    figs["obj_curves"] = figures.to_base64_png(
        figures.curves({e: files.log(e) for e in obj_exps}, "val_loss", "Objectives: val loss (NOT comparable across)")
    )
    probe = {e: files.eval(e)["probe"] for e in obj_exps}

    # fidelity: the peer implementation's numbers, when `miniformer crosscheck` has run
    peer = {e: v for e, v in read_crosscheck(results / "crosscheck").items() if e in nested}
    crosscheck = peer_comparisons(m, peer, {e: seed_folder(files.seed(e)) for e in peer})
    peer_version = next(iter(peer.values()), {}).get("peer_version")
    init_pair = {e: m.mean(e, "val_loss") for e in ("block_post_norm", "block_post_norm_gpt2_init", "baseline",
                                                     "block_gpt2_init") if m.has(e)}

    hypotheses = {e: spec.get("hypothesis", "") for e, spec in study.experiments.items()}
    groups = {e: spec["group"] for e, spec in study.experiments.items()}

    # statistics: the stability map over the learning-rate sweeps, and each val-loss effect over training
    stability = ev.stability_map()
    if stability:
        figs["stability"] = figures.to_base64_png(figures.stability_map(stability, unigram))
    over_training = {c.claim: ev.curve(*c.curve) for c in found if c.curve}
    over_training = {k: v for k, v in over_training.items() if len(v) >= 2}
    if over_training:
        figs["effects_over_training"] = figures.to_base64_png(figures.effects_over_training(over_training))
    templates = PackageLoader("miniformer.study", "templates")
    env = Environment(loader=templates, autoescape=select_autoescape(["html", "j2"]))
    html = env.get_template("report.html.j2").render(
        profile=study.profile,
        figs=figs,
        claims=found,
        findings_cfg=study.findings,
        breakages=breakages(ev, hypotheses, groups),
        unigram=unigram,
        stability=stability,
        curve_tokens=base.train.curve_tokens,
        probe_candidates=PROBE_CANDIDATES,
        stability_rows=STABILITY_ROWS,
        noise=m.noise(),
        baseline_seeds=m.values("baseline", "val_loss"),
        multiples=multiples,
        block_size=T,
        sweep=sweep,
        learned_reason=learned_reason,
        order=order,
        pairs=pairs,
        pair_count=next(iter(pairs.values()), {}).get("pairs", 0),
        long_gens=long_gens,
        single=single,
        nomask=nomask,
        m=m,
        diversity=diversity,
        uniformity=uniformity,
        probe=probe,
        crosscheck=crosscheck,
        peer_version=peer_version,
        init_pair=init_pair,
        init=base.model.init,
        samples={e: files.samples(e) for e in obj_exps},
        base_samples=files.samples("baseline"),
        speed=speed,
        perf=perf,
        env={
            "git commit": git_commit(),
            "params hash": base.fingerprint(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": base.train.device + " (" + next(iter(perf.values()), {}).get("device", "?") + ")",
            "machine": platform.platform(),
        },
    )
    atomic_write_text(out, html)
    verdicts = {v: sum(c.verdict == v for c in found) for v in VERDICTS}
    write_json(results / "verdicts.json", {**verdicts, "still changing": sum(c.still_changing for c in found)})
    return out
