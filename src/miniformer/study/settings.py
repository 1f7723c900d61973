"""Claims × settings: each claim's verdict in this run's setting beside its verdicts in the replication settings, and
one combined word.

A replication setting (params.REPLICATION: the plays as BPE tokens, a model of half the depth) trains the runs the
counted claims read, three seeds each, into a folder of its own (stages/replicate.py); its sealed claims.json, copied
to results/settings/<setting>.json, joins this run's report here.

The rule that combines settings, fixed before the replication runs were made: a claim's word reads only the settings
where it was judged (a verdict other than "not run"), each setting's verdict under the study's own rule (its effect ±
its 95 % interval, its own seeds' spread):
- judged in fewer than two settings: "one setting only" (nothing to combine);
- reproduced in every setting that judged it: "holds in every setting";
- contradicted in every one: "fails in every setting";
- reproduced in one and contradicted in another: "depends on the setting";
- otherwise (undecided somewhere, never both ways): "undecided", with how the decided ones went.
No interval is pooled across settings: their units differ (nats per character, per BPE token) and so does what each
setting's model can do; a verdict that holds in each is the claim the table makes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from miniformer.errors import UserError
from miniformer.params import REPLICATION
from miniformer.study.claim_table import estimate_text, judged_names, moved, read_claims_document
from miniformer.study.claims import CLAIMS
from miniformer.study.stats import OWN_SPREAD_SEEDS

SETTINGS_DIR = "settings"  # results/settings/<setting>.json: a replication setting's claims.json
NOT_RUN = "not run"
INDEPENDENT = "setting-independent (not combined)"
# claims whose measurement no setting changes: true by construction, or read from fresh models of fixed depths (the
# init probe): the same answer in every setting is no replication, so they are shown and kept out of the totals
SETTING_INDEPENDENT = frozenset(c.claim for c in CLAIMS if not c.runs or c.test == "structural")
WORDS = ("holds in every setting", "fails in every setting", "depends on the setting", "undecided",
         "one setting only")


@dataclass(frozen=True)
class Setting:
    """One setting's claims: its profile, steps, what it changed (corpus, tokenizer, model size) and each claim's
    record by the claim's text."""

    profile: str
    steps: int
    description: dict
    claims: dict[str, dict]


def read_settings(results: Path) -> list[Setting]:
    """Every claims file under results/settings/, by name; a file that is not one is one clear line."""
    settings = []
    for path in sorted((Path(results) / SETTINGS_DIR).glob("*.json")):
        remedy = "run `make replication` again to re-make it (it copies each setting's results/claims.json there)"
        data = read_claims_document(path, remedy)  # sealed and whole: an edited effect is refused
        try:
            setting = Setting(str(data["profile"]), int(data["steps"]), dict(data.get("setting") or {}),
                              {r["claim"]: r for r in data["claims"]})
        except (ValueError, TypeError, KeyError):
            raise UserError(f"{str(path)!r} is not a claims file with its profile and steps; {remedy}") from None
        settings.append(setting)
    return settings


def combined_word(verdicts: list[str]) -> str:
    """The rule above, on one claim's verdicts in every setting (this run's first)."""
    judged = [v for v in verdicts if v != NOT_RUN]
    if len(judged) < 2:
        return "one setting only"
    if all(v == "reproduced" for v in judged):
        return "holds in every setting"
    if all(v == "contradicted" for v in judged):
        return "fails in every setting"
    if "reproduced" in judged and "contradicted" in judged:
        return "depends on the setting"
    decided = [v for v in judged if v != "undecided"]
    how = f"{len(decided)} of {len(judged)} decided, all {decided[0]}" if decided else "undecided in every setting"
    return f"undecided ({how})"


def word_of(combined: str) -> str:
    """The combined word without its detail (for the totals)."""
    return re.split(r" \(|; |, ", combined)[0]


def cell(record: dict | None) -> dict:
    """A claims-file record as one setting's cell: its verdict, the estimates the verdict reads, and the fewest seeds
    behind them (a verdict that differs where the seeds differ is a change of design as much as of setting)."""
    if record is None:
        return {"verdict": NOT_RUN, "effects": [], "seeds": None, "stuck": []}
    estimates = record.get("estimates") or {}
    judged = [estimates.get(name) for name in judged_names(record) if (estimates.get(name) or {}).get("effect")
              is not None]
    effects = [f"{name} {estimate_text(estimates.get(name))}" for name in judged_names(record)
               if (estimates.get(name) or {}).get("effect") is not None]
    seeds = [e["seeds"] for e in judged if isinstance(e.get("seeds"), int)]
    # a file written before runs at the unigram loss were recorded says nothing of them (shown as none)
    return {"verdict": record["verdict"], "effects": effects, "seeds": min(seeds) if seeds else None,
            "stuck": list(record.get("stuck") or [])}


def settings_rows(mine: list[dict], settings: list[Setting], here: dict | None = None,
                  steps: int | None = None) -> list[dict]:
    """One row per claim of this run (its claims-file records, in the report's order): a cell per setting, this
    run's first, the combined word (counted claims only: a proxy's word is shown, not totalled), and how its effects
    move with the model's size where two settings differ in size alone (``here``: this run's setting)."""
    descriptions = [{**(here or {}), "steps": steps}, *({**s.description, "steps": s.steps} for s in settings)]
    rows = []
    for number, record in enumerate(mine, 1):
        records = [record, *(s.claims.get(record["claim"]) for s in settings)]
        cells = [cell(r) for r in records]
        if record["claim"] in SETTING_INDEPENDENT:  # the same measurement whatever the setting: nothing to replicate
            rows.append({"number": number, "claim": record["claim"], "counted": record.get("counted", True),
                         "converged": False, "cells": cells, "combined": INDEPENDENT, "size_trend": []})
            continue
        combined = combined_word([c["verdict"] for c in cells])
        if cells[0]["verdict"] == NOT_RUN and word_of(combined) != "one setting only":
            combined += ", replication settings only"  # this run did not judge it: the word is the others'
        judged = [r for r in records if r is not None and r.get("verdict") != NOT_RUN]
        if record.get("converged") and not all(r.get("flattened") is True for r in judged):
            combined += "; untested at convergence"  # some setting read it at a budget not flattened for it
        rows.append({"number": number, "claim": record["claim"], "counted": record.get("counted", True),
                     "converged": bool(record.get("converged")), "cells": cells, "combined": combined,
                     "size_trend": size_trend(records, descriptions)})
    return rows


def word_totals(rows: list[dict], converged: bool = False) -> list[tuple[str, int]]:
    """How many counted claims reached each combined word: the claims about the mechanics (converged=False), or the
    claims about converged models (converged=True), totalled apart since each setting reads them at its own budget,
    where they may be untested at convergence."""
    return [(w, sum(r["counted"] and r["converged"] == converged and word_of(r["combined"]) == w for r in rows))
            for w in WORDS]


def setting_label(description: dict, steps: int | None) -> str:
    """What a setting is, in one line: the text and its reading, the model's size, the budget."""
    d = description
    if not d:
        return f"{steps} steps (setting not recorded)"
    params = f", {d['parameters'] / 1e6:.2f} M parameters" if d.get("parameters") else ""
    return (f"{d.get('corpus')}, {d.get('tokenizer')} (vocab {d.get('vocab_size')}); {d.get('n_layer')} layers × "
            f"{d.get('n_embd')}, {d.get('n_head')} heads{params}; block {d.get('block_size')}; {steps} steps")


def settings_context(mine: list[dict], here: dict, steps: int | None, settings: list[Setting],
                     here_name: str = "this run") -> dict:
    """What the claims × settings table (templates/settings.j2) reads: this run's claims-file records and setting,
    and each replication setting's."""
    rows = settings_rows(mine, settings, here, steps)
    return {"settings": [{"profile": here_name, "label": setting_label(here, steps)},
                         *({"profile": s.profile, "label": setting_label(s.description, s.steps)} for s in settings)],
            "settings_table": rows, "setting_totals": word_totals(rows),
            "converged_setting_totals": word_totals(rows, converged=True), "replication_names": REPLICATION,
            "own_spread_seeds": OWN_SPREAD_SEEDS,
            "size_pairs": bool(size_pairs([{**here, "steps": steps}, *({**s.description, "steps": s.steps}
                                                                       for s in settings)]))}


def size_pairs(descriptions: list[dict]) -> list[tuple[int, int]]:
    """Pairs of setting columns (smaller model, larger model) that read the same text the same way and differ in the
    model's size only as far as a claims file records it: where an effect's trend with size can be read."""
    same_text = ("corpus", "tokenizer", "vocab_size", "block_size", "steps")  # and the same budget
    pairs = []
    for i, a in enumerate(descriptions):
        for j, b in enumerate(descriptions):
            if (a.get("parameters") and b.get("parameters") and a["parameters"] < b["parameters"]
                    and all(a.get(k) == b.get(k) for k in same_text)):
                pairs.append((i, j))
    return pairs


def size_trend(records: list[dict | None], descriptions: list[dict]) -> list[str]:
    """Per pair of size_pairs, how each estimate the claim's verdict reads moved from the smaller model to the larger:
    "h=1 − h=4 +0.060 → +0.042 (0.41 M → 0.80 M parameters: toward zero, beyond both intervals)". The move is
    called one only when it exceeds √(h₁² + h₂²), the half-width of the difference of two independent intervals."""
    out = []
    for i, j in size_pairs(descriptions):
        small, large = records[i], records[j]
        if small is None or large is None:
            continue
        for name in judged_names(large):
            a, b = (small.get("estimates") or {}).get(name), (large.get("estimates") or {}).get(name)
            if not a or not b or a.get("effect") is None or b.get("effect") is None:
                continue
            if min(a.get("seeds") or 0, b.get("seeds") or 0) < OWN_SPREAD_SEEDS:  # a one-seed arm's pooled spread
                out.append(f"{name}: not followed (fewer than {OWN_SPREAD_SEEDS} seeds on a side)")
                continue
            shift = moved(a, b)
            way = ("toward zero" if abs(b["effect"]) < abs(a["effect"]) else "away from zero") if shift else \
                "no move its intervals resolve"
            out.append(f"{name} {a['effect']:+.3f} → {b['effect']:+.3f} ({descriptions[i]['parameters'] / 1e6:.2f} M → "
                       f"{descriptions[j]['parameters'] / 1e6:.2f} M parameters: {way})")
    return out
