"""What travels between a judge and its player: arenas (here the CPU's memfd), input trees written
into them and read back, and the inputs that cannot travel."""

import os

import pytest
import torch

from evaluator import checks, transport


def test_an_arena_is_one_block_both_sides_see():
    judge_side = transport.Arena.create(1000, torch.device("cpu"))
    desc, fds = judge_side.export()
    assert desc["kind"] == "memfd" and len(fds) == 1
    player_side = transport.Arena.attach(desc, [os.dup(fds[0])], torch.device("cpu"))
    judge_side.data[:4] = torch.tensor([1, 2, 3, 4], dtype=torch.uint8)
    assert player_side.data[:4].tolist() == [1, 2, 3, 4]
    assert player_side.nbytes == judge_side.nbytes >= 1000


def test_an_arena_comes_as_exactly_one_descriptor_of_a_known_kind():
    arena = transport.Arena.create(256, torch.device("cpu"))
    desc, fds = arena.export()
    with pytest.raises(ValueError):
        transport.Arena.attach(desc, [], torch.device("cpu"))
    with pytest.raises(ValueError):
        transport.Arena.attach({**desc, "kind": "cuda_ipc"}, [os.dup(fds[0])], torch.device("cpu"))


def test_an_input_tree_reads_back_as_written():
    inputs = [torch.randn(3, 5).t(), (torch.arange(7), {"scale": 0.5, "w": torch.ones(2, dtype=torch.bfloat16)}), None]
    arena = transport.Arena.create(transport.input_bytes(inputs), torch.device("cpu"))
    tree, _end = transport.encode_inputs(inputs, arena, 0, [])
    back = transport.decode_inputs(tree, arena, None, torch.device("cpu"))
    assert torch.equal(back[0], inputs[0]) and back[0].stride() == inputs[0].stride()
    assert torch.equal(back[1][0], inputs[1][0]) and isinstance(back[1], tuple)
    assert back[1][1]["scale"] == 0.5 and torch.equal(back[1][1]["w"], inputs[1][1]["w"])
    assert back[2] is None


def test_a_sparse_coo_input_travels_as_its_indices_and_values():
    dense = torch.zeros(3, 4, 5)
    dense[0, 1, 2], dense[2, 0, 4], dense[1, 3, 0] = 1.5, -2.0, 3.25
    sparse = dense.to_sparse().coalesce()
    pristine: list = []
    arena = transport.Arena.create(transport.input_bytes([sparse]), torch.device("cpu"))
    tree, _end = transport.encode_inputs([sparse], arena, 0, pristine)
    back = transport.decode_inputs(tree, arena, {}, torch.device("cpu"))[0]  # as a player reads it
    assert back.layout == torch.sparse_coo and back.is_coalesced() and back.shape == sparse.shape
    assert torch.equal(back.to_dense(), dense)
    assert len(pristine) == 2  # both parts are checked for changes like any input
    unchanged = transport.decode_inputs(tree, arena, None, torch.device("cpu"))[0]  # as the judge reads it back
    assert checks.changed_inputs((sparse,), (unchanged,), ()) is None
    back._indices()[0, 0] = 1 << 40  # a player scribbling an index out of range: seen, never dereferenced
    after = transport.decode_inputs(tree, arena, None, torch.device("cpu"))[0]
    assert checks.changed_inputs((sparse,), (after,), ()) is not None


def test_other_sparse_layouts_are_refused_with_a_reason_not_a_crash():
    csr = torch.eye(3).to_sparse_csr()
    with pytest.raises(transport.Unsupported, match="sparse_csr tensor input"):
        transport.input_bytes([csr])
    arena = transport.Arena.create(4096, torch.device("cpu"))
    with pytest.raises(transport.Unsupported, match="only dense"):
        transport.encode_inputs([csr], arena, 0, [])
