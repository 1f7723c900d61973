"""Claims about converged models, read at two budgets: this run's verdict beside the same study's verdicts at other
budgets, and the verdict totals counted at the longest budget that ran.

A claim a source made of converged models is only tested at a budget where its effect has stopped moving. The
default study trains 300 steps; the `long` profile trains only the runs those claims read, longer. Its claims file
(results/claims.json of that run, the same format this run writes) placed under results/budgets/ joins this run's
report: copy it to results/budgets/long.json, then `make report`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from miniformer.errors import UserError
from miniformer.study.claim_table import estimate_text, moved, named_estimates
from miniformer.study.findings import Finding

BUDGETS_DIR = "budgets"  # results/budgets/<name>.json: the claims.json of the same study at another budget
NOT_RUN = "not run"


@dataclass(frozen=True)
class Budget:
    """One other budget's claims: the profile it ran, its steps, and each claim's record by the claim's text."""

    profile: str
    steps: int
    claims: dict[str, dict]


def read_budgets(results: Path) -> list[Budget]:
    """Every claims file under results/budgets/, fewest steps first; a file that is not one is one clear line."""
    budgets = []
    for path in sorted((Path(results) / BUDGETS_DIR).glob("*.json")):
        remedy = ("copy there the results/claims.json of a run of this study at another budget (written by "
                  "`miniformer report` from this version on), or delete it")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            budget = Budget(str(data["profile"]), int(data["steps"]), {r["claim"]: r for r in data["claims"]})
        except (OSError, ValueError, TypeError, KeyError):
            raise UserError(f"{str(path)!r} is not a claims file with its profile and steps; {remedy}") from None
        budgets.append(budget)
    return sorted(budgets, key=lambda b: b.steps)


def _headline(record: dict | None) -> str:
    """A claims-file record's first estimate as 'name: effect ± half-width' (the report's headline effect)."""
    known = named_estimates(record)
    more = f" (+{len(known) - 1} more)" if len(known) > 1 else ""
    return f"{known[0][0]}: {estimate_text(known[0][1])}{more}" if known else "—"


def moved_between(here: Finding, there: dict) -> bool:
    """Whether the claim's headline effect moved between two budgets beyond √(h₁² + h₂²) (claim_table.moved): a
    claim measured once per run (not followed over training) whose effect moved between budgets is not known to have
    converged."""
    name, mine = next(((n, e) for n, e in here.estimates.items() if e is not None), (None, None))
    theirs = dict(named_estimates(there)).get(name)  # the same estimate there, by name: never another arm's
    if mine is None or math.isinf(mine.half_width):
        return False
    return bool(moved({"effect": mine.value, "half_width": mine.half_width}, theirs))


def _ran_longer(f: Finding, steps: int, budgets: list[Budget]) -> list[tuple[Budget, dict]]:
    """The longer budgets that judged this converged claim (not 'not run'), fewest steps first, with its record."""
    return [(b, b.claims[f.claim]) for b in budgets if b.steps > steps and f.converged
            and b.claims.get(f.claim, {}).get("verdict") not in (None, NOT_RUN)]


def _cell(verdict: str, still_changing: bool, effect: str, seeds: int | None = None) -> dict:
    """One budget's cell; ``seeds``: the fewest seeds of a run in its headline effect (None without one)."""
    return {"verdict": verdict, "still_changing": still_changing, "effect": effect, "seeds": seeds}


def _record_seeds(record: dict) -> int | None:
    known = named_estimates(record)
    return known[0][1].get("seeds") if known else None


def _finding_seeds(f: Finding) -> int | None:
    return next((e.seeds for e in f.estimates.values() if e is not None), None)


def budget_rows(found: list[Finding], budgets: list[Budget], headline) -> list[dict]:
    """One row per converged claim: its verdict, effect and trend here and at every other budget (`not run` where
    that budget did not read it). ``headline`` gives this run's headline effect of a finding."""
    rows = []
    for f in found:
        if not f.converged:
            continue
        others = []
        for b in budgets:
            r = b.claims.get(f.claim)
            others.append(_cell(NOT_RUN, False, "—") if r is None else
                          _cell(r["verdict"], bool(r.get("still_changing")), _headline(r), _record_seeds(r)))
        ran = [c["verdict"] for c in others if c["verdict"] != NOT_RUN]
        # a claim this profile did not run neither agrees nor differs with the budget that ran it
        agree = None if not ran or f.verdict == NOT_RUN else all(v == f.verdict for v in ran)
        moved = any(moved_between(f, b.claims[f.claim]) for b in budgets if f.claim in b.claims)
        here = _cell(f.verdict, f.still_changing, headline(f), _finding_seeds(f))
        # a verdict that differs where the seeds differ too is a change of design as much as of budget
        seeds = {c["seeds"] for c in [here, *others] if c["seeds"] is not None}
        rows.append({"claim": f.claim, "counted": f.counted, "here": here, "others": others, "agree": agree,
                     "moved": moved, "seeds_differ": len(seeds) > 1})
    return rows


def at_longest_budget(found: list[Finding], steps: int, budgets: list[Budget]) -> list[Finding]:
    """The findings with each converged claim's verdict and trend taken from the longest budget that ran it: what the
    second totals line counts. A claim followed over training keeps that budget's trend; one measured once per run
    (no curve) is still changing when its effect moved between this budget and that one. A claim not about
    converged models, or no longer budget, keeps this run's."""
    out = []
    for f in found:
        ran = [r for _, r in _ran_longer(f, steps, budgets)]
        if ran:
            changing = bool(ran[-1].get("still_changing")) or (f.curve is None and moved_between(f, ran[-1]))
            out.append(replace(f, verdict=ran[-1]["verdict"], still_changing=changing))
            continue
        shorter = [b.claims[f.claim] for b in budgets if b.steps < steps and f.claim in b.claims]
        moved = f.converged and f.curve is None and any(moved_between(f, r) for r in shorter)
        out.append(replace(f, still_changing=True) if moved else f)  # this run is the longest: did it move to here?
    return out


def longer_marks(found: list[Finding], steps: int, budgets: list[Budget]) -> list[str]:
    """Per finding, the verdict of each longer budget that ran it ("; reproduced at 800 steps (long)"), for the
    at-a-glance table and the claims table: a reader sees both budgets where the verdict is read."""
    return ["".join(f"; {r['verdict']} at {b.steps} steps ({b.profile})" for b, r in _ran_longer(f, steps, budgets))
            for f in found]
