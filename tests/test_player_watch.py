"""bench/player_watch.py: players found by their command line, their side by their build
directory, and their CPU time counted while watched."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.player_watch import PlayerWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# Spins for that much CPU time, however busy the host.
SPIN = "import time, sys\nwhile time.process_time() < float(sys.argv[2]): pass"


def fake_player(side_dir: str, rank: str, seconds: float) -> subprocess.Popen:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": f"/builds/{side_dir}/torch_extensions", "RANK": rank}
    return subprocess.Popen([sys.executable, "-c", SPIN, "evaluator.player", str(seconds)], env=env)


def test_each_player_is_reported_with_its_side_rank_and_cpu_time():
    with PlayerWatch() as watch:
        procs = [fake_player("reference", "0", 1.0), fake_player("0123abcd", "1", 1.0)]
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5)"], check=True)  # not a player
        for p in procs:
            p.wait()
        time.sleep(0.1)
    rows = {r["pid"]: r for r in watch.summary()}  # with any real players on the host
    assert {p.pid for p in procs} <= set(rows)
    ref, sol = rows[procs[0].pid], rows[procs[1].pid]
    assert (ref["side"], ref["rank"], sol["side"], sol["rank"]) == ("reference", "0", "solution", "1")
    for r in (ref, sol):
        assert 0.2 < r["run_s"] <= 1.2, r  # a CPU second's spin, less its start before the first sample
        assert r["wait_s"] >= 0 and r["involuntary"] >= 0 and r["minor_faults"] >= 0 and r["cpus"], r


def test_the_busiest_threads_on_the_host_include_a_spinning_one():
    with PlayerWatch() as watch:
        spinner = subprocess.Popen([sys.executable, "-c", SPIN, "not-a-player", "1.5"])
        spinner.wait()
    mine = [t for t in watch.busiest_threads(50) if t["pid"] == spinner.pid]
    assert mine and mine[0]["cpu_s"] > 0.3, watch.busiest_threads(50)
