"""`miniformer replicate` (`make replication`): the study in each replication setting, its claims beside this run's.

A replication setting is a params.yaml profile that changes one thing of the default setting (params.REPLICATION: the
tokenization, the model size). Each trains into a folder of its own, replication/<setting>/, since a profile's runs
and prepared data would otherwise replace the default study's in results/ and data/: the folder holds what the DAG
reads from the working tree (params.yaml, data/raw/), the Snakefile and the package are this checkout's. When a
setting's DAG has finished, its sealed claims.json is checked and copied to results/settings/<setting>.json, where the
report's "claims × settings" table reads it (study/settings.py). Re-running resumes: Snakemake redoes only what changed.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

from miniformer.errors import UserError
from miniformer.layout import RAW_DIR, RESULTS
from miniformer.params import REPLICATION, Study
from miniformer.study.claim_table import CLAIMS_JSON, read_claims_document
from miniformer.study.settings import SETTINGS_DIR

REPLICATION_DIR = Path("replication")  # replication/<setting>/: one study folder per setting (git-ignored)


def setting_folder(root: Path, setting: str) -> Path:
    return Path(root) / REPLICATION_DIR / setting


def stage_folder(root: Path, setting: str, params: Path) -> Path:
    """The setting's folder with this checkout's params file and data/raw/, copied only where they differ (an unchanged
    copy keeps its file time, so Snakemake re-runs nothing for it)."""
    folder = setting_folder(root, setting)
    folder.mkdir(parents=True, exist_ok=True)
    copies = [(Path(params), folder / "params.yaml")]
    raw = Path(root) / RAW_DIR
    copies += [(p, folder / RAW_DIR / p.relative_to(raw)) for p in sorted(raw.rglob("*")) if p.is_file()]
    for source, target in copies:
        if not target.exists() or not filecmp.cmp(source, target, shallow=False):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return folder


def snakemake_command(root: Path, setting: str, cores: int) -> list[str]:
    snakemake = shutil.which("snakemake") or str(Path(sys.executable).with_name("snakemake"))
    return [snakemake, "-s", str(Path(root).resolve() / "Snakefile"), "--cores", str(cores), "all",
            "--config", f"profile={setting}"]


def collect(root: Path, setting: str) -> Path:
    """The setting's claims.json, checked (sealed, whole, of this setting's profile), copied under results/settings/."""
    source = setting_folder(root, setting) / RESULTS / CLAIMS_JSON
    remedy = f"run `miniformer replicate --settings {setting}` again to re-make it"
    if not source.is_file():
        raise UserError(f"the {setting} setting's study left no {source}; {remedy}")
    document = read_claims_document(source, remedy)
    if document.get("profile") != setting:
        raise UserError(f"{str(source)!r} holds the claims of the {document.get('profile')!r} profile, not of the "
                        f"{setting} setting; {remedy}")
    target = Path(root) / RESULTS / SETTINGS_DIR / f"{setting}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def replicate(root: Path, params: Path, settings: list[str], cores: int) -> list[Path]:
    """Each setting's study (Snakemake, in its folder), then its claims under results/settings/. A setting whose DAG
    fails stops here with its folder kept: the next call resumes it."""
    unknown = [s for s in settings if s not in REPLICATION]
    if unknown:
        raise UserError(f"unknown replication setting {unknown[0]!r}; the settings are {', '.join(REPLICATION)}")
    for setting in settings:
        Study.load(params, setting)  # bad params are one line before anything runs
    collected = []
    for setting in settings:
        folder = stage_folder(root, setting, params)
        print(f"replication setting {setting}: the study in {folder} ...", flush=True)
        done = subprocess.run(snakemake_command(root, setting, cores), cwd=folder)
        if done.returncode != 0:
            raise UserError(f"the {setting} setting's study stopped (Snakemake exit {done.returncode}; its log is "
                            f"under {folder}/.snakemake/log/); fix what it names, then run `make replication` again: "
                            "finished runs are kept")
        collected.append(collect(root, setting))
        print(f"replication setting {setting}: claims in {collected[-1]}", flush=True)
    return collected
