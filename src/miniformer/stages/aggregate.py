"""Stage `aggregate`: every run's metrics into results/metrics.json (what `dvc metrics` reads), CSV tables, the
per-window samples behind the report's intervals into results/windows.json, and every run's loss curves grouped for
`dvc plots` into results/plots/."""

from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd

from miniformer.errors import UserError
from miniformer.evaluation.probes import PROBES, TRAINING_SCALARS
from miniformer.layout import (
    AGGREGATES,
    DATA_DIR,
    PROVENANCE,
    eval_dir,
    run_dir,
    seed_folder,
)
from miniformer.params import RunConfig, Study
from miniformer.runtime.checkpoints import evaluation_fingerprint, fingerprint
from miniformer.runtime.files import atomic_write_text, read_json, write_json
from miniformer.runtime.provenance import CHECKSUM, check_digest, digests, read_sealed_json, write_sealed_json
from miniformer.runtime.tokendata import data_hash_of


def finished_run(config: RunConfig, results: Path, exp: str, seed: int, data_hash: str) -> tuple[dict, dict]:
    """A run's train metrics and eval.json, refused unless they describe one finished training of the config
    params.yaml asks for, on the prepared data there now: the training reached its last step (or diverged, a result),
    both files are as they were written (sealed), the evaluation read that training's checkpoint under today's eval
    params and evaluation code, and every file evaluate wrote beside eval.json is the one eval.json records."""
    name = f"{exp} --seed {seed}"
    retrain = f"re-run `miniformer train {name}` (it rewrites a finished run's files from its checkpoint)"
    reevaluate = f"re-run `miniformer evaluate {name}` (or delete the file and re-run the DAG)"
    run_folder, eval_folder = run_dir(results, exp, seed), eval_dir(results, exp, seed)
    train = read_sealed_json(run_folder / "metrics.json", retrain)
    ev = read_sealed_json(eval_folder / "eval.json", f"{reevaluate}, which rewrites it")
    if train.get("config_fingerprint") != config.config_fingerprint():
        raise UserError(f"run {exp}/{seed_folder(seed)} was trained with other params than params.yaml now gives it; "
                        f"re-train it (`miniformer train {name}`), then evaluate it")
    if train.get("data_content") != data_hash:
        raise UserError(f"run {exp}/{seed_folder(seed)} was trained on other prepared data than data/prepared holds "
                        f"now (the corpus changed); re-train it (`miniformer train {name}`), then evaluate it")
    if not train.get("diverged") and train.get("steps_done") != train.get("steps_planned"):
        raise UserError(f"run {exp}/{seed_folder(seed)} stopped at step {train.get('steps_done')} of "
                        f"{train.get('steps_planned')}; finish it (`miniformer train {name}`), then evaluate it")
    if train.get("fingerprint") != fingerprint(config, data_hash):
        raise UserError(f"run {exp}/{seed_folder(seed)} was trained by other training code than this checkout's; "
                        f"re-train it (`miniformer train {name}`), then evaluate it")
    for written_before in train.get("files", {}):
        check_digest(run_folder, written_before, train["files"], str(run_folder / "metrics.json"), retrain)
    if ev.get("fingerprint") != train.get("fingerprint"):
        raise UserError(f"{str(eval_folder / 'eval.json')!r} evaluates another training of run "
                        f"{exp}/{seed_folder(seed)} than the one in {str(run_folder)!r}; {reevaluate}")
    if ev.get("evaluation") != evaluation_fingerprint(train["fingerprint"], config):
        raise UserError(f"{str(eval_folder / 'eval.json')!r} was made under other eval params or evaluation code "
                        f"than this run now has; {reevaluate}")
    for written_before in ev.get("files", {}):
        check_digest(eval_folder, written_before, ev["files"], str(eval_folder / "eval.json"), reevaluate)
    return train, ev


def run_scalars(train: dict, ev: dict) -> dict:
    """The flat, deterministic numbers of one run (no timings: `dvc metrics diff` after a re-run must show nothing):
    the training's, then each probe's in PROBES order."""
    out = {key: train.get(key) for key in TRAINING_SCALARS}
    for probe in PROBES:
        out.update(probe.scalars(ev))
    return out


def run_samples(results: Path, exp: str, seed: int) -> dict:
    """What the report's intervals resample: per-window val losses, per-item probe outcomes, the val curve."""
    out = read_json(eval_dir(results, exp, seed) / "windows.json")  # its digest was checked against eval.json
    curve = run_dir(results, exp, seed) / "curve.json"
    if curve.exists():
        points = read_sealed_json(curve, f"re-train the run (`miniformer train {exp} --seed {seed}`)")["points"]
        out["curve"] = {"steps": [p["step"] for p in points], "windows": [p["windows"] for p in points]}
    return out


def headline(nested: dict, reference: str) -> dict:
    """The few numbers `dvc metrics show` prints (every run's detail stays in metrics.json, which `dvc metrics diff
    --targets results/metrics.json` compares key by key)."""
    base = [r["val_loss"] for r in nested.get(reference, {}).values() if r.get("val_loss") is not None]
    mean = statistics.fmean(base) if base else None
    sd = statistics.stdev(base) if len(base) > 1 else None
    return {
        "runs": sum(len(runs) for runs in nested.values()),
        "diverged_runs": sum(bool(r.get("diverged")) for runs in nested.values() for r in runs.values()),
        "baseline_val_loss": mean,
        "baseline_val_loss_sd": sd,
    }


PLOTTED = ("train_loss", "val_loss")  # step-log columns drawn by `dvc plots`, one folder each (dvc.yaml's plots)


def write_plot_series(results: Path, groups: dict[tuple[str, int], str]) -> None:
    """results/plots/<column>/<group>.csv: step, run, value for every run of an experiment group (sweep points with
    their experiment), so `dvc plots show` draws one figure per group with a line per run and `dvc plots diff` puts
    two revisions of the same figure side by side. Long format: the group's runs come from params, not from a list
    kept in dvc.yaml."""
    rows: dict[str, list[pd.DataFrame]] = {}
    for (exp, seed), group in groups.items():
        log = run_dir(results, exp, seed) / "log.tsv"
        if not log.exists():
            continue
        df = pd.read_csv(log, sep="\t")
        rows.setdefault(group, []).append(df.assign(run=f"{exp}/{seed_folder(seed)}"))
    for column in PLOTTED:
        folder = results / "plots" / column
        if folder.exists():
            for stale in folder.glob("*.csv"):  # a group no longer in params.yaml
                stale.unlink()
        for group, frames in rows.items():
            table = pd.concat(frames)[["step", "run", column]].dropna()
            atomic_write_text(folder / f"{group}.csv", table.to_csv(index=False))


def checked_runs(study: Study, results: Path,
                 data_dir: Path = DATA_DIR) -> list[tuple[str, int, RunConfig, dict, dict]]:
    """Every run of the study as (experiment, seed, train metrics, eval.json), each checked (finished_run) and its
    timings too, before anything is written: a refused input leaves the aggregates already there as they were."""
    data_hash = data_hash_of(data_dir)
    checked = []
    for exp, seed in study.runs():
        config = study.config(exp, seed)  # built once per run: every check and table below reads this one
        train, ev = finished_run(config, results, exp, seed, data_hash)
        perf_path = run_dir(results, exp, seed) / "perf.json"
        if perf_path.exists():
            run_perf(perf_path, train["fingerprint"], f"{exp} --seed {seed}")
        checked.append((exp, seed, config, train, ev))
    return checked


def aggregate(study: Study, results: Path, data_dir: Path = DATA_DIR) -> dict:
    data_hash = data_hash_of(data_dir)
    nested: dict[str, dict] = {}
    samples: dict[str, dict] = {}
    rows, perf, provenance = [], {}, {}
    checked = checked_runs(study, results, data_dir)
    for exp, seed, cfg, train, ev in checked:
        provenance[f"{exp}/{seed_folder(seed)}"] = {"training": train["fingerprint"], "evaluation": ev["evaluation"],
                                                    "eval_files": ev.get("files", {})}
        scalars = run_scalars(train, ev)
        nested.setdefault(exp, {})[seed_folder(seed)] = scalars
        samples.setdefault(exp, {})[seed_folder(seed)] = run_samples(results, exp, seed)
        rows.append({"experiment": exp, "group": cfg.group, "seed": seed, **scalars})
        perf_path = run_dir(results, exp, seed) / "perf.json"
        if perf_path.exists():
            perf[f"{exp}/{seed_folder(seed)}"] = run_perf(perf_path, train["fingerprint"], f"{exp} --seed {seed}")
    write_json(results / "metrics.json", nested)
    write_json(results / "headline.json", headline(nested, study.reference))
    write_json(results / "windows.json", samples)
    write_json(results / "perf.json", perf)
    write_plot_series(results, {(exp, seed): cfg.group for exp, seed, cfg, _, _ in checked})
    (results / "tables").mkdir(parents=True, exist_ok=True)
    atomic_write_text(results / "tables" / "runs.csv", pd.DataFrame(rows).to_csv(index=False))
    # last, sealed: what made every run's numbers, and the digests of the aggregates the report reads
    write_sealed_json(results / PROVENANCE, {"data_content": data_hash, "runs": provenance,
                                             "files": digests(results, AGGREGATES)})
    return nested


def run_perf(path: Path, training: str, name: str) -> dict:
    """A run's timings, only if they belong to the training aggregated (they are rewritten with it)."""
    retrain = f"re-run `miniformer train {name}` (it rewrites a finished run's files from its checkpoint)"
    p = read_sealed_json(path, retrain)
    if p.get("fingerprint") != training:
        raise UserError(f"{str(path)!r} times another training than the run's metrics.json; {retrain}")
    check_digest(path.parent, "log.tsv", p.get("files", {}), str(path), retrain)  # the loss curves drawn
    return {k: v for k, v in p.items() if k not in ("fingerprint", "files", CHECKSUM)}
