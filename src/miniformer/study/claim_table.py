"""The claims table as data: one row per claim and estimate, written beside the report as JSON, CSV and a LaTeX
(booktabs longtable) table, so that a run can be held against another (`miniformer compare`) or cited in a paper.

The rows are the report's own findings at render time: the same effects, half-widths, spreads and verdicts.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from miniformer.errors import UserError
from miniformer.runtime.provenance import CHECKSUM, content_checksum, read_sealed_json
from miniformer.study.findings import Finding

CLAIMS_JSON, CLAIMS_CSV, CLAIMS_TEX = "claims.json", "claims.csv", "claims.tex"
COLUMNS = ("claim", "source", "test", "counted", "estimate", "effect", "half_width", "spread", "seeds", "verdict",
           "converged", "still_changing")


def _finite(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def claim_records(found: list[Finding]) -> list[dict]:
    """One record per claim: what it says, where from, how tested, its verdict, and every estimate it read."""
    records = []
    for f in found:
        estimates = {name: None if e is None else {"effect": _finite(e.value), "half_width": _finite(e.half_width),
                                                    "spread": e.variance, "seeds": e.seeds}
                     for name, e in f.estimates.items()}
        records.append({"claim": f.claim, "source": f.source, "test": f.test, "counted": f.counted,
                        "verdict": f.verdict, "why": f.why,
                        "converged": f.converged, "still_changing": f.still_changing,
                        "flattened": f.flattened, "trend": f.trend, "judged": list(f.judged or f.estimates),
                        "stuck": list(f.stuck), "estimates": estimates})
    return records


def claim_rows(records: list[dict]) -> list[dict]:
    """Flat rows, one per claim and estimate (a claim without an estimate gets one row with empty numbers)."""
    rows = []
    for r in records:
        for name, e in (r["estimates"] or {"": None}).items():
            rows.append({"claim": r["claim"], "source": r["source"], "test": r["test"], "counted": r["counted"],
                         "estimate": name, "effect": None if e is None else e["effect"],
                         "half_width": None if e is None else e["half_width"],
                         "spread": "" if e is None else e["spread"], "seeds": None if e is None else e["seeds"],
                         "verdict": r["verdict"], "converged": r["converged"],
                         "still_changing": r["still_changing"]})
    return rows


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_MATH = {"−": "$-$", "±": r"$\pm$", "×": r"$\times$", "≤": r"$\le$", "≥": r"$\ge$", "≈": r"$\approx$",
               "√": r"$\surd$", "§": r"\S{}", "→": r"$\to$", "·": r"$\cdot$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, _LATEX_MATH.get(c, c)) for c in str(text))


def to_latex(rows: list[dict]) -> str:
    """A booktabs longtable (\\usepackage{booktabs,longtable}): claim, estimate, effect ± half-width, verdict; proxies
    marked. A longtable breaks across pages with its header repeated (one tabular of 40-odd rows ran off the page),
    and its paragraph columns sum to the text width with the column gaps, so no row is wider than the text."""
    head = r"Claim (source) & Estimate & Effect $\pm$ 95\,\% & Verdict \\"
    left, right = r">{\raggedright\arraybackslash}", r">{\raggedleft\arraybackslash}"
    widths = ((left, 0.33), (left, 0.19), (right, 0.16), (left, 0.18))  # + 6 column gaps: under the text width
    columns = "@{}" + "".join(f"{align}p{{{w}\\linewidth}}" for align, w in widths) + "@{}"
    lines = [f"\\begin{{longtable}}{{{columns}}}", r"\toprule", head, r"\midrule", r"\endfirsthead",
             r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
    last = None
    for r in rows:
        claim = "" if r["claim"] == last else f"{latex_escape(r['claim'])} ({latex_escape(r['source'])})"
        last = r["claim"]
        effect = "" if r["effect"] is None else f"${r['effect']:+.3f}"
        if r["effect"] is not None:
            effect += r" \pm \infty$" if r["half_width"] is None else rf" \pm {r['half_width']:.3f}$"
        verdict = r["verdict"] + ("" if r["counted"] else " (proxy)")
        lines.append(f"{claim} & {latex_escape(r['estimate'])} & {effect} & {latex_escape(verdict)} \\\\")
    lines += [r"\end{longtable}", ""]
    return "\n".join(lines)


def claim_files(found: list[Finding], profile: str, steps: int | None = None,
                setting: dict | None = None) -> dict[str, str]:
    """The three files' names and texts; the JSON names the profile and the training steps the claims were measured
    at (another budget's report reads both: study/budgets.py) and what the setting was (corpus, tokenizer, model size:
    another setting's report reads it, study/settings.py)."""
    records = claim_records(found)
    rows = claim_rows(records)
    document = {"profile": profile, "steps": steps, **({"setting": setting} if setting else {}), "claims": records}
    return {CLAIMS_JSON: sealed_claims_text(document), CLAIMS_CSV: to_csv(rows),
            CLAIMS_TEX: to_latex(rows)}


def headline_effect(f: Finding) -> str:
    """The claim's effect ± interval for a one-line summary: its first estimate, named (what is compared with what:
    a verdict against one comparator reads as such at a glance), and how many more it reads."""
    known = [(name, e) for name, e in f.estimates.items() if e is not None]
    if not known:
        return "—"
    judged = next(iter(f.estimates))  # the estimate the verdict reads comes first: never shown as another's
    if f.estimates[judged] is None:
        return f"{judged}: n/a (+{len(known)} more)"
    more = f" (+{len(known) - 1} more)" if len(known) > 1 else ""
    return f"{known[0][0]}: {known[0][1].text()}{more}"


def budget_mark(f: Finding, steps: int | None) -> str:
    """What the verdict of a claim about converged models is worth at this budget (the claims table says the same)."""
    if not f.converged or steps is None:
        return ""
    way = f", {f.trend}" if f.trend in ("closing", "widening") else ""
    if not f.untested_at_convergence:
        return f" at {steps} steps"
    why = f"still changing{way}" if f.still_changing else "this budget has not flattened"
    return f" at {steps} steps (converged claim untested: {why})"


def glance_rows(found: list[Finding], steps: int | None = None, longer: list[str] | None = None) -> list[dict]:
    """The report's findings-at-a-glance table: number, claim, verdict (with its budget mark, a longer budget's
    verdict where one ran it, proxies marked), the headline effect. A skimming reader gets the same qualifiers as the
    claims table."""
    longer = longer or [""] * len(found)
    return [{"number": i, "claim": f.claim,
             "verdict": f.verdict + (f" ({f.why})" if f.why else "") + budget_mark(f, steps) + later
                        + ("" if f.counted else " (proxy)"),
             "css": f.verdict.replace(" ", "-") if f.counted else "proxy", "effect": headline_effect(f)}
            for i, (f, later) in enumerate(zip(found, longer), 1)]


def sections_of_claims(claim_runs: list[tuple[str, ...]], groups: dict[str, str]) -> dict[str, list[int]]:
    """For each experiment group, the 1-based numbers of the claims that read one of its runs: the report links every
    section's figures to the claims they support."""
    out: dict[str, list[int]] = {}
    for number, runs in enumerate(claim_runs, 1):
        for group in dict.fromkeys(groups.get(run.split("/")[0]) for run in runs):
            if group is not None:
                out.setdefault(group, []).append(number)
    return out


def sealed_claims_text(document: dict) -> str:
    """A claims document as JSON text with the checksum of its content: `miniformer compare` and another budget's
    report read it back, and refuse an edited number."""
    body = {k: v for k, v in document.items() if k != CHECKSUM}
    return json.dumps({**body, CHECKSUM: content_checksum(body)}, indent=1, ensure_ascii=False)


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def claims_problem(document: object) -> str | None:
    """What makes a (sealed) claims document unusable, in words, or None: the fields compare and the budgets read."""
    if not isinstance(document, dict) or not isinstance(document.get("claims"), list):
        return "it holds no list of claims"
    for i, r in enumerate(document["claims"]):
        if not isinstance(r, dict) or not isinstance(r.get("claim"), str) or not isinstance(r.get("verdict"), str):
            return f"claim {i + 1} has no claim text or no verdict"
        if not isinstance(r.get("estimates"), dict):
            return f"claim {i + 1} ({r['claim'][:40]}…) has no estimates"
        for name, e in r["estimates"].items():
            if e is None:
                continue
            if not isinstance(e, dict) or any(e.get(k) is not None and not _is_number(e.get(k))
                                              for k in ("effect", "half_width")):
                return f"estimate {name!r} of claim {i + 1} is not a number ± a number"
    return None


def read_claims_document(path: Path, remedy: str) -> dict:
    """A claims.json as `miniformer report` wrote it: sealed (an edited effect is refused) and whole (every claim
    with its verdict and numeric estimates); otherwise one line naming the file and ``remedy``."""
    document = read_sealed_json(path, remedy)
    problem = claims_problem(document)
    if problem:
        raise UserError(f"{str(path)!r} is not a claims file: {problem}; {remedy}")
    return document


# --- reading a claims file's estimates (`miniformer compare`, another budget's cells: study/budgets.py) -------------

def estimate_text(e: dict | None) -> str:
    """A claims-file estimate as 'effect ± half-width' ('—' without an effect, '∞' for an unbounded interval)."""
    if not e or e.get("effect") is None:
        return "—"
    half = "∞" if e.get("half_width") is None else f"{e['half_width']:.3f}"
    return f"{e['effect']:+.3f} ± {half}"


def named_estimates(record: dict | None) -> list[tuple[str, dict]]:
    """A claims-file record's estimates that carry an effect, with their names, in the record's order."""
    return [(n, e) for n, e in ((record or {}).get("estimates") or {}).items() if e and e.get("effect") is not None]


def judged_names(record: dict | None) -> list[str]:
    """The names of the estimates a record's verdict reads (a file without the list: every estimate)."""
    record = record or {}
    return list(record.get("judged") or (record.get("estimates") or {}))


def moved(mine: dict | None, theirs: dict | None) -> bool | None:
    """Whether two estimates of one effect differ by more than their difference's 95 % half-width, √(h₁² + h₂²) for
    two independent intervals (None: cannot say)."""
    if not mine or not theirs or None in (mine["effect"], theirs["effect"], mine["half_width"], theirs["half_width"]):
        return None
    return abs(mine["effect"] - theirs["effect"]) > math.hypot(mine["half_width"], theirs["half_width"])
