"""Where a model runs. Light on purpose (torch is imported when a device is picked), so the CLI can name the choices
without importing torch."""

from __future__ import annotations

from miniformer.errors import UserError

DEVICES = ("auto", "cpu", "cuda", "mps")  # auto: cuda, then mps (Apple GPUs), then cpu


def pick_device(requested: str):
    """'auto' takes CUDA, then Apple's MPS, then the CPU. Byte-identical metrics are a CPU guarantee only: GPU kernels
    may reduce in another order."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    available = {"cuda": torch.cuda.is_available(), "mps": bool(mps and mps.is_available()), "cpu": True}
    if requested == "auto":
        return torch.device(next(d for d in ("cuda", "mps", "cpu") if available[d]))
    if not available.get(requested, False):
        raise UserError(f"device {requested!r} is not available on this machine; use 'auto' or 'cpu'")
    return torch.device(requested)
