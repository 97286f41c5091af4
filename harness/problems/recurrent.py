"""Shapes and FLOPs of torch's recurrent layers (nn.LSTM, nn.GRU, nn.RNN) without running them.

On meta tensors a recurrent layer decomposes into a few small ops per time
step and layer: KernelBench's 6-layer LSTM over 512 steps dispatches ~30,000
ops and takes 7-30 s of CPU per derivation (the slowest files of level 3). Its
cost is simple arithmetic instead: per time step, layer and direction, an
input projection ``2 * B * in * G * H`` and a hidden projection
``2 * B * H_out * G * H`` FLOPs (``G`` gates: 4 LSTM, 3 GRU, 1 RNN; ``H_out``
the projection size if any, plus ``2 * B * H * H_out`` for the LSTM
projection), the matmul FLOPs FlopCounterMode counts when it runs the
layer's decomposition (checked equal in ``tests/problems/test_derive.py``).

:func:`fast_recurrent` gives a model's stock recurrent layers (exactly
``nn.LSTM``/``nn.GRU``/``nn.RNN``, whose ``forward`` is torch's own) a
forward that returns meta tensors of the right shapes and adds those FLOPs
to the counter; anything else (a subclass with its own ``forward``, a
``PackedSequence`` input) runs as it is.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def recurrent_flops(layer: Any, seq_len: int, batch: int, input_size: int) -> int:
    """Matmul FLOPs of one forward of ``layer`` (an nn.LSTM/GRU/RNN) over ``seq_len`` steps of ``batch``."""
    gates = GATES[layer.mode]
    hidden = layer.hidden_size
    h_out = layer.proj_size if getattr(layer, "proj_size", 0) else hidden
    dirs = 2 if layer.bidirectional else 1
    flops = 0
    for index in range(layer.num_layers):
        inp = input_size if index == 0 else h_out * dirs
        per_step = 2 * batch * inp * gates * hidden + 2 * batch * h_out * gates * hidden
        if h_out != hidden:
            per_step += 2 * batch * hidden * h_out
        flops += per_step * seq_len * dirs
    return flops


def _shapes(layer: Any, x: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int]:
    """(output shape, h_n shape, c_n shape, steps, batch) for input ``x``."""
    hidden = layer.hidden_size
    h_out = layer.proj_size if getattr(layer, "proj_size", 0) else hidden
    dirs = 2 if layer.bidirectional else 1
    if x.dim() == 2:  # unbatched (T, in)
        steps, batch = x.shape[0], 1
        return (steps, dirs * h_out), (dirs * layer.num_layers, h_out), (dirs * layer.num_layers, hidden), steps, batch
    steps, batch = (x.shape[1], x.shape[0]) if layer.batch_first else (x.shape[0], x.shape[1])
    out = (batch, steps, dirs * h_out) if layer.batch_first else (steps, batch, dirs * h_out)
    return out, (dirs * layer.num_layers, batch, h_out), (dirs * layer.num_layers, batch, hidden), steps, batch


def _forward(counter: Any):
    import torch

    def forward(self, x, hx=None):
        if not isinstance(x, torch.Tensor):  # PackedSequence: torch's own path
            return type(self).forward(self, x, hx)
        out_shape, h_shape, c_shape, steps, batch = _shapes(self, x)
        counter.add_recurrent(recurrent_flops(self, steps, batch, x.shape[-1]))
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        h_n = torch.empty(h_shape, dtype=x.dtype, device=x.device)
        if self.mode == "LSTM":
            return out, (h_n, torch.empty(c_shape, dtype=x.dtype, device=x.device))
        return out, h_n

    return forward


@contextlib.contextmanager
def fast_recurrent(model: Any, counter: Any) -> Iterator[int]:
    """Within the block, ``model``'s stock recurrent layers use the arithmetic forward; yields how many."""
    import torch.nn as nn

    stock = {nn.LSTM: nn.LSTM.forward, nn.GRU: nn.GRU.forward, nn.RNN: nn.RNN.forward}
    patched = [m for m in model.modules() if type(m) in stock and type(m).forward is stock[type(m)]]
    for m in patched:
        m.forward = types.MethodType(_forward(counter), m)
    try:
        yield len(patched)
    finally:
        for m in patched:
            del m.forward
