"""`miniformer compare`: your run's claims beside a reference's, claim by claim.

Both sides are claims.json files the report stage writes (study/claim_table.py). A verdict that differs is a change
(the command exits 1, for CI). An effect "moved" when the two runs' estimates differ by more than the half-width of
their difference, √(h₁² + h₂²) for two independent 95 % intervals: the cross-machine tolerance docs/README.md states.
A smaller difference is what another machine's float order or thread count produces within the study's own noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from miniformer.errors import UserError
from miniformer.study.claim_table import CLAIMS_JSON, estimate_text, moved, read_claims_document

REFERENCE_CLAIMS = "default-study-claims.json"  # in docs/, beside the reference report
PROFILE_CLAIMS = "{profile}-study-claims.json"  # docs/ holds one reference per budget: default and long


def claims_file(path: Path, profile: str | None = None) -> Path:
    """A claims.json, or the one a folder holds (a results folder, or docs/ with the reference of this profile, else
    the default one)."""
    if path.is_dir():
        names = (CLAIMS_JSON, *([PROFILE_CLAIMS.format(profile=profile)] if profile else []), REFERENCE_CLAIMS)
        for name in names:
            if (path / name).is_file():
                return path / name
        raise UserError(f"{str(path)!r} holds no {CLAIMS_JSON} or {REFERENCE_CLAIMS} (a reference rendered before "
                        "claims files were written has none); pass --against another run's results/ folder or its "
                        "claims.json")
    if not path.is_file():
        raise UserError(f"no claims file at {str(path)!r}; pass a claims.json or a folder holding one")
    return path


def read_claims(path: Path, profile: str | None = None) -> tuple[str | None, dict[str, dict]]:
    """(the profile the claims were measured under, the claims by their text); a folder of references gives the one
    of ``profile``, when it holds one. The file must be sealed and whole (study/claim_table.py): an edited effect is
    refused, never printed."""
    document = read_claims_document(claims_file(path, profile), "pass a claims file `miniformer report` wrote "
                                    "(results/claims.json, or docs/*-study-claims.json), or write it again with it")
    return document.get("profile"), {r["claim"]: r for r in document["claims"]}


@dataclass
class Comparison:
    lines: list[str] = field(default_factory=list)
    changed_verdicts: int = 0
    moved_effects: int = 0
    only_one_side: int = 0


def compare(mine: dict[str, dict], theirs: dict[str, dict]) -> Comparison:
    out = Comparison()
    for claim in list(theirs) + [c for c in mine if c not in theirs]:
        a, b = mine.get(claim), theirs.get(claim)
        if a is None or b is None:
            out.only_one_side += 1
            out.lines.append(f"  {claim}: only in {'the reference' if a is None else 'your run'}")
            continue
        changed = a["verdict"] != b["verdict"]
        out.changed_verdicts += changed
        mark = "CHANGED" if changed else "same"
        proxy = "" if a.get("counted", True) else " (proxy)"
        out.lines.append(f"{mark:8} {claim}{proxy}: {a['verdict']}  (reference: {b['verdict']})")
        for name in list(b["estimates"]) + [n for n in a["estimates"] if n not in b["estimates"]]:
            ea, eb = a["estimates"].get(name), b["estimates"].get(name)
            shift = moved(ea, eb)
            out.moved_effects += bool(shift)
            flag = {True: "  MOVED", False: "", None: "  (not comparable)"}[shift]
            out.lines.append(f"           {name}: {estimate_text(ea)}  (reference {estimate_text(eb)}){flag}")
    return out


def run_compare(results: Path, against: Path) -> int:
    """Print the comparison; 1 when a verdict changed, else 0."""
    my_profile, mine = read_claims(results)
    their_profile, theirs = read_claims(against, my_profile)
    result = compare(mine, theirs)
    print(f"your run ({claims_file(results)}) against {claims_file(against, my_profile)}:")
    if my_profile != their_profile:
        print(f"note: your claims were measured under profile {my_profile!r}, the other run's under "
              f"{their_profile!r}: verdicts at other budgets may differ for that reason alone")
    print("\n".join(result.lines))
    print(f"{result.changed_verdicts} verdict(s) changed, {result.moved_effects} effect(s) moved by more than "
          f"√(h₁² + h₂²), {result.only_one_side} claim(s) on one side only")
    return 1 if result.changed_verdicts else 0
