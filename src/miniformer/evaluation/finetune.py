"""Raffel et al. 2020 compared pre-training objectives by what they are worth downstream: pre-train, fine-tune every
model the same way on a task, score the task. At our scale the task is built from the corpus in the spirit of GLUE's
CoLA (acceptability): is this a line of the play, or the same words shuffled? It needs a sense of the language, not
copying, and a model blind to order (MLM without positions) cannot do it. Every objective's model reads the line as
it reads a context (objective.input_mask), a linear head on its final states (the last position for a left-to-right
reader, the mean for a bidirectional one) is trained with the whole model for the same steps, and the held-out
accuracy is scored item by item (chance = 0.5)."""

from __future__ import annotations

import copy
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.runtime.optim import AdamW

FINETUNE_LR = 1e-3
TRAIN_CHARACTERS = 2_000_000  # of the train split, decoded for its lines (enough lines for any fine-tune here)


def verse_lines(text: str, shortest: int) -> list[list[str]]:
    """The text's lines grouped into speeches: a speaker line (ending with ':') or a blank line starts a new group."""
    speeches, current = [], []
    for line in text.split("\n"):
        if len(line) >= shortest and not line.endswith(":"):
            current.append(line)
        elif current:
            speeches.append(current)
            current = []
    return speeches + ([current] if current else [])


def shuffled(line: str, rng: random.Random) -> str | None:
    """The line's words in another order (its characters, for a text without spaces); None if no other order exists."""
    units = line.split() if len(line.split()) >= 3 else list(line)
    if len(set(units)) < 2:
        return None
    order = units[:]
    while order == units:
        rng.shuffle(order)
    return (" " if len(line.split()) >= 3 else "").join(order)


def acceptability_items(speeches: list[list[str]], count: int, seed: int) -> list[tuple[str, int]]:
    """(line, 1) for a line of the text, (its words shuffled, 0) for another: half each, in a seeded order."""
    rng = random.Random(seed)
    lines = [line for speech in speeches for line in speech]
    rng.shuffle(lines)
    out = []
    for k, line in enumerate(lines[:count]):
        broken = shuffled(line, rng) if k % 2 else None
        out.append((broken, 0) if broken is not None else (line, 1))
    rng.shuffle(out)
    return out


def encode_line(s: Subject, line: str, length: int) -> list[int]:
    """A line break + the line as exactly ``length`` ids: its end kept when longer, line breaks in front when shorter
    (every line of the text follows one)."""
    ids = s.tok.encode_lossy(f"\n{line}")[0][-length:]
    newline = s.tok.encode_lossy("\n")[0]
    return newline * (length - len(ids)) + ids if newline else ids


def item_length(s: Subject, items: list[tuple[str, int]]) -> int:
    """The one length every item is read at: the longest item's (a line break + the line), at most the block. A
    verse line is 43 characters at the median and 78 at most in the default corpus: read at the full block of 128,
    two thirds of every input were padding, averaged into a bidirectional reader's pooled state and paid for."""
    return min(s.T, max(len(s.tok.encode_lossy(f"\n{line}")[0]) for line, _ in items))


class LineClassifier(nn.Module):
    """The pre-trained model's final states, pooled, into two classes."""

    def __init__(self, model: nn.Module, objective, width: int, block_size: int) -> None:
        super().__init__()
        self.model, self.head = model, nn.Linear(width, 2)
        self.mask = objective.input_mask(block_size)
        self.last = not bool(self.mask.all())  # a left-to-right reader: only the last position has read everything

    def forward(self, x: Tensor) -> Tensor:
        h = self.model(x, attn_mask=self.mask.to(x.device), return_hidden=True)["hidden"]
        return self.head(h[:, -1] if self.last else h.mean(1))


def finetuned_outcomes(s: Subject, lr: float, seed: int) -> tuple[list[int], int]:
    """One fine-tune of a copy of the model (its items' order and head drawn from seed) at rate lr: each held-out
    item scored right (1) or wrong (0), and the number of training items."""
    e, t = s.run.eval, s.run.train
    shortest = min(20, s.T // 4)
    train_text = s.tok.decode(np.asarray(s.data.splits["train"][:TRAIN_CHARACTERS]).tolist())
    train = acceptability_items(verse_lines(train_text, shortest), e.finetune_steps * t.batch_size, seed)
    test = acceptability_items(verse_lines(s.tok.decode(s.data.splits["test"].tolist()), shortest), e.finetune_items, 0)
    length = item_length(s, train + test)
    torch.manual_seed(seed)
    clf = LineClassifier(copy.deepcopy(s.model), s.objective, s.model.cfg.n_embd, length).to(s.device).train()
    opt = AdamW([{"params": clf.parameters()}], lr=lr, weight_decay=0.0)
    for i in range(0, len(train) - t.batch_size + 1, t.batch_size):
        chunk = train[i : i + t.batch_size]
        x = torch.tensor([encode_line(s, line, length) for line, _ in chunk], device=s.device)
        loss = F.cross_entropy(clf(x), torch.tensor([y for _, y in chunk], device=s.device))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(clf.parameters(), t.grad_clip)
        opt.step()
    clf.eval()
    outcomes = []
    with torch.no_grad():
        for i in range(0, len(test), 64):
            chunk = test[i : i + 64]
            x = torch.tensor([encode_line(s, line, length) for line, _ in chunk], device=s.device)
            guess = clf(x).argmax(-1).tolist()
            outcomes += [int(g == y) for g, (_, y) in zip(guess, chunk)]
    return outcomes, len(train)


def finetune_seeds(run_seed: int, count: int) -> list[int]:
    """The fine-tunes' own seeds: the first is the run's seed (one fine-tune reads as it always did), the others
    distinct from every run's (run seeds are small integers)."""
    return [run_seed] + [1000 * (k + 1) + run_seed for k in range(count - 1)]


def finetune(s: Subject) -> Measured:
    """eval.finetune_seeds fine-tunes of the same pre-trained model, each item's outcome averaged over them: a
    fine-tune can stay at chance by the luck of its own draw, and one draw per model mixed that luck into the
    comparison of pre-training objectives (each fine-tune's accuracy is kept, to show it)."""
    if not s.run.eval.finetune or not s.tok.encode_lossy("\n")[0]:
        return Measured({})
    seeds = finetune_seeds(s.run.seed, s.run.eval.finetune_seeds)
    runs = [finetuned_outcomes(s, FINETUNE_LR, seed) for seed in seeds]
    per_item = np.mean([outcomes for outcomes, _ in runs], axis=0)
    return Measured({"finetune": {"task": "acceptability (a line of the play, or its words shuffled?)",
                                  "accuracy": float(per_item.mean()), "items": len(per_item),
                                  "train_items": runs[0][1], "chance": 0.5, "lr": FINETUNE_LR,
                                  "seeds": seeds, "per_seed": [float(np.mean(o)) for o, _ in runs]}},
                    {"finetune": [float(v) for v in per_item]})


def finetune_scalars(ev: dict) -> dict:
    return {"finetune_accuracy": ev.get("finetune", {}).get("accuracy")}


# last: it trains a copy of the model, the others read the model itself
PROBES = (Probe(finetune, finetune_scalars, order=1000),)
