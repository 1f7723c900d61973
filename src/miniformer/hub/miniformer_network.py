"""The network the modeling file builds. In an export this file is replaced by the network modules themselves
(stages/export.py writes them joined into one file), so that the folder needs only torch and transformers."""

from miniformer.network.attention import prefix_mask  # noqa: F401 - re-exported for modeling_miniformer
from miniformer.network.model import MiniFormer, ModelConfig  # noqa: F401
from miniformer.network.positions import PositionMethod, build_position  # noqa: F401
