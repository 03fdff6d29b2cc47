"""Reach the network: connect to a TCP server the test runs on 127.0.0.1:PORT (and on localhost),
send a line, and compute honestly either way.

Problem: allreduce. The server must see no connection: a player has no network.
"""

import socket

import torch
import torch.distributed as dist

PORT = None

_done = []


def _reach() -> None:
    for host in ("127.0.0.1", "localhost"):
        try:
            with socket.create_connection((host, PORT), timeout=1.0) as sock:
                sock.sendall(b"PKB-ATTACK hello\n")
                print(f"reach_network: connected to {host}:{PORT}", flush=True)
        except OSError as exc:
            print(f"reach_network: {host}:{PORT}: {exc}", flush=True)


@torch.no_grad()
def solution(tensor):
    if not _done:
        _done.append(True)
        if PORT:
            _reach()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
