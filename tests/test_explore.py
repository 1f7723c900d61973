"""`miniformer runs | generate | score | attention` on tiny trained runs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from miniformer.cli import main
from tests.conftest import study_args, tiny_params


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect")
    corpus = root / "corpus.txt"
    from tests.conftest import make_text

    corpus.write_text(make_text(), encoding="utf-8")
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)))
    assert run(root, "prepare", "--out", str(root / "data")) == 0
    for exp in ("baseline", "pos_learned", "obj_mlm"):
        assert run(root, "train", exp, "--seed", "0") == 0
    return root


def run(root: Path, *args: str) -> int:
    """The command with the study flags it takes: the commands that use a trained run do not read params.yaml."""
    return main([*args, *study_args(args[0], root)])


def test_a_flag_a_command_would_ignore_is_refused(trained, capsys):
    assert run(trained, "generate", "baseline", "--params", "other.yaml") == 2
    assert "unrecognized arguments: --params other.yaml" in capsys.readouterr().err
    refused = (("prepare", "--results"), ("init-probe", "--data"), ("runs", "--profile"), ("list", "--data"))
    for command, flag in refused:
        assert main([command, flag, "x"]) == 2, command
        assert f"unrecognized arguments: {flag} x" in capsys.readouterr().err


def test_runs_lists_every_trained_run(trained, capsys):
    assert run(trained, "runs") == 0
    out = capsys.readouterr().out
    for exp in ("baseline", "pos_learned", "obj_mlm"):
        assert exp in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["baseline"][1] == "0" and rows["baseline"][2] == "30"  # seed and steps columns, not a path


def test_generate_past_block_size_for_rope(trained, capsys):
    assert run(trained, "generate", "baseline", "--prompt", "Romeo:", "--tokens", "50") == 0
    text = capsys.readouterr().out
    assert text.startswith("Romeo:") and len(text.rstrip("\n")) >= 50


def test_generate_learned_past_block_size_fails_clearly(trained, capsys):
    assert run(trained, "generate", "pos_learned", "--prompt", "Ro", "--tokens", "50") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "learned absolute positions stop at block_size=16" in err[0]


def test_score_causal_and_pseudo_likelihood(trained, capsys):
    assert run(trained, "score", "baseline", "the king hath") == 0
    out = capsys.readouterr().out
    assert out.startswith("sequence log-likelihood: mean loss") and "perplexity" in out
    head, *tokens = out.strip().splitlines()
    assert len(tokens) == len("the king hath")  # one line per character, each with its loss
    losses = [float(t.split()[-1]) for t in tokens]
    mean = float(head.split("mean loss ")[1].split()[0])
    assert mean == pytest.approx(sum(losses) / len(losses), abs=2e-3)  # the headline is the mean of the tokens
    assert run(trained, "score", "obj_mlm", "the king hath") == 0
    assert capsys.readouterr().out.startswith("pseudo-log-likelihood")


def test_score_versus_names_the_preferred_order(trained, capsys):
    assert run(trained, "score", "baseline", "the king hath", "--versus", "hath king the") == 0
    out = capsys.readouterr().out
    totals = [float(line.split(": ")[1].split()[0]) for line in out.splitlines() if line.startswith("  ")]
    preferred = "A" if totals[0] < totals[1] else "B"
    assert f"prefers {preferred} by {abs(totals[0] - totals[1]):.3f} nats" in out
    assert run(trained, "score", "obj_mlm", "the king", "--versus", "king the") == 0
    assert capsys.readouterr().out.startswith("pseudo-log-likelihood")
    assert run(trained, "score", "baseline", "the king", "--versus", "a queen") == 0
    assert "different characters" in capsys.readouterr().out


def test_score_file_writes_csv(trained, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("the king\nthe queen doth\n")
    out = tmp_path / "scores.csv"
    assert run(trained, "score", "baseline", "--file", str(lines), "-o", str(out)) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["text"] for r in rows] == ["the king", "the queen doth"]
    assert all(float(r["perplexity"]) > 1 for r in rows)


def test_out_of_vocabulary_characters_are_named(trained, capsys):
    assert run(trained, "score", "baseline", "the king 我") == 0
    assert "'我'" in capsys.readouterr().err


def test_attention_figure_for_own_text(trained, tmp_path):
    out = tmp_path / "att.png"
    assert run(trained, "attention", "baseline", "--text", "thou hath", "--all", "-o", str(out)) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_run_is_one_line(trained, capsys):
    assert run(trained, "generate", "nope") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown run 'nope'" in err[0] and "baseline" in err[0]


def test_checkpoint_from_another_tokenizer(trained, tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("完全不同的文字。" * 500, encoding="utf-8")
    params = tiny_params(other)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert main(["prepare", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "data")]) == 0
    rc = main(
        [
            "generate",
            "baseline",
            "--data",
            str(tmp_path / "data"),
            "--results",
            str(trained / "results"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "another tokenizer" in err[-1]


# --- every flag checked where it enters: one line, exit 2, nothing written ------------------------------------------


@pytest.mark.parametrize("flags,message", [
    (["--top-k", "0"], "argument --top-k: 0 must be >= 1"),
    (["--top-k", "-3"], "argument --top-k: -3 must be >= 1"),
    (["--temperature", "-1"], "argument --temperature: -1 must be >= 0"),
    (["--tokens", "-5"], "argument --tokens: -5 must be between 1 and 100000"),
    (["--tokens", str(10**7)], "must be between 1 and 100000"),
    (["--tokens", "many"], "'many' is not an integer"),
    (["--seed", "-1"], "argument --seed: -1 must be >= 0"),
])
def test_generate_flags_out_of_range_are_one_line(trained, capsys, flags, message):
    assert run(trained, "generate", "baseline", *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_huge_sentence_is_refused_before_scoring(trained, capsys):
    assert run(trained, "score", "baseline", "the king " * 100) == 2  # 900 tokens > 16 blocks of 16
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the sentence has 900 tokens; at most 256" in err[0]


def test_every_line_of_a_file_is_checked_before_the_first_is_scored(trained, tmp_path, capsys):
    lines = tmp_path / "lines.txt"
    lines.write_text("the king\n" + "the king " * 100 + "\n", encoding="utf-8")
    out = tmp_path / "scores.csv"
    assert run(trained, "score", "baseline", "--file", str(lines), "-o", str(out)) == 2
    assert "line 2 of --file has 900 tokens" in capsys.readouterr().err
    assert not out.exists()


def test_a_long_attention_text_is_refused(trained, tmp_path, capsys):
    out = tmp_path / "att.png"
    assert run(trained, "attention", "baseline", "--text", "thou " * 1000, "-o", str(out)) == 2
    assert "--text has 5000 tokens; at most 80" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("target,message", [
    ("missing/dir/x.png", "does not exist; create it first"),
    ("x.foo", "must end in .png or .svg or .pdf or .html"),
    (".", "is a folder; give a file name"),
])
def test_output_paths_are_checked_before_any_work(trained, tmp_path, capsys, monkeypatch, target, message):
    monkeypatch.chdir(tmp_path)
    assert run(trained, "attention", "baseline", "--text", "thou", "-o", target) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder made, no file written


def test_score_output_in_a_missing_folder_is_refused_before_scoring(trained, tmp_path, capsys):
    lines = tmp_path / "lines.txt"
    lines.write_text("the king\n", encoding="utf-8")
    assert run(trained, "score", "baseline", "--file", str(lines), "-o", str(tmp_path / "no" / "x.csv")) == 2
    assert "does not exist; create it first" in capsys.readouterr().err


def test_an_output_flag_that_would_do_nothing_is_refused(trained, tmp_path, capsys):
    assert run(trained, "score", "baseline", "the king", "-o", str(tmp_path / "x.csv")) == 2
    assert "-o/--out is for --file" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["/nonexistent/run", "..", "{trained}/results/runs"])
def test_a_folder_without_a_checkpoint_is_one_line(trained, capsys, spec):
    assert run(trained, "generate", spec.format(trained=trained)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no checkpoint in folder" in err[0]


def test_a_run_folder_given_by_absolute_path_works(trained, capsys):
    folder = trained / "results" / "runs" / "baseline" / "seed0"
    assert run(trained, "generate", str(folder), "--tokens", "5") == 0


def test_runs_lists_a_run_whose_metrics_are_unreadable(trained, capsys, tmp_path):
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(trained / "results", copy)
    (copy / "runs" / "baseline" / "seed0" / "metrics.json").write_text("{broken")
    assert main(["runs", "--results", str(copy)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["baseline"][2] == "…"  # steps unknown, the rest of the list intact


# --- a model you can hand on ------------------------------------------------------------------------------------------


def test_export_round_trips_the_logits_bit_for_bit(trained, tmp_path, monkeypatch, capsys):
    import torch

    import miniformer
    from miniformer.runtime.checkpoints import load_run_model

    out = tmp_path / "handed-on"
    assert run(trained, "export", "baseline", str(out)) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md", "config.json", "configuration_miniformer.py", "generation_config.json", "miniformer_network.py",
        "model.safetensors", "modeling_miniformer.py", "provenance.json", "tokenizer.json", "tokenizer_config.json"]
    card = (out / "README.md").read_text()
    assert "parameters" in card and "miniformer.load" in card and "rope" in card
    monkeypatch.chdir(tmp_path)  # nothing of the study tree is needed from here on
    model, tokenizer = miniformer.load(out)
    original, _, _ = load_run_model(trained / "results" / "runs" / "baseline" / "seed0", torch.device("cpu"))
    ids = torch.tensor([tokenizer.encode("the king hath")])
    assert torch.equal(model(ids)["logits"], original(ids)["logits"])
    text = tokenizer.decode(model.generate(ids, 10, temperature=0)[0].tolist())
    assert text.startswith("the king hath") and len(text) == len("the king hath") + 10


def test_export_refuses_a_folder_that_is_not_empty_and_load_names_what_is_missing(trained, tmp_path, capsys):
    import miniformer
    from miniformer.errors import UserError

    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    assert run(trained, "export", "baseline", str(tmp_path / "busy")) == 2
    assert "is not empty" in capsys.readouterr().err
    with pytest.raises(UserError, match="missing model.safetensors, config.json, tokenizer.json"):
        miniformer.load(tmp_path / "busy")


# --- CLI hygiene -----------------------------------------------------------------------------------------------------


def test_every_flag_has_help_and_internal_commands_stay_out_of_the_main_help(capsys):
    import argparse

    from miniformer.cli import INTERNAL, build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name} {action.option_strings or action.dest} has no help"
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out.split("internal commands")[0]
    for name in INTERNAL:
        assert f"\n    {name} " not in listed and f"\n    {name}\n" not in listed


def test_runs_refuses_a_missing_results_folder(capsys):
    assert main(["runs", "--results", "/nonexistent/results"]) == 2
    assert "no results folder at '/nonexistent/results'" in capsys.readouterr().err


def test_runs_columns_fit_sweep_names(trained, tmp_path, capsys):
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(trained / "results" / "runs" / "baseline", copy / "runs" / "baseline" / "lr=0.000123456789")
    assert main(["runs", "--results", str(copy)]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("baseline/lr="))
    assert row.split()[0] == "baseline/lr=0.000123456789" and row.split()[1] == "0"  # name and seed stay apart
    assert row.index(" 0 ") + 1 == lines[0].index("seed") + 3  # right-aligned under its 4-wide header


# --- heatmaps to explore ---------------------------------------------------------------------------------------------


def hover_title(page: Path, selector: str, tmp_path: Path) -> str:
    """Open ``page`` in headless Chromium, move the mouse over the centre of ``selector`` through the DevTools
    protocol (a real hover: the browser's :hover state), and return the hovered element's tag and <title>."""
    import asyncio
    import json as json_
    import shutil
    import subprocess
    import time
    import urllib.request

    import aiohttp

    from tests.conftest import require_system

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    require_system(bool(chromium), "the hover test needs a browser: apt-get install chromium")
    profile = tmp_path / "chromium-profile"
    browser = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().strip():
                break
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        targets = json_.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        socket_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")

        async def drive() -> str:
            async with aiohttp.ClientSession() as session, session.ws_connect(socket_url, max_msg_size=0) as ws:
                counter = iter(range(1, 1000))

                async def call(method: str, **params):
                    n = next(counter)
                    await ws.send_json({"id": n, "method": method, "params": params})
                    while True:
                        msg = await ws.receive_json(timeout=30)
                        if msg.get("id") == n:
                            return msg.get("result", {})

                async def evaluate(expression: str):
                    return (await call("Runtime.evaluate", expression=expression, returnByValue=True))["result"].get(
                        "value")

                await call("Page.navigate", url=page.as_uri())
                for _ in range(100):
                    if await evaluate(f"document.readyState === 'complete' && !!document.querySelector('{selector}')"):
                        break
                    await asyncio.sleep(0.1)
                x, y = await evaluate(f"(() => {{ const r = document.querySelector('{selector}')"
                                      ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
                await call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
                return await evaluate("(() => { const h = [...document.querySelectorAll(':hover')]; "
                                      "const el = h[h.length - 1]; "
                                      "return el.tagName + '|' + el.querySelector('title').textContent; })()")

        return asyncio.run(drive())
    finally:
        browser.kill()
        browser.wait()


def test_a_hoverable_attention_page_names_query_key_and_weight_under_the_mouse(trained, tmp_path, capsys):
    import torch

    from miniformer.stages import explore

    out = tmp_path / "att.html"
    assert run(trained, "attention", "baseline", "--text", "thou hath", "--html", "-o", str(out)) == 0
    html = out.read_text(encoding="utf-8")
    assert "<script" not in html and "http" not in html.split("xmlns")[0]  # offline, no script
    loaded = explore.load("baseline", trained / "results", None, trained / "data")
    ids = loaded.tokenizer.encode("thou hath")
    weights = loaded.model(torch.tensor([ids]), return_weights=True)["weights"][-1][0, 0]
    said = hover_title(out, 'rect[data-q="6"][data-k="2"]', tmp_path)
    assert said == f"rect|query 6 'a' → key 2 'o': {weights[6, 2].item():.3f}"


def test_html_and_figure_outputs_are_not_mixed(trained, tmp_path, capsys):
    assert run(trained, "attention", "baseline", "--text", "thou", "--html", "-o", str(tmp_path / "a.png")) == 2
    assert "--html writes a hoverable page" in capsys.readouterr().err


def test_attention_without_o_writes_beside_the_runs_not_into_the_current_folder(trained, tmp_path, monkeypatch,
                                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    for flags, suffix in (([], ".png"), (["--html"], ".html")):
        assert run(trained, "attention", "baseline", "--text", "thou hath", *flags) == 0
        written = trained / "results" / "explore" / f"attention-baseline{suffix}"
        assert written.stat().st_size > 0 and f"wrote {written}" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
