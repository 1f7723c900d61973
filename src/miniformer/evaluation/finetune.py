"""Raffel et al. 2020 compared pre-training objectives by what they are worth downstream: pre-train, fine-tune every
model the same way on a task, score the task. At our scale the task is built from the corpus and needs context, not
copying: next-line prediction — is line B the line that follows line A in the play, or a line from elsewhere? Every
objective's model reads the pair as it reads a context (objective.input_mask), a linear head on its final states
(the last position for a left-to-right reader, the mean for a bidirectional one) is trained with the whole model for
the same steps, and the held-out accuracy is scored item by item (chance = 0.5)."""

from __future__ import annotations

import copy
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from miniformer.evaluation.subject import Measured, Subject

FINETUNE_LR = 1e-3
TRAIN_CHARACTERS = 2_000_000  # of the train split, decoded for its lines (enough pairs for any fine-tune here)


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


def next_line_pairs(speeches: list[list[str]], count: int, seed: int) -> list[tuple[str, str, int]]:
    """(line A, line B, 1 if B follows A in the same speech else 0): half true pairs, half B drawn at random from
    the whole text (never A's own successor), in a seeded order."""
    rng = random.Random(seed)
    true = [(a, b) for lines in speeches for a, b in zip(lines, lines[1:])]
    everything = [line for lines in speeches for line in lines]
    rng.shuffle(true)
    out = []
    for a, b in true[: count // 2 + count % 2]:
        out.append((a, b, 1))
        other = rng.choice(everything)
        while other == b:
            other = rng.choice(everything)
        out.append((a, other, 0))
    rng.shuffle(out)
    return out[:count]


def encode_pair(s: Subject, a: str, b: str) -> list[int]:
    """A + newline + B as exactly block_size ids: the end kept when longer (B whole), newlines in front when shorter."""
    ids = s.tok.encode_lossy(f"{a}\n{b}")[0][-s.T :]
    newline = s.tok.encode_lossy("\n")[0]
    return newline * (s.T - len(ids)) + ids if newline else ids


class PairClassifier(nn.Module):
    """The pre-trained model's final states, pooled, into two classes."""

    def __init__(self, model: nn.Module, objective, width: int, block_size: int) -> None:
        super().__init__()
        self.model, self.head = model, nn.Linear(width, 2)
        self.mask = objective.input_mask(block_size)
        self.last = not bool(self.mask.all())  # a left-to-right reader: only the last position has read everything

    def forward(self, x: Tensor) -> Tensor:
        h = self.model(x, attn_mask=self.mask.to(x.device), return_hidden=True)["hidden"]
        return self.head(h[:, -1] if self.last else h.mean(1))


def finetune(s: Subject) -> Measured:
    if not s.run.eval.finetune or not s.tok.encode_lossy("\n")[0]:
        return Measured({})
    e, t = s.run.eval, s.run.train
    shortest = min(20, s.T // 4)
    train_text = s.tok.decode(np.asarray(s.data.splits["train"][:TRAIN_CHARACTERS]).tolist())
    train = next_line_pairs(verse_lines(train_text, shortest), e.finetune_steps * t.batch_size, s.run.seed)
    test = next_line_pairs(verse_lines(s.tok.decode(s.data.splits["test"].tolist()), shortest), e.finetune_items, 0)
    torch.manual_seed(s.run.seed)
    clf = PairClassifier(copy.deepcopy(s.model), s.objective, s.model.cfg.n_embd, s.T).to(s.device).train()
    opt = torch.optim.AdamW(clf.parameters(), lr=FINETUNE_LR, weight_decay=0.0)
    for i in range(0, len(train) - t.batch_size + 1, t.batch_size):
        chunk = train[i : i + t.batch_size]
        x = torch.tensor([encode_pair(s, a, b) for a, b, _ in chunk], device=s.device)
        loss = F.cross_entropy(clf(x), torch.tensor([y for _, _, y in chunk], device=s.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(clf.parameters(), t.grad_clip)
        opt.step()
    clf.eval()
    outcomes = []
    with torch.no_grad():
        for i in range(0, len(test), 64):
            chunk = test[i : i + 64]
            x = torch.tensor([encode_pair(s, a, b) for a, b, _ in chunk], device=s.device)
            guess = clf(x).argmax(-1).tolist()
            outcomes += [int(g == y) for g, (_, _, y) in zip(guess, chunk)]
    return Measured({"finetune": {"task": "next line (does B follow A?)", "accuracy": float(np.mean(outcomes)),
                                  "items": len(outcomes), "train_pairs": len(train), "chance": 0.5}},
                    {"finetune": outcomes})
