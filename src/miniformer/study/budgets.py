"""Claims about converged models, read at two budgets: this run's verdict beside the same study's verdicts at other
budgets, and the verdict totals counted at the longest budget that ran.

A claim a source made of converged models is only tested at a budget where its effect has stopped moving. The
default study trains 300 steps; the `long` profile trains only the runs those claims read, longer. Its claims file
(results/claims.json of that run, the same format this run writes) placed under results/budgets/ joins this run's
report: copy it to results/budgets/long.json, then `make report`. A claims file at this run's own budget from another
profile (the ladder's: `make ladder`) is another design, not another budget: it speaks only where it judged a claim on
more seeds than this run did (design_marks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from miniformer.errors import UserError
from miniformer.study.claim_table import estimate_text, judged_names, moved, named_estimates, read_claims_document
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
        data = read_claims_document(path, remedy)  # sealed and whole: an edited effect is refused
        try:
            budget = Budget(str(data["profile"]), int(data["steps"]), {r["claim"]: r for r in data["claims"]})
        except (ValueError, TypeError, KeyError):
            raise UserError(f"{str(path)!r} is not a claims file with its profile and steps; {remedy}") from None
        budgets.append(budget)
    return sorted(budgets, key=lambda b: b.steps)


def _judged(record: dict | None) -> list[tuple[str, dict | None]]:
    """A claims-file record's judged estimates (the ones its verdict reads), by name, in the record's order."""
    estimates = (record or {}).get("estimates") or {}
    return [(name, estimates.get(name)) for name in judged_names(record)]


def _headline(record: dict | None) -> str:
    """A claims-file record's judged estimate as 'name: effect ± half-width' (the report's headline effect): never
    another arm's, 'n/a' when it has no value."""
    judged = _judged(record)
    if not judged:
        return "—"
    known = [n for n, _ in named_estimates(record)]
    (name, first) = judged[0]
    more = len(known) - (name in known)
    return f"{name}: {estimate_text(first) if first and first.get('effect') is not None else 'n/a'}" + (
        f" (+{more} more)" if more else "")


def moved_estimates(here: Finding, there: dict) -> list[tuple[str, float, float]]:
    """The effects of the claim that moved between two budgets beyond √(h₁² + h₂²) (claim_table.moved), each matched
    by name, so by what it measures (never against another arm or another rate): every estimate either budget's
    verdict reads, where the other budget measured the same one. Two budgets share seeds, inits and data order, so the
    independent intervals' test is conservative: it misses moves a paired one would catch, and a move it reports is
    one."""
    theirs = (there or {}).get("estimates") or {}
    names = dict.fromkeys([*(here.judged or here.estimates), *judged_names(there)])
    out = []
    for name in names:
        mine = here.estimates.get(name)
        if mine is not None and not math.isinf(mine.half_width) and moved(
                {"effect": mine.value, "half_width": mine.half_width}, theirs.get(name)):
            out.append((name, mine.value, theirs[name]["effect"]))
    return out


def moved_between(here: Finding, there: dict) -> bool:
    """Whether any judged effect moved between two budgets: a claim whose effect moved is not known to have
    converged, whatever its last curve step says (one step of a curve is a weak test of a slow drift)."""
    return bool(moved_estimates(here, there))


def _moves(moves: list[tuple[str, float, float]], shorter_first: bool) -> str:
    """'name: a → b' for each moved effect, the shorter budget's value first: the reader sees which way it went."""
    return "; ".join(f"{n}: {(a if shorter_first else b):+.3f} → {(b if shorter_first else a):+.3f}"
                     for n, a, b in moves)


def _ran_longer(f: Finding, steps: int, budgets: list[Budget]) -> list[tuple[Budget, dict]]:
    """The longer budgets that judged this converged claim (not 'not run'), fewest steps first, with its record."""
    return [(b, b.claims[f.claim]) for b in budgets if b.steps > steps and f.converged
            and b.claims.get(f.claim, {}).get("verdict") not in (None, NOT_RUN)]


def _cell(verdict: str, still_changing: bool, effect: str, seeds: int | None = None, trend: str = "") -> dict:
    """One budget's cell; ``seeds``: the fewest seeds of a run in the estimates its verdict reads (None without one);
    ``trend``: which way a still-changing effect moves."""
    return {"verdict": verdict, "still_changing": still_changing, "effect": effect, "seeds": seeds, "trend": trend}


def _record_seeds(record: dict) -> int | None:
    """The fewest seeds behind any judged estimate of a claims-file record (a compound claim is as thin as its
    thinnest part)."""
    seeds = [e["seeds"] for _, e in _judged(record) if e and e.get("seeds") is not None]
    return min(seeds) if seeds else None


def _finding_seeds(f: Finding) -> int | None:
    seeds = [e.seeds for name in (f.judged or f.estimates) if (e := f.estimates.get(name)) is not None]
    return min(seeds) if seeds else None


def budget_rows(found: list[Finding], budgets: list[Budget], headline, steps: int | None = None) -> list[dict]:
    """One row per converged claim: its verdict, effect and trend here and at every other budget (`not run` where
    that budget did not read it). ``headline`` gives this run's headline effect of a finding. ``untested``: at the
    longest budget that ran it the claim is still changing, or its effect moved between the budgets —
    the same verdict at both budgets is then no answer either."""
    rows = []
    counted = at_longest_budget(found, steps, budgets) if steps is not None else found
    for f, longest in zip(found, counted):
        if not f.converged:
            continue
        others = []
        for b in budgets:
            r = b.claims.get(f.claim)
            others.append(_cell(NOT_RUN, False, "—") if r is None else
                          _cell(r["verdict"], bool(r.get("still_changing")), _headline(r), _record_seeds(r),
                                r.get("trend", "")))
        ran = [c["verdict"] for c in others if c["verdict"] != NOT_RUN]
        # a claim this profile did not run neither agrees nor differs with the budget that ran it
        agree = None if not ran or f.verdict == NOT_RUN else all(v == f.verdict for v in ran)
        moved = any(moved_between(f, b.claims[f.claim]) for b in budgets if f.claim in b.claims)
        here = _cell(f.verdict, f.still_changing, headline(f), _finding_seeds(f), f.trend)
        # a verdict that differs where the seeds differ too is a change of design as much as of budget
        seeds = {c["seeds"] for c in [here, *others] if c["seeds"] is not None}
        rows.append({"claim": f.claim, "counted": f.counted, "here": here, "others": others, "agree": agree,
                     "moved": moved, "seeds_differ": len(seeds) > 1,
                     "untested": longest.untested_at_convergence})
    return rows


def at_longest_budget(found: list[Finding], steps: int, budgets: list[Budget]) -> list[Finding]:
    """The findings with each converged claim's verdict and trend taken from the longest budget that ran it: what the
    second totals line counts. A claim is still changing there when that budget's curve says so, or when its effect
    moved between this budget and that one (a slow drift a one-step curve test misses; the only test of a claim
    measured once per run). A claim not about
    converged models, or no longer budget, keeps this run's."""
    out = []
    for f in found:
        ran = [r for _, r in _ran_longer(f, steps, budgets)]
        if ran:
            changing = bool(ran[-1].get("still_changing")) or moved_between(f, ran[-1])
            out.append(replace(f, verdict=ran[-1]["verdict"], still_changing=changing,
                               trend=ran[-1].get("trend", ""), flattened=ran[-1].get("flattened")))
            continue
        shorter = [b.claims[f.claim] for b in budgets if b.steps < steps and f.claim in b.claims]
        moved = f.converged and any(moved_between(f, r) for r in shorter)
        out.append(replace(f, still_changing=True) if moved else f)  # this run is the longest: did it move to here?
    return out


def untested_mark(still_changing: bool, trend: str, moved: bool, flattened: bool | None = None) -> str:
    """What a converged claim's verdict at a budget is worth: untested when its effect still moves as that training
    ends (and which way), when its effect moved between the budgets, or when that budget's training has not flattened
    for it (a file written before the plateau was read says nothing of it: not flattened)."""
    if still_changing and trend in ("closing", "widening"):
        return f"; converged claim untested: still changing, {trend}"
    if still_changing or moved:
        return "; converged claim untested: " + ("still changing" if still_changing else
                                                 "its effect moved between the budgets")
    return "" if flattened else "; converged claim untested: that budget has not flattened"


def longer_marks(found: list[Finding], steps: int, budgets: list[Budget]) -> list[str]:
    """Per finding, the verdict of each longer budget that ran it ("; contradicted at 800 steps (long; converged claim
    untested: still changing, closing)"), for the at-a-glance table and the claims table: a reader sees both budgets
    where the verdict is read, each with what it is worth."""
    marks = []
    for f in found:
        text = ""
        longer = _ran_longer(f, steps, budgets)
        for b, r in longer:
            moves = moved_estimates(f, r)
            mark = untested_mark(bool(r.get("still_changing")), r.get("trend", ""), bool(moves),
                                 r.get("flattened"))
            values = f" ({_moves(moves, True)})" if moves else ""
            text += f"; {r['verdict']} at {b.steps} steps ({b.profile}{mark}{values})"
        if not longer and f.converged and f.verdict != NOT_RUN:  # the longest: moved to here?
            for b in budgets:
                moves = moved_estimates(f, b.claims[f.claim]) if b.steps < steps and f.claim in b.claims else []
                if moves:
                    text += (f"; converged claim untested: its effect moved since {b.steps} steps ({b.profile}: "
                             f"{_moves(moves, False)})")
        marks.append(text)
    return marks


def split_designs(budgets: list[Budget], steps: int, profile: str) -> tuple[list[Budget], list[Budget]]:
    """(other budgets, other designs): a file at this run's steps from another profile is a design (the ladder), not a
    budget, and stays out of the budget table and the converged totals."""
    designs = [b for b in budgets if b.steps == steps and b.profile != profile]
    return [b for b in budgets if b not in designs], designs


def design_marks(found: list[Finding], designs: list[Budget]) -> list[str]:
    """Per finding, the verdict of each other design at this budget that judged the claim on more seeds than this run
    ("; reproduced in the ladder profile on 3 seeds (…)"): where this run's verdict rests on one seed's pass/fail, the
    reader sees what the design made to decide it found."""
    marks = []
    for f in found:
        text = ""
        for b in designs:
            r = b.claims.get(f.claim)
            theirs, mine = (_record_seeds(r) if r else None), _finding_seeds(f)
            if f.verdict != NOT_RUN and r and r.get("verdict") not in (None, NOT_RUN) and theirs is not None \
                    and theirs > (mine or 0):  # a claim this run did not judge is another report's to show
                why = f" ({r['why']})" if r.get("why") else ""  # what the verdict rests on, as that report says
                seeds = f"{theirs} seed{'s' if theirs != 1 else ''}"
                text += f"; {r['verdict']}{why} in the {b.profile} profile on {seeds} ({_headline(r)})"
        marks.append(text)
    return marks
