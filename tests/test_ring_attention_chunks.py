"""The ring-attention references make scores for a bounded number of (query, key) pairs at a time
(tasks/ring_attention/reference.py SCORE_CHUNK): at world 1 the large shapes' blocks would need
32-128 GiB at once. Chunked and whole computations must agree, with the causal mask's rows
offset right in every chunk."""

from __future__ import annotations

import pytest
import torch

from tasks.ring_attention import reference as forward
from tasks.ring_attention_backward_dp import reference as backward


def _qkv(seed: int, sq: int = 37, sk: int = 37):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, sq, 3, 8, generator=g) * 2
    k, v = (torch.randn(2, sk, 3, 8, generator=g) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("diagonal", [False, True])
def test_attention_in_chunks_of_rows_equals_attention_at_once(monkeypatch, diagonal):
    q, k, v = _qkv(0)
    whole_out, whole_lse = forward._block_attention(q, k, v, 0.3, diagonal)
    monkeypatch.setattr(forward, "SCORE_CHUNK", 2 * 3 * 37 * 5)  # five query rows per chunk
    out, lse = forward._block_attention(q, k, v, 0.3, diagonal)
    torch.testing.assert_close(out, whole_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse, whole_lse, rtol=1e-5, atol=1e-6)
    if diagonal:  # the first query sees only the first key: its output is that key's value
        torch.testing.assert_close(out[:, :, 0], v[:, 0].float())


@pytest.mark.parametrize("diagonal", [False, True])
def test_gradients_in_chunks_of_rows_equal_gradients_at_once(monkeypatch, diagonal):
    q, k, v = (t.transpose(1, 2) for t in _qkv(1))
    dout = torch.randn_like(q)
    out, lse = forward._block_attention(*(t.transpose(1, 2) for t in (q, k, v)), 0.3, diagonal)
    row_dot = (dout * out).sum(dim=-1, keepdim=True)
    whole = backward._block_gradients(dout, q, k, v, lse, row_dot, 0.3, diagonal)
    monkeypatch.setattr(forward, "SCORE_CHUNK", 2 * 3 * 37 * 4)  # the one rule both passes chunk by
    chunked = backward._block_gradients(dout, q, k, v, lse, row_dot, 0.3, diagonal)
    for got, want in zip(chunked, whole):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # Against autograd through plain attention.
    qa, ka, va = (t.clone().requires_grad_() for t in (q, k, v))
    scores = qa @ ka.transpose(-2, -1) * 0.3
    if diagonal:
        scores = scores.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))
    (torch.softmax(scores, dim=-1) @ va).backward(dout)
    for got, want in zip(chunked, (qa.grad, ka.grad, va.grad)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
