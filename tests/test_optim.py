"""Our AdamW is torch.optim.AdamW without its torch.compile wrappers: same updates bit for bit, same state_dict, and a
checkpoint written by either resumes in the other. It must also never import torch._dynamo (what it exists to avoid)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from miniformer.runtime.optim import AdamW, make_optimizer, set_lr, update
from tests.conftest import loads_in_a_fresh_interpreter


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))


def _groups(model: torch.nn.Module) -> list[dict]:
    # the trainer's split: decay on matrices only
    return [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]


def _train(model: torch.nn.Module, opt, steps: int, start: int = 0) -> None:
    for i in range(start, start + steps):
        torch.manual_seed(100 + i)
        for g in opt.param_groups:
            g["lr"] = 1e-2 * (1 + i % 3)  # the schedule changes the rate between steps
        loss = model(torch.randn(5, 6)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def _pair(fused: bool | None):
    ours_model, torch_model = _model(), _model()
    kw = {"lr": 1e-2, "betas": (0.9, 0.95), "fused": fused}
    return (ours_model, AdamW(_groups(ours_model), **kw)), (torch_model, torch.optim.AdamW(_groups(torch_model), **kw))


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def _same_state(a: dict, b: dict) -> bool:
    if a["param_groups"] != b["param_groups"] or a["state"].keys() != b["state"].keys():
        return False
    return all(torch.equal(a["state"][i][k], b["state"][i][k]) and a["state"][i][k].device == b["state"][i][k].device
               for i in a["state"] for k in ("step", "exp_avg", "exp_avg_sq"))


@pytest.mark.parametrize("fused", [True, None], ids=["fused (training)", "per-tensor (fine-tune)"])
def test_updates_and_state_are_torchs_bit_for_bit(fused):
    (ours_model, ours), (torch_model, theirs) = _pair(fused)
    _train(ours_model, ours, 7)
    _train(torch_model, theirs, 7)
    assert _same_weights(ours_model, torch_model)
    assert _same_state(ours.state_dict(), theirs.state_dict())


def test_a_parameter_without_a_gradient_is_left_alone():
    (model, opt), _ = _pair(True)
    frozen = model[2].bias
    frozen.requires_grad_(False)
    before = frozen.clone()
    _train(model, opt, 3)
    assert torch.equal(frozen, before) and frozen not in opt.state


@pytest.mark.parametrize("writer", ["ours", "torch"])
def test_a_checkpoint_of_either_resumes_in_ours_as_if_never_stopped(writer, tmp_path):
    (straight_model, straight), (torch_model, theirs) = _pair(True)
    _train(straight_model, straight, 6)
    first_model, first = (_pair(True)[0] if writer == "ours" else (torch_model, theirs))
    _train(first_model, first, 3)
    torch.save({"model": first_model.state_dict(), "opt": first.state_dict()}, tmp_path / "ckpt.pt")
    saved = torch.load(tmp_path / "ckpt.pt")
    resumed_model = _model(seed=9)  # other weights: everything must come from the checkpoint
    resumed_model.load_state_dict(saved["model"])
    resumed = AdamW(_groups(resumed_model), lr=1.0, betas=(0.5, 0.5), fused=True)
    resumed.load_state_dict(saved["opt"])
    _train(resumed_model, resumed, 3, start=3)
    assert _same_weights(resumed_model, straight_model)


def test_training_a_step_never_imports_torch_dynamo():
    code = ("import torch\n"
            "from miniformer.runtime.optim import AdamW\n"
            "m = torch.nn.Linear(3, 3)\n"
            "for fused in (True, None):\n"
            "    o = AdamW([{'params': m.parameters()}], lr=0.1, fused=fused)\n"
            "    m(torch.ones(2, 3)).sum().backward(); o.step(); o.zero_grad(); o.load_state_dict(o.state_dict())")
    assert not loads_in_a_fresh_interpreter(code, "torch._dynamo")


def test_the_defaults_are_torchs():
    # the fine-tune names only its rate and decay: the betas, eps and the per-tensor path are the defaults'
    model = _model()
    ours = AdamW([{"params": model.parameters()}], lr=1e-3).state_dict()["param_groups"]
    assert ours == torch.optim.AdamW(model.parameters(), lr=1e-3).state_dict()["param_groups"]


def test_loading_a_state_replaces_the_one_there():
    (model, opt), (fresh_model, fresh) = _pair(True)
    empty = opt.state_dict()  # saved before any step
    _train(model, opt, 2)
    model.load_state_dict(fresh_model.state_dict())
    opt.load_state_dict(empty)
    _train(model, opt, 3)
    _train(fresh_model, fresh, 3)
    assert _same_weights(model, fresh_model)


def test_the_trainers_optimizer_decays_matrices_only_in_one_fused_kernel():
    model = _model()
    t = SimpleNamespace(lr=3e-3, beta1=0.9, beta2=0.95, weight_decay=0.1)
    opt = make_optimizer(model, t, torch.device("cpu"))
    decayed, kept = opt.param_groups
    assert [p.dim() for p in decayed["params"]] == [2, 2] and decayed["weight_decay"] == 0.1
    assert [p.dim() for p in kept["params"]] == [1, 1, 1, 1] and kept["weight_decay"] == 0.0
    assert all(g["fused"] and g["lr"] == 3e-3 and g["betas"] == (0.9, 0.95) for g in opt.param_groups)
    set_lr(opt, 7e-4)
    assert [g["lr"] for g in opt.param_groups] == [7e-4, 7e-4]


def test_an_update_returns_loss_and_unclipped_norm_and_skips_a_non_finite_step():
    model = _model()
    opt = AdamW(_groups(model), lr=0.1, fused=True)
    torch.manual_seed(1)
    loss = model(torch.randn(5, 6)).pow(2).mean() * 1e3
    before = [p.clone() for p in model.parameters()]
    value, norm = update(model, opt, loss, grad_clip=1.0)
    assert value == pytest.approx(loss.item()) and norm > 1.0  # the norm before clipping
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    x = torch.randn(5, 6)
    alone = torch.autograd.grad(model(x).sum(), list(model.parameters()))  # the step's gradient is its own loss's
    update(model, opt, model(x).sum(), grad_clip=1e9)  # unclipped, to compare
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), alone))
    kept = [p.clone() for p in model.parameters()]
    value, _ = update(model, opt, model(torch.full((5, 6), float("nan"))).sum(), grad_clip=1.0)
    assert value != value and all(torch.equal(a, b) for a, b in zip(kept, model.parameters()))
    value, norm = update(model, opt, (model(x).pow(2).mean() * 0).sqrt(), grad_clip=1.0)  # finite loss, NaN gradient
    assert value == 0.0 and norm != norm and all(torch.equal(a, b) for a, b in zip(kept, model.parameters()))
