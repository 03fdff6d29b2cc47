"""How much of the disk a solution's build directory takes (evaluator/disk_use.py); the launcher's
use of it: tests/adversarial/test_machine_attacks.py (fill_build_dir)."""

from __future__ import annotations

import os

from evaluator import disk_use

MIB = 1 << 20


def test_the_tree_counts_what_its_files_hold_on_disk_in_every_directory(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "data").write_bytes(b"x" * 3 * MIB)
    (tmp_path / "top").write_bytes(b"y" * MIB)
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(8 << 30)  # 8 GiB long, nothing written: no disk taken
    used = disk_use.tree_bytes(tmp_path)
    assert 4 * MIB <= used < 5 * MIB


def test_links_are_not_followed_out_of_the_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"z" * 2 * MIB)
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(outside, tree / "link")
    assert disk_use.tree_bytes(tree) < MIB


def test_a_tree_of_too_many_entries_is_over_its_limit_whatever_their_size(tmp_path):
    for i in range(30):
        (tmp_path / str(i)).touch()
    assert disk_use.tree_bytes(tmp_path, max_entries=30) is not None
    assert disk_use.tree_bytes(tmp_path, max_entries=29) is None


def test_the_reason_names_the_size_and_the_limit(tmp_path, monkeypatch):
    (tmp_path / "f").write_bytes(b"x" * 3 * MIB)
    assert disk_use.over_limit(tmp_path, 4 * MIB) is None
    reason = disk_use.over_limit(tmp_path, 2 * MIB)
    assert reason is not None and "grew to 3 MiB" in reason and "limit of 2 MiB" in reason
    assert disk_use.over_limit(tmp_path / "missing", MIB) is None  # nothing there: nothing used
    monkeypatch.setenv(disk_use.LIMIT_ENV, "12")
    assert disk_use.limit_bytes() == 12 * MIB
    monkeypatch.delenv(disk_use.LIMIT_ENV)
    assert disk_use.limit_bytes() == disk_use.DEFAULT_LIMIT_BYTES
