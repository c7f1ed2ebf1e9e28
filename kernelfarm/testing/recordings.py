"""The recorded landscapes the harness replays, found inside the installed package."""

from __future__ import annotations

from kernelfarm.kernels.recorded import RECORDED_DIR

CONVOLUTION = RECORDED_DIR / "convolution_RTX_3090.json.gz"
PNPOLY = RECORDED_DIR / "pnpoly_RTX_3090.json.gz"
# The GPU model both recordings were made on: replay workers of them serve this model's queue.
RTX3090 = "nvidia-geforce-rtx-3090"
