"""Random training windows: one sampler, so our trainer and the peer's see the same batches from the same seed."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def sample_windows(data: np.ndarray, length: int, batch: int, g: torch.Generator) -> Tensor:
    """``batch`` windows of ``length`` tokens at uniformly random starts drawn from ``g``."""
    starts = torch.randint(0, len(data) - length, (batch,), generator=g).tolist()
    return torch.from_numpy(np.stack([data[s : s + length].astype(np.int64) for s in starts]))
