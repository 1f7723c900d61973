"""The optimizer and the update step, shared by our trainer, the fine-tune and the cross-check's peer: the peer must
differ from ours only in its model, never in how it is optimised."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn
from torch.optim.adam import _single_tensor_adam

# the hyperparameters torch.optim.AdamW keeps in each group, so that a checkpoint written by either loads in the other
_GROUP_DEFAULTS = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                   "decoupled_weight_decay": True}


class AdamW:
    """AdamW (Loshchilov & Hutter, 2019) through the same kernels as torch.optim.AdamW — its fused one, or its
    per-tensor loop — so the updates and the state_dict are torch's, bit for bit (tests/test_optim.py holds both).

    Why not torch.optim.AdamW itself: its methods are wrapped for torch.compile, and the first call of any of them
    imports torch._dynamo (about as long as `import torch`) in every process, though nothing here is compiled; a smoke
    run pays it twice (training, then the fine-tune), more than its whole training (benchmarks/RESULTS.md)."""

    def __init__(self, groups: Iterable[dict], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, fused: bool | None = None) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, **_GROUP_DEFAULTS,
                    "fused": fused}
        self.param_groups = [{**defaults, **g, "params": list(g["params"])} for g in groups]
        self.state: dict[Tensor, dict[str, Tensor]] = {}

    def zero_grad(self) -> None:
        for p in self._params():
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for g in self.param_groups:
            params = [p for p in g["params"] if p.grad is not None]
            for p in params:
                if p not in self.state:
                    step = torch.zeros((), dtype=torch.float32, device=_step_device(p, g["fused"]))
                    self.state[p] = {"step": step, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
            states = [self.state[p] for p in params]
            grads, steps = [p.grad for p in params], [s["step"] for s in states]
            exp_avgs, exp_avg_sqs = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
            (beta1, beta2), hyper = g["betas"], {"lr": g["lr"], "weight_decay": g["weight_decay"], "eps": g["eps"]}
            if params and g["fused"]:  # one kernel for the group, as torch does for parameters on one device and dtype
                torch._foreach_add_(steps, 1)
                torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, beta1=beta1,
                                    beta2=beta2, maximize=False, grad_scale=None, found_inf=None, **hyper)
            elif params:
                _single_tensor_adam(params, grads, exp_avgs, exp_avg_sqs, [], steps, None, None, amsgrad=False,
                                    has_complex=False, beta1=beta1, beta2=beta2, maximize=False, capturable=False,
                                    differentiable=False, decoupled_weight_decay=True, **hyper)

    def state_dict(self) -> dict:
        """torch.optim's layout: parameters named by their position across the groups."""
        index = {p: i for i, p in enumerate(self._params())}
        return {"state": {index[p]: s for p, s in self.state.items()},
                "param_groups": [{**g, "params": [index[p] for p in g["params"]]} for g in self.param_groups]}

    def load_state_dict(self, saved: dict) -> None:
        params = list(self._params())
        fused = {p: g["fused"] for g in self.param_groups for p in g["params"]}
        for g, s in zip(self.param_groups, saved["param_groups"], strict=True):
            g.update({k: v for k, v in s.items() if k != "params"})
        self.state = {}
        for i, s in saved["state"].items():
            p = params[i]
            self.state[p] = {k: v.to(p.device, p.dtype) for k, v in s.items() if k != "step"}
            self.state[p]["step"] = s["step"].to(_step_device(p, fused[p]), torch.float32)

    def _params(self) -> Iterable[Tensor]:
        return (p for g in self.param_groups for p in g["params"])


def _step_device(p: Tensor, fused: bool | None) -> torch.device:
    # torch keeps a fused group's step count on the parameter's device, the per-tensor loop's on the CPU
    return p.device if fused else torch.device("cpu")


def make_optimizer(model: nn.Module, t, device: torch.device) -> AdamW:
    """AdamW with weight decay on matrices only (not norms, biases), as one fused kernel per parameter group.

    Fused on CPU too: benchmarks/RESULTS.md has its measured gain over the default per-tensor loop.
    """
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=device.type in ("cpu", "cuda"))


def set_lr(opt: AdamW, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def update(model: nn.Module, opt: AdamW, loss: Tensor, grad_clip: float) -> tuple[float, float]:
    """Backward, clip, step: (loss, gradient norm before clipping). A non-finite loss or gradient skips the step, so
    the weights stay those of the last good step (the caller records the divergence)."""
    opt.zero_grad()
    loss.backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip))
    loss_value = float(loss.detach())
    if math.isfinite(loss_value) and math.isfinite(grad_norm):
        opt.step()
    return loss_value, grad_norm
