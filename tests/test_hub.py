"""An export in the Hugging Face ecosystem: transformers loads it with the same logits, tokenizers and AutoTokenizer
read its tokenizer, the card's snippets run as written, and peft's LoRA fine-tunes the model by the names it targets.

Tiny in-memory models on a tiny prepared corpus: no training run is needed to test the folder's format, offline."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from miniformer.network.attention import prefix_mask
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.network.objectives import Specials
from miniformer.network.positions import POSITION_METHODS
from miniformer.params import Study
from miniformer.runtime.tokendata import TokenData
from miniformer.stages.export import ExportSource, export_model, val_interval, write_export
from miniformer.stages.prepare import prepare
from tests.conftest import make_text, require_system, tiny_params

OBJECTIVES = ("causal", "prefix", "span", "mlm")


@pytest.fixture(autouse=True)
def offline_hub(tmp_path_factory, monkeypatch) -> None:
    """transformers offline, its module cache (where trust_remote_code copies the modeling files) in a temp folder."""
    require_system(importlib.util.find_spec("transformers") is not None and importlib.util.find_spec("peft")
                   is not None, "transformers and peft (the hub extra: pip install -e '.[hub]')")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))


def prepared(root: Path, tokenizer: str) -> Path:
    corpus = root / "corpus.txt"
    # spaces before line ends: where a byte-level BPE applied to the whole text cuts other pieces than the
    # line-by-line encoding the model was trained on
    lines = make_text(600).splitlines()
    corpus.write_text("".join(line + (" \n" if i % 5 == 0 else "\n") for i, line in enumerate(lines)), encoding="utf-8")
    params = tiny_params(corpus)
    params["data"] = {**params["data"], "tokenizer": tokenizer, "vocab_size": 300}
    prepare(Study(params).data_config(), root / "data", min_tokens=17)
    return root / "data"


@pytest.fixture(scope="module")
def char_data(tmp_path_factory) -> Path:
    return prepared(tmp_path_factory.mktemp("char"), "char")


@pytest.fixture(scope="module")
def bpe_data(tmp_path_factory) -> Path:
    return prepared(tmp_path_factory.mktemp("bpe"), "bpe")


def tiny_model(data: Path, **model) -> MiniFormer:
    torch.manual_seed(0)
    cfg = {"block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 16, **model}
    return MiniFormer(ModelConfig(vocab_size=Specials(TokenData(data).vocab_size).model_vocab, **cfg)).eval()


def exported(model: MiniFormer, data: Path, out: Path, objective: str = "causal", windows: dict | None = None) -> Path:
    meta = TokenData(data).meta
    train = {"objective": objective, "steps": 1, "batch_size": 1, "lr": 0.001}
    source = ExportSource("baseline", {"model": model.cfg.to_dict(), "train": train}, meta, "fp", windows, "Romeo: th")
    return write_export(model, source, out)


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("pos", POSITION_METHODS)
def test_transformers_loads_an_export_with_miniformers_logits(char_data, tmp_path, pos, objective):
    """AutoConfig and the Auto class the objective names load the folder; the logits equal miniformer's under the
    objective's reading (left to right; a prefix read both ways; every token seeing every other)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    model = tiny_model(char_data, pos=pos)
    folder = exported(model, char_data, tmp_path / "export", objective)
    assert type(AutoConfig.from_pretrained(folder, trust_remote_code=True)).__name__ == "MiniFormerConfig"
    ids = torch.tensor([TokenData(char_data).tokenizer.encode("Romeo:\nThe king")])
    T = ids.size(1)
    with torch.no_grad():
        if objective == "mlm":
            hf = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)
            pairs = [(hf(ids).logits, model(ids, attn_mask=torch.ones(T, T, dtype=torch.bool))["logits"])]
        else:
            hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
            pairs = [(hf(ids).logits, model(ids)["logits"])]
            if objective != "causal":  # the prefix LM's and span corruption's reading of an input: a prefix both ways
                pairs.append((hf(ids, prefix_length=6).logits,
                              model(ids, attn_mask=prefix_mask(torch.tensor([6]), T))["logits"]))
    for through_transformers, own in pairs:
        torch.testing.assert_close(through_transformers, own, rtol=1e-5, atol=1e-5)


def test_generate_through_transformers_is_miniformers_without_special_tokens(char_data, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = tiny_model(char_data)
    folder = exported(model, char_data, tmp_path / "export")
    base = TokenData(char_data).vocab_size
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["suppress_tokens"] == list(range(base, model.cfg.vocab_size))  # [MASK] and sentinels
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    ids = tokenizer("Romeo:\nThe", return_tensors="pt").input_ids
    through_transformers = hf.generate(ids, max_new_tokens=12, do_sample=False)
    own = model.generate(ids, 12, temperature=0, allowed_vocab=base)
    assert through_transformers.tolist() == own.tolist()


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_tokenizers_and_autotokenizer_read_the_tokenizer_and_round_trip_the_train_split(request, tmp_path, kind):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    data = request.getfixturevalue(f"{kind}_data")
    folder = exported(tiny_model(data), data, tmp_path / "export")
    tokens = TokenData(data)
    ids = tokens.splits["train"].tolist()
    text = tokens.tokenizer.decode(ids)
    library = Tokenizer.from_file(str(folder / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert library.encode(text).ids == ids  # the very ids the model was trained on
    assert auto(text).input_ids == ids
    assert library.decode(ids) == text and auto.decode(ids) == text
    assert auto.mask_token == "[MASK]" and auto.mask_token_id == tokens.vocab_size
    assert auto.convert_ids_to_tokens(tokens.vocab_size + 1) == "<extra_id_0>"


def card_blocks(folder: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (folder / "README.md").read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow  # a fresh interpreter (or Snakemake) per case: seconds each
@pytest.mark.parametrize("objective", ["causal", "prefix", "mlm"])
def test_the_cards_snippets_run_as_written_in_a_fresh_interpreter_elsewhere(char_data, tmp_path, objective):
    folder = exported(tiny_model(char_data), char_data, tmp_path / "export", objective)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    blocks = card_blocks(folder)
    assert len(blocks) == 2 and "transformers" in blocks[0] and "miniformer.load" in blocks[1]
    for code in blocks:
        done = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": ""})
        assert done.returncode == 0, done.stderr[-2000:]
        if objective != "mlm":
            assert done.stdout.startswith("Romeo: th") and "[MASK]" not in done.stdout and "\u2047" not in done.stdout


def test_the_card_carries_hub_metadata_with_the_val_loss_and_its_interval(char_data, tmp_path):
    windows = {"val": {"sum": [30.0, 33.0, 36.0, 27.0], "count": [10, 10, 10, 10]}}
    folder = exported(tiny_model(char_data, pos="alibi"), char_data, tmp_path / "export", windows=windows)
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "mit" and meta["library_name"] == "transformers"
    assert meta["pipeline_tag"] == "text-generation" and "pos-alibi" in meta["tags"] and meta["datasets"]
    metrics = {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    loss, half, _ = val_interval(windows)
    assert metrics["loss"] == pytest.approx(3.15) == pytest.approx(loss)
    assert metrics["loss_ci95_half_width"] == round(half, 4) and half > 0  # 1.96 · sd / √4 of the window means
    assert "It is **not** a" in card and "general-purpose language model" in card


def test_characters_outside_the_vocabulary_are_dropped_by_the_ecosystems_tokenizer(char_data, tmp_path):
    """As miniformer's own lossy encoding does: a word-level model without an unknown token would raise instead."""
    from transformers import AutoTokenizer

    folder = exported(tiny_model(char_data), char_data, tmp_path / "export")
    auto = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    tok = TokenData(char_data).tokenizer
    assert auto("The é king 我 [MASK]").input_ids == tok.encode("The  king  ") + [auto.mask_token_id]


def test_transformers_refuses_an_export_edited_since_it_was_written(char_data, tmp_path):
    from transformers import AutoModelForCausalLM

    folder = exported(tiny_model(char_data), char_data, tmp_path / "export")
    config = json.loads((folder / "config.json").read_text())
    config["model"]["n_head"] = 1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="config.json is not the file `miniformer export` wrote"):
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    (folder / "provenance.json").unlink()  # changed on purpose: the record removed, the folder loads as it is
    assert AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).net.cfg.n_head == 1


def test_transformers_refuses_an_export_whose_modeling_code_was_edited(char_data, tmp_path):
    """The battery's case: logits halved in modeling_miniformer.py loaded silently (logit sum −465.7 vs −931.5)."""
    from transformers import AutoModelForCausalLM

    folder = exported(tiny_model(char_data), char_data, tmp_path / "export-code")
    modeling = folder / "modeling_miniformer.py"
    modeling.write_text(modeling.read_text().replace("logits=logits)", "logits=logits / 2)"))
    with pytest.raises(ValueError, match="modeling_miniformer.py is not the file `miniformer export` wrote"):
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)


@pytest.mark.parametrize("objective", ["causal", "mlm"])
def test_a_padded_batch_scores_each_text_as_alone(char_data, tmp_path, objective):
    """`tok([...], padding=True)` said "Asking to pad but the tokenizer does not have a padding token". Now it pads
    on the right with a token no text holds, and each text's logits in the batch equal its logits alone; a left
    padding (which would move every position) is refused in words."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    folder = exported(tiny_model(char_data), char_data, tmp_path / "export", objective)
    tok = AutoTokenizer.from_pretrained(folder)
    auto = AutoModelForMaskedLM if objective == "mlm" else AutoModelForCausalLM
    hf = auto.from_pretrained(folder, trust_remote_code=True)
    texts = ["Romeo", "Romeo:\nThe king"]
    batch = tok(texts, padding=True, return_tensors="pt")
    assert batch.attention_mask[0].tolist()[-1] == 0  # the short text was padded, on the right
    with torch.no_grad():
        together = hf(**batch).logits
        for i, text in enumerate(texts):
            alone = hf(**tok(text, return_tensors="pt")).logits[0]
            torch.testing.assert_close(together[i, :alone.size(0)], alone, rtol=1e-5, atol=1e-5)
        tok.padding_side = "left"
        with pytest.raises(ValueError, match="right-padded batches only"):
            hf(**tok(texts, padding=True, return_tensors="pt"))


def test_every_exported_file_is_readable_by_all(char_data, tmp_path):
    old = os.umask(0o022)
    try:
        folder = exported(tiny_model(char_data), char_data, tmp_path / "export")
    finally:
        os.umask(old)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in folder.iterdir()}
    assert set(modes.values()) == {"0o644"}, modes


def test_old_checkpoints_with_a_fused_qkv_load_with_the_same_logits():
    """Checkpoints written before the projections were split (attn.qkv, attn.proj, mlp.fc, mlp.proj) still load."""
    from miniformer.runtime.checkpoints import renamed_state

    torch.manual_seed(0)
    model = MiniFormer(ModelConfig(vocab_size=20, block_size=8, n_layer=2, n_head=2, n_embd=16, bias=True)).eval()
    old = {}
    for name, tensor in model.state_dict().items():
        for new, was in ((".mlp.up_proj.", ".mlp.fc."), (".mlp.down_proj.", ".mlp.proj."), (".attn.o_proj.",
                                                                                             ".attn.proj.")):
            name = name.replace(new, was)
        if ".attn.q_proj." in name:
            parts = [model.state_dict()[name.replace("q_proj", role)] for role in ("q_proj", "k_proj", "v_proj")]
            old[name.replace(".q_proj.", ".qkv.")] = torch.cat(parts)
        elif ".attn.k_proj." not in name and ".attn.v_proj." not in name:
            old[name] = tensor
    again = MiniFormer(ModelConfig(vocab_size=20, block_size=8, n_layer=2, n_head=2, n_embd=16, bias=True)).eval()
    torch.manual_seed(1)
    again.load_state_dict(renamed_state(old))
    ids = torch.arange(8)[None]
    assert torch.equal(again(ids)["logits"], model(ids)["logits"])


def test_lora_on_q_and_v_lowers_the_loss_on_a_new_text_and_the_merge_exports(char_data, tmp_path):
    """peft's LoRA under target_modules=["q_proj", "v_proj"] adapts exactly those projections: r·(C + C) trainable
    numbers per projection, everything else frozen; it lowers the loss on held-out text of the new kind; the merged
    model exports and loads like any other, with the merged model's logits."""
    from peft import LoraConfig, get_peft_model

    import miniformer

    model = tiny_model(char_data)
    tok = TokenData(char_data).tokenizer
    new_text = torch.tensor(tok.encode("Nurse:\nthe nurse doth speak of the sea.\n" * 40))
    g = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, new_text.numel() - 17, (8,), generator=g)
        windows = torch.stack([new_text[s : s + 17] for s in starts])
        return windows[:, :-1], windows[:, 1:]

    held = batch()
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    trainable = {n: p.numel() for n, p in lora.named_parameters() if p.requires_grad}
    assert len(trainable) == 2 * 2 * 2  # layers x (q, v) x (A, B)
    assert sum(trainable.values()) == 2 * 2 * 4 * (16 + 16)
    assert all(".q_proj." in n or ".v_proj." in n for n in trainable)
    with torch.no_grad():
        before = lora(*held)["loss"].item()
    opt = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=0.01)
    lora.train()
    for _ in range(60):
        loss = lora(*batch())["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    lora.eval()
    with torch.no_grad():
        after = lora(*held)["loss"].item()
    assert after < before - 0.3
    merged = lora.merge_and_unload()
    folder = export_model(merged, char_data, tmp_path / "lora", "baseline + LoRA",
                          {"objective": "causal", "steps": 1, "batch_size": 8, "lr": 0.001},
                          {"method": "LoRA", "target_modules": ["q_proj", "v_proj"], "r": 4, "steps": 60})
    loaded, _ = miniformer.load(folder)
    with torch.no_grad():
        assert torch.equal(loaded(held[0])["logits"], merged(held[0])["logits"])
    assert json.loads((folder / "config.json").read_text())["finetune"]["method"] == "LoRA"
    assert "not evaluated" in (folder / "README.md").read_text()


@pytest.mark.slow  # a fresh interpreter (or Snakemake) per case: seconds each
def test_the_readmes_hub_recipes_run_as_written(char_data, tmp_path):
    """The README's transformers and LoRA snippets, from a project root holding `my-model` (an export) and
    `data/prepared`."""
    import shutil

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### In the Hugging Face ecosystem")[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2 and "get_peft_model" in blocks[1]
    exported(tiny_model(char_data), char_data, tmp_path / "my-model")
    shutil.copytree(char_data, tmp_path / "data" / "prepared")
    for code in blocks:
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    card = (tmp_path / "my-model-lora" / "README.md").read_text(encoding="utf-8")
    assert "| training | 1 steps, batch 1, lr 0.001 |" in card and "method: LoRA (peft)" in card
    assert "exported from memory" in card


def test_the_exported_network_file_holds_every_module_the_model_imports_in_import_order():
    """Read from the imports themselves: a module the model comes to need (network/given.py did) joins the export's
    one file, each after the modules it imports, and the file runs with nothing of miniformer installed."""
    import ast

    from miniformer.hub.network_file import NETWORK, modules_in_order, network_source

    order = modules_in_order()
    for i, name in enumerate(order):
        tree = ast.parse((NETWORK / name).read_text(encoding="utf-8"))
        needed = {n.module.rsplit(".", 1)[1] + ".py" for n in tree.body
                  if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("miniformer.network.")}
        assert needed <= set(order[:i]), (name, needed - set(order[:i]))
    assert "given.py" in order and order[-1] == "model.py"
    namespace: dict = {}
    exec(compile(network_source(), "miniformer_network.py", "exec"), namespace)  # noqa: S102 - our own source
    assert {"MiniFormer", "GivenCode", "SelfAttention", "POSITIONS"} <= set(namespace)


@pytest.mark.parametrize("kind", ["char", "bpe"])
@pytest.mark.parametrize("text", ["\n\n\nROMEO:", "  two spaces,\tthen a tab\t\t", "\n \n \n", "end of a line  \n\n"])
def test_the_exported_tokenizer_keeps_blank_lines_and_whitespace_runs_as_miniformer_does(request, tmp_path, kind,
                                                                                        text):
    """Blank lines, runs of spaces and tabs: the ecosystem's tokenizer gives miniformer's ids and decodes them back
    to the same text (a normaliser or pre-tokenizer that collapsed whitespace would change both)."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    data = request.getfixturevalue(f"{kind}_data")
    folder = exported(tiny_model(data), data, tmp_path / "export")
    own = TokenData(data).tokenizer
    ids = own.encode_lossy(text)[0]
    library = Tokenizer.from_file(str(folder / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert library.encode(text).ids == ids and auto(text).input_ids == ids
    assert auto.decode(ids) == own.decode(ids)
