"""`miniformer <stage> …`: the one entry point that Snakemake, DVC and users all call."""

from __future__ import annotations

import argparse
import atexit
import math
import os
import sys
import threading
from pathlib import Path

from miniformer.devices import DEVICES
from miniformer.errors import UserError
from miniformer.layout import DATA_DIR, RESULTS, eval_dir, run_dir


def _study(args):
    from miniformer.params import Study

    return Study.load(args.params, args.profile)


def _writable(folder: Path) -> None:
    """Fail before any work if the output folder cannot be created and written (a file in the way, permissions)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UserError(
            f"cannot write to {str(folder)!r} ({e.strerror}); choose another --results/--out folder"
        ) from None


def bounded(kind: type, low: float, high: float | None = None):
    """An argparse type: a number of ``kind`` within [low, high]; anything else is argparse's one-line usage error."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value):  # float('nan') and float('inf') parse, and nan passes both comparisons below
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if value < low or (high is not None and value > high):
            span = f">= {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"{text} must be {span}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def output_file(suffixes: tuple[str, ...]):
    """An argparse type: a file to write, whose folder exists, that is not a folder, with one of ``suffixes``."""

    def parse(text: str) -> Path:
        path = Path(text)
        if path.is_dir():
            example = path / f"out{suffixes[0]}"
            raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name, e.g. {example}")
        if path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(f"{text!r} must end in {' or '.join(suffixes)}")
        if not path.parent.is_dir():
            raise argparse.ArgumentTypeError(f"folder {str(path.parent)!r} does not exist; create it first")
        return path

    parse.__name__ = "path"
    return parse


STUDY_FLAGS = ("params", "profile", "results", "data")
RUN_FLAGS = ("results", "data")  # what the commands that use a trained run read: they never read params.yaml
# The study-wide flags each command reads; it is offered no other, so a flag that would do nothing is refused.
COMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "prepare": ("params", "profile"), "course": ("params", "results", "data"),
    "train": STUDY_FLAGS, "evaluate": STUDY_FLAGS, "run": STUDY_FLAGS, "run-experiment": STUDY_FLAGS,
    "aggregate": STUDY_FLAGS, "init-probe": ("params", "profile", "results"),
    "report": STUDY_FLAGS, "dvc-record": ("params", "profile"),
    "crosscheck": STUDY_FLAGS, "list": ("params", "profile"), "settle-times": (), "runs": ("results", "data"),
    "set-profile": ("params",), "check-params": ("params", "profile"),
    "compare": ("results",), "metrics-diff": ("results",), "replicate": ("params",),
    "generate": RUN_FLAGS, "score": RUN_FLAGS, "export": RUN_FLAGS, "attention": RUN_FLAGS,
}
# the DAG tools' entry points, kept out of the main help
INTERNAL = ("run-experiment", "dvc-record", "list", "check-params")
MAX_GENERATE = 100_000  # tokens per `generate` call: beyond, a typo would run for hours
MAX_SAMPLE_SEED = 2**32 - 1  # torch's generators take at most 64 bits; 32 are more seeds than anyone tries
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def cmd_prepare(args) -> None:
    from miniformer.stages.prepare import prepare

    study = _study(args)
    if args.versioned:
        from miniformer.corpus import check_versioned

        check_versioned(study.data_config().corpus)
    _writable(args.out)
    meta = prepare(study.data_config(), Path(args.out), min_tokens=study.longest_window())
    print(f"prepared {meta['corpus']}: {meta['tokens']} tokens, vocab {meta['vocab_size']} ({meta['tokenizer']})")


def cmd_course(args) -> None:
    """The course profile in a few minutes on a laptop CPU: prepare its Chinese corpus into the study's data folder
    and train the course table's runs (seed 0) into results/, so each of the table's commands runs as written."""
    from miniformer.params import Study
    from miniformer.stages.prepare import prepare
    from miniformer.study.roles import COURSE_RUNS  # the runs the README's course table uses

    study = Study.load(args.params, "course")
    _writable(args.data)
    meta = prepare(study.data_config(), Path(args.data), min_tokens=study.longest_window())
    print(f"prepared the course corpus {meta['corpus']}: {meta['tokens']['train']} training characters, "
          f"vocab {meta['vocab_size']}")
    for experiment in COURSE_RUNS:
        train_one(study, experiment, study.seeds_for(experiment)[0], args.results, args.data, "auto")
    print("now try the README's course table, e.g. miniformer attention attn_single_head --text \"我打你然后你打我\"")


def train_one(study, experiment: str, seed: int, results: Path, data: Path, mode: str) -> None:
    from miniformer.stages.train import train

    out = run_dir(results, experiment, seed)
    _writable(out)
    # params.yaml's `tracking: tensorboard`: events beside the runs, outside every stage's outputs
    tensorboard = Path(results, "tensorboard", experiment, f"seed{seed}") if study.tracking == "tensorboard" else None
    metrics = train(study.config(experiment, seed), Path(data), out, resume=mode, tensorboard=tensorboard)
    status = f"diverged at step {metrics['divergence_step']}" if metrics["diverged"] else "done"
    val = metrics["final_val_loss_estimate"]
    print(f"{experiment}/seed{seed}: {status}, final val (estimate) " + ("n/a" if val is None else f"{val:.3f}"))


def evaluate_one(study, experiment: str, seed: int, results: Path, data: Path) -> None:
    from miniformer.stages.evaluate import evaluate

    out = eval_dir(results, experiment, seed)
    _writable(out)
    result = evaluate(study.config(experiment, seed), run_dir(results, experiment, seed), out, Path(data))
    print(f"{experiment}/seed{seed}: val {result['val_loss']}, test {result['test_loss']}")


def cmd_train(args) -> None:
    mode = "never" if args.no_resume else ("require" if args.resume else "auto")
    study = _study(args)
    study.check_run(args.experiment, args.seed)  # a seed the profile does not run would be a run no stage reads
    train_one(study, args.experiment, args.seed, args.results, args.data, mode)


def cmd_evaluate(args) -> None:
    evaluate_one(_study(args), args.experiment, args.seed, args.results, args.data)


def cmd_run(args) -> None:
    """The Snakemake job: train one experiment × seed, then evaluate it, in one process.

    One job rather than a train and an evaluate job saves a Python start and a torch import per run, a large share of a
    smoke run's time (benchmarks/RESULTS.md, "A job's start-up"). An evaluation-only change
    re-runs the job without retraining: the finished checkpoint of the same config and code resumes at its last step.
    """
    study = _study(args)
    study.check_run(args.experiment, args.seed)
    train_one(study, args.experiment, args.seed, args.results, args.data, "auto")
    evaluate_one(study, args.experiment, args.seed, args.results, args.data)


def cmd_run_experiment(args) -> None:
    """The DVC stage: train every seed of one experiment, then evaluate each, in one process.

    One stage rather than a train and an evaluate stage per experiment saves a Python start and a torch import per
    experiment (benchmarks/RESULTS.md). A re-run for an evaluation change does not retrain: the finished checkpoint
    of the same config and code is resumed at its last step.
    """
    from miniformer.study.claims import check_experiments

    study = _study(args)
    check_experiments(study.experiments)  # DVC's first stage per experiment: fail before training, not at the report
    if args.experiment not in study.experiments:
        raise UserError(f"unknown experiment {args.experiment!r}; params.yaml's experiments are "
                        f"{', '.join(study.experiments)}")
    # the experiment's seeds, then its sweep's points (DVC has one stage per experiment)
    runs = [(name, seed) for name in study.sweep_of(args.experiment) for seed in study.seeds_for(name)]
    if not runs:  # not in this profile (params.yaml `profiles:`): DVC still wants the stage's outputs to exist
        for folder in (Path(args.results) / "runs" / args.experiment, Path(args.results) / "eval" / args.experiment):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "NOT_RUN").write_text(f"{args.experiment} does not run in the {study.profile} profile\n")
        print(f"{args.experiment}: not in the {study.profile} profile (params.yaml: profiles), nothing to run")
        return
    for name, seed in runs:
        train_one(study, name, seed, args.results, args.data, "auto")
    for name, seed in runs:
        evaluate_one(study, name, seed, args.results, args.data)


def cmd_init_probe(args) -> None:
    from miniformer.stages.init_probe import INIT_FILE, init_probe

    _writable(args.results)
    init_probe(_study(args), Path(args.results))
    print(f"token uniformity against depth at init -> {Path(args.results) / INIT_FILE}")


def cmd_aggregate(args) -> None:
    from miniformer.stages.aggregate import aggregate

    aggregate(_study(args), Path(args.results), Path(args.data))


def file_figures() -> None:
    """Figures go to files here: the Agg backend needs no display. Chosen by the commands that draw, never by the
    package at import, so a notebook that imports miniformer keeps its inline figures."""
    import matplotlib

    matplotlib.use("Agg")


def cmd_report(args) -> None:
    file_figures()
    from miniformer.stages.report import build_report

    out = Path(args.out)
    if out.is_dir():  # found before the half minute the report takes, not by the write at its end
        raise UserError(f"--out {args.out!r} is a folder; give the report's file name, e.g. {out / 'report.html'}")
    path = build_report(_study(args), Path(args.results), out, Path(args.data))
    print(f"report written to {path}")


def cmd_crosscheck(args) -> None:
    from miniformer.stages.crosscheck import crosscheck

    out = Path(args.results) / "crosscheck"
    _writable(out)
    result = crosscheck(_study(args), Path(args.data), out, args.experiments or None)
    print(f"cross-check of {len(result)} variant(s) written to {out}/")


def cmd_runs(args) -> None:
    from miniformer.stages.explore import list_runs

    for line in list_runs(Path(args.results), Path(args.data)):
        print(line)


def cmd_compare(args) -> int:
    from miniformer.stages.compare import run_compare

    return run_compare(Path(args.results), Path(args.against))


def cmd_replicate(args) -> None:
    from miniformer.params import REPLICATION
    from miniformer.stages.compare import REFERENCE_CLAIMS
    from miniformer.stages.replicate import replicate
    from miniformer.stages.report import build_settings_page
    from miniformer.study.claim_table import CLAIMS_JSON

    if not args.table_only:
        replicate(Path.cwd(), Path(args.params), args.settings or list(REPLICATION), args.cores)
    # the default setting's claims: this checkout's default study where it ran, else the reference in docs/
    mine = RESULTS / CLAIMS_JSON if (RESULTS / CLAIMS_JSON).is_file() else Path("docs") / REFERENCE_CLAIMS
    page = build_settings_page(RESULTS, mine, Path(args.out))
    print(f"claims × settings: {page} (beside {mine}); `make study` or `make report` puts the same table in the "
          "study's report")


def cmd_metrics_diff(args) -> int:
    from miniformer.stages.metrics_diff import run_metrics_diff

    return run_metrics_diff(Path(args.results), Path(args.against), args.all)


def cmd_generate(args) -> None:
    from miniformer.stages import explore

    run = explore.load(args.run, Path(args.results), args.seed, Path(args.data), args.device)
    print(explore.generate(run, args.prompt, args.tokens, args.temperature, args.top_k, args.sample_seed))


def cmd_score(args) -> None:
    from miniformer.stages import explore

    run = explore.load(args.run, Path(args.results), args.seed, Path(args.data), args.device)
    if args.file:
        try:
            lines = Path(args.file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"cannot read --file {args.file!r} ({getattr(e, 'strerror', None) or e}); give a UTF-8 "
                            "text file, one sentence per line") from None
        explore.score_file(run, lines, args.out)
        return
    if args.out is not None:
        raise UserError("-o/--out is for --file (a CSV of every line); a single sentence prints its scores")
    if not args.sentence:
        raise UserError("give a sentence to score, or --file with one sentence per line")
    if args.versus is not None:
        print(explore.compare(run, args.sentence, args.versus))
        return
    r = explore.score(run, args.sentence)
    print(f"{r['method']}: mean loss {r['mean_loss']:.4f} nats/token, perplexity {r['perplexity']:.3f}")
    for t in r["tokens"]:
        print(f"  {t['token']!r:8} {t['loss']:.3f}")


def cmd_export(args) -> None:
    from miniformer.layout import run_name, seed_of
    from miniformer.runtime.tokendata import TokenData
    from miniformer.stages import explore
    from miniformer.stages.export import corpus_prompt, export_run

    results = Path(args.results)
    path = explore.resolve_run(args.run, results, args.seed)
    data = TokenData(Path(args.data))  # its meta.json (checked against the token files) and the card's prompt
    meta, prompt = data.meta, corpus_prompt(data)
    evaluated = None  # the run's evaluation folder, when the run lives in a study tree
    if (path / "ckpt.pt").exists() and path.is_relative_to(results / "runs"):
        evaluated = eval_dir(results, run_name(results, path), seed_of(path))
    out = export_run(path, meta, evaluated, Path(args.dir), f"{args.run}", prompt)
    print(f"exported {path} to {out}/ (load it with miniformer.load({str(out)!r}))")


def cmd_attention(args) -> None:
    file_figures()
    from miniformer.stages import explore

    run = explore.load(args.run, Path(args.results), args.seed, Path(args.data), args.device)
    # by default beside the run's other outputs, never into the folder the command runs in (a repository's root)
    default = Path(args.results) / "explore" / f"attention-{args.run.replace('/', '_')}"
    out = args.out or default.with_suffix(".html" if args.html else ".png")
    if args.html != (out.suffix == ".html"):
        raise UserError("--html writes a hoverable page: give it an -o ending in .html (and no --html for figures)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out = explore.attention_figure(run, args.text, args.layer, args.head, args.all, out)
    print(f"wrote {out}")


def cmd_dvc_record(args) -> None:
    import yaml

    from miniformer.stages.dvc_record import record

    declared = (yaml.safe_load(Path(args.params).read_text()) or {}).get("profile", "default")
    if args.profile and args.profile != declared:
        Path(args.ran).unlink(missing_ok=True)
        print(
            f"dvc: not recorded: this run used profile {args.profile!r} but params.yaml says {declared!r}, "
            "so DVC's record would be wrong; set `profile:` in params.yaml to keep both tools in step"
        )
        return
    stages = record(Path(args.ran))
    if stages:
        print(f"dvc: recorded {len(stages)} stage(s) that ran: {' '.join(stages)}")


def cmd_set_profile(args) -> None:
    """Name the study profile in params.yaml, the one place both tools read it (make smoke / make study call this
    before they run, so that DVC's record matches what Snakemake ran)."""
    import re

    from miniformer.params import PROFILES

    if args.name not in PROFILES:
        raise UserError(f"unknown profile {args.name!r}; choose one of {', '.join(PROFILES)}")
    path = Path(args.params)
    if not path.is_file():
        raise UserError(f"no params file at {str(path)!r}; run from the project root or pass --params")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"params file {str(path)!r} is not UTF-8 text; save it as UTF-8, or restore it with "
                        "`git checkout params.yaml`") from None
    line = re.compile(r"^profile:[ \t]*[^\s#]*", flags=re.M)  # the value only: a comment after it stays
    if not line.search(text):
        raise UserError(f"{str(path)!r} has no top-level `profile:` line to set; add `profile: default` to it")
    path.write_text(line.sub(f"profile: {args.name}", text, count=1), encoding="utf-8")
    print(f"params.yaml: profile: {args.name}")


PARAMS_CHECKED = "params.yaml: every key and value valid\n"  # constant: a re-check never re-runs what follows it


def cmd_check_params(args) -> None:
    """Validate the whole params file (every key, not only those a stage reads) and write a constant stamp: the
    first DVC stage, so an unknown key or a bad value is refused before any stage removes an output to re-make it."""
    from miniformer.runtime.files import atomic_write_text
    from miniformer.study.claims import check_experiments

    study = _study(args)
    check_experiments(study.experiments)
    atomic_write_text(Path(args.out), PARAMS_CHECKED)
    print(PARAMS_CHECKED.strip())


def cmd_settle_times(args) -> None:
    from miniformer.stages.dagtimes import settle

    n = settle(Path("."))
    print(f"stamped {n} files in DAG order (data, runs, evaluations, aggregates, report): Snakemake now agrees "
          "with DVC on what is stale")


def cmd_list(args) -> None:
    """The run list of the active profile, one `experiment seed` per line (what the DAG tools expand)."""
    for e, s in _study(args).runs():
        print(e, s)


def package_version() -> str:
    """The installed package's version (pyproject.toml), or the source tree's when run without installing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("miniformer")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line naming the flag and where the help is, not the whole usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="miniformer", description=__doc__)
    p.add_argument("--version", action="version", version=f"miniformer {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    p.epilog = ("internal commands, called by Snakemake and DVC (each has --help): " + ", ".join(INTERNAL))

    def add(name: str, fn, help_: str, run: bool = False) -> argparse.ArgumentParser:
        """A subcommand with the study-wide flags it uses (COMMAND_FLAGS): a flag it would ignore is not offered, so
        argparse refuses it."""
        listed = {} if name in INTERNAL else {"help": help_}  # a subcommand without help is left out of the list
        sp = sub.add_parser(name, description=help_, **listed)
        flags = {
            "params": dict(default="params.yaml", help="the study's params file (default: params.yaml)"),
            "profile": dict(default=None, help="smoke | default | gpu | course (default: the file's `profile`)"),
            "results": dict(default=str(RESULTS), help="results folder (default: results)"),
            "data": dict(default=str(DATA_DIR), help="prepared data folder (default: data/prepared)"),
        }
        for flag in COMMAND_FLAGS[name]:
            sp.add_argument(f"--{flag}", **flags[flag])
        if run:
            sp.add_argument("experiment", help="experiment name from params.yaml")
            sp.add_argument("--seed", type=bounded(int, 0), required=True, help="which of the experiment's seeds")
        sp.set_defaults(func=fn)
        return sp

    sp = add("prepare", cmd_prepare, "corpus -> splits -> tokenizer -> token files")
    sp.add_argument("--out", default=str(DATA_DIR), help=f"folder for the token files (default: {DATA_DIR})")
    sp.add_argument("--versioned", action="store_true",
                    help="refuse a corpus file outside data/raw/ (the DAG's stages: it is the folder both tools watch)")
    add("course", cmd_course, "the course profile: its Chinese corpus and the course table's runs, in minutes")
    sp = add("train", cmd_train, "train one experiment x seed (resumes from its checkpoint)", run=True)
    resume = sp.add_mutually_exclusive_group()
    resume.add_argument(
        "--resume",
        action="store_true",
        help="require resuming: a checkpoint of another config is an error (default: resume if it "
        "matches, else set it aside and start fresh)",
    )
    resume.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint")
    add("evaluate", cmd_evaluate, "evaluate one trained run", run=True)
    add("run", cmd_run, "train one experiment x seed, then evaluate it (the Snakemake job)", run=True)
    sp = add("run-experiment", cmd_run_experiment, "train, then evaluate, every seed of one experiment (the DVC stage)")
    sp.add_argument("experiment", help="experiment name from params.yaml")
    add("aggregate", cmd_aggregate, "collect every run into results/metrics.json and tables")
    add("init-probe", cmd_init_probe, "token uniformity against depth at initialisation, with and without residuals")
    sp = add("report", cmd_report, "figures + verdicts -> report/report.html")
    sp.add_argument("--out", default="report/report.html", help="the report file (default: report/report.html)")
    add_internal_commands(add)
    sp = add("crosscheck", cmd_crosscheck, "train the peer library's equivalent of each variant (x-transformers)")
    sp.add_argument("experiments", nargs="*", help="default: every experiment the peer has a switch for")
    add("settle-times", cmd_settle_times, "after `dvc pull`: file times in DAG order, so Snakemake finds nothing stale")
    add("runs", cmd_runs, "list trained runs found under results/")
    add_replication_command(add)

    add_explore_commands(add)
    return p


def add_replication_command(add) -> None:
    """`miniformer replicate`: the replication settings, and the claims × settings page."""
    sp = add("replicate", cmd_replicate, "the study in each replication setting (replication/<setting>/), its claims "
             "copied to results/settings/")
    sp.add_argument("--settings", nargs="*", metavar="SETTING", help="default: every replication setting (params.py "
                    "REPLICATION: bpe, small)")
    sp.add_argument("--cores", type=bounded(int, 1), default=2, help="Snakemake's --cores (default: 2)")
    sp.add_argument("--table-only", action="store_true", help="train nothing: the claims × settings page again from "
                    "the claims files already under results/settings/")
    sp.add_argument("--out", default="report/replication.html", help="the claims × settings page (default: "
                    "report/replication.html)")


def add_internal_commands(add) -> None:
    """What the DAG tools call, beside the user's commands."""
    sp = add("check-params", cmd_check_params, "validate every key of params.yaml (DVC's first stage)")
    sp.add_argument("--out", default="results/params-checked.txt", help="the stamp to write when params are valid")
    sp = add("dvc-record", cmd_dvc_record, "commit to dvc.lock exactly the DVC stages whose Snakemake jobs ran")
    sp.add_argument("--ran", default="results/logs/ran-stages.txt",
                    help="the list of stages Snakemake ran (default: results/logs/ran-stages.txt)")
    add("list", cmd_list, "print the active profile's runs")


def add_explore_commands(add) -> None:
    sp = add("set-profile", cmd_set_profile, "name the study profile in params.yaml (smoke, default, gpu, course), "
             "where both Snakemake and DVC read it")
    sp.add_argument("name", help="the profile")
    sp = add("compare", cmd_compare, "your run's claims beside the reference's: verdicts, effects ± intervals; exits 1 "
             "when a verdict changed")
    sp.add_argument("--against", default="docs", help="the reference: a claims.json, or a folder holding one "
                    "(default: docs, the committed reference)")
    sp = add("metrics-diff", cmd_metrics_diff, "every number of your results/metrics.json beside a reference's, key "
             "by key (`dvc metrics diff` compares revisions, not two files)")
    sp.add_argument("--against", default="docs", help="the reference: a metrics.json, or a folder holding one "
                    "(default: docs, the committed reference)")
    sp.add_argument("--all", action="store_true", help="every number, not only those that differ")
    """The commands that use a trained run: generate, score, export, attention."""

    def add_run_arg(sp: argparse.ArgumentParser, device: bool = True) -> None:
        sp.add_argument("run", help="experiment name (see `miniformer runs`) or a run folder")
        sp.add_argument("--seed", type=bounded(int, 0), default=None,
                        help="which seed of the experiment (default: lowest)")
        if device:
            sp.add_argument("--device", choices=DEVICES, default="cpu",
                            help="where the model runs: auto takes cuda, then mps, then cpu (default: cpu)")

    sp = add("generate", cmd_generate, "continue a prompt with a trained run")
    add_run_arg(sp)
    sp.add_argument("--prompt", default="\n", help="text to continue (default: a line break)")
    sp.add_argument("--tokens", type=bounded(int, 1, MAX_GENERATE), default=200,
                    help=f"tokens to generate, 1..{MAX_GENERATE} (default: 200)")
    sp.add_argument("--temperature", type=bounded(float, 0.0), default=0.8,
                    help="sampling temperature, >= 0; 0 = greedy (default: 0.8)")
    sp.add_argument("--top-k", type=bounded(int, 1), default=20,
                    help="sample from the k likeliest tokens, >= 1 (default: 20)")
    sp.add_argument("--sample-seed", type=bounded(int, 0, MAX_SAMPLE_SEED), default=0,
                    help=f"seed of the sampling, 0..{MAX_SAMPLE_SEED} (default: 0)")
    sp = add("score", cmd_score, "loss and perplexity of a sentence (per token), or of every line of --file")
    add_run_arg(sp)
    sp.add_argument("sentence", nargs="?", help="the text to score (or use --file)")
    sp.add_argument("--file", help="score every line of this file (CSV to stdout or -o)")
    sp.add_argument("--versus", metavar="SENTENCE_B", help="which of the two sentences the model prefers, by how much")
    sp.add_argument("-o", "--out", type=output_file((".csv",)), default=None, help="CSV output path for --file")
    sp = add("export", cmd_export, "a trained run as a model to hand on: safetensors weights, config, tokenizer, "
             "model card")
    add_run_arg(sp, device=False)
    sp.add_argument("dir", help="a new (or empty) folder to write the model into")
    sp = add("attention", cmd_attention, "attention heatmap(s) for your own text")
    add_run_arg(sp)
    sp.add_argument("--text", required=True, help="the text whose attention to draw (at most 80 tokens)")
    sp.add_argument("--layer", type=int, default=None, help="which layer, from 0 (default: the last layer)")
    heads = sp.add_mutually_exclusive_group()  # --head beside --all would be ignored
    heads.add_argument("--head", type=int, default=None, help="which head, from 0 (default: 0; see --all)")
    heads.add_argument("--all", action="store_true", help="every head of the layer")
    sp.add_argument("--html", action="store_true",
                    help="write a page of hoverable maps (query, key, weight per cell) instead of a figure")
    sp.add_argument("-o", "--out", type=output_file((*FIGURE_SUFFIXES, ".html")), default=None,
                    help="figure file, .png, .svg or .pdf, or .html with --html "
                    "(default: results/explore/attention-RUN.png or .html)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and getattr(args, "sentence", "") is None and len(extra) == 1 and not extra[0].startswith("-"):
            # `score RUN --seed 0 "a sentence"`: argparse fills its optional sentence before reading --seed, then
            # finds the sentence left over; it is the sentence
            args.sentence = extra[0]
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help (0) or a usage error (2, already printed as one line)
        return int(e.code or 0)
    try:
        code = args.func(args)  # None, or the command's own exit status (compare: 1 on a changed verdict)
    except UserError as e:
        print(f"miniformer: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file system refusal no stage foresaw (permissions, a file where a folder should be)
        if isinstance(e, BrokenPipeError):  # `miniformer score … | head`: the reader left, nothing is wrong
            sys.stderr.close()
            return 0
        where = f" {e.filename!r}" if e.filename else ""
        print(f"miniformer: error: cannot use{where}: {e.strerror or e}; check the path and its permissions",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(code or 0)


def console() -> None:
    """The `miniformer` command and `python -m miniformer`: main(), then leave without the interpreter's teardown.

    Every file a command writes is written whole and closed before main() returns, so the teardown (unloading torch
    and the modules around it) only costs time: ≈ 0.6 s of every Snakemake job (benchmarks/RESULTS.md). What libraries
    registered to run at exit still runs; a thread still running gets the normal exit, which waits for it."""
    code = main()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader that left (`| head`), or a stream a command closed
        pass
    if threading.active_count() > 1:
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()
