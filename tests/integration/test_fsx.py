# SPDX-License-Identifier: MIT
"""Random file operations checked against a model (tests/fsx/rdfs_fsx.py, an
fsx-like tester) on the mount: reads, writes, shared mappings, truncates,
fallocate modes, copy_file_range, fsync and close/reopen.

Runs (ops each, by default):
  - seeds 1, 2, 3, 7: 8000 ops each on a file of up to 256 KiB, with mmap;
  - seed 11 with --second: 6000 ops, the same file read whole through a
    second mount (other_mount) after every reopen (close-to-open);
  - seed 12 with --no-mmap and --max-size 4m: 6000 ops over a file of four
    1 MiB chunks, so on both I/O servers.
Measured on 2 cores with a qemu guest suite running beside (so the rates
swing with its load): 300-1000 ops/s on the 256 KiB file, 360-730 ops/s with
--second, 400-490 ops/s at 4 MiB; the module took 58 s (25% more operations:
135 s while the guest suite was at its busiest).

Every operation kind must stay on ("disabled: none"): both clients have
every fallocate mode, and copy_file_range is done by the I/O servers (COPY),
not by the kernel through the page cache. The kernel client runs this file in
the guest (tests/vm/suite.d/lkm-fsx).

RDFS_FSX_OPS=N makes every run do N operations. Soak:
    RDFS_FSX_OPS=200000 python3 -m pytest tests/integration/test_fsx.py
A failing run prints the tester's report (the last 50 operations, the first
differing offset, the bytes around it, the seed and the op count) and leaves
its whole operation log in the cluster's test-logs/ (kept with
RDFS_TEST_KEEP=1); `python3 tests/fsx/rdfs_fsx.py --seed N --ops M FILE` repeats
it on any mount.

The subprocess timeout is a hang guard only (a tenth of a second per operation,
dozens of times the measured time), not a performance check.
"""
import os
import subprocess
import sys

import pytest

from conftest import REPO

FSX = REPO / "tests" / "fsx" / "rdfs_fsx.py"


def ops(default):
    n = os.environ.get("RDFS_FSX_OPS")
    return int(n) if n else default


def fsx(cluster, path, seed, nops, *args):
    """Run the tester on @path; fail with its report unless it exits 0."""
    log = cluster.logs / ("fsx-seed%d.log" % seed)
    cmd = [sys.executable, str(FSX), "--seed", str(seed), "--ops", str(nops),
           "--log", str(log)] + [str(a) for a in args] + [str(path)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120 + nops / 10)
    assert p.returncode == 0, ("rdfs_fsx failed (exit %d): %s\n%s"
                               % (p.returncode, " ".join(cmd), p.stdout))
    summary = p.stdout.strip().splitlines()[-1]
    assert summary.startswith("rdfs_fsx: OK"), p.stdout
    print(summary)
    return summary


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
def test_fsx_random_ops_match_the_model(cluster, workdir, seed):
    summary = fsx(cluster, workdir / "fsx", seed, ops(8000))
    assert "mapwrite=" in summary and "copy_range=" in summary, summary
    assert summary.endswith("disabled: none"), summary


def test_fsx_close_to_open_through_a_second_mount(cluster, workdir, other_mount):
    summary = fsx(cluster, workdir / "fsx", 11, ops(6000),
                  "--second", other_mount / workdir.name / "fsx")
    assert "reopen=" in summary, summary


def test_fsx_several_chunks_without_mmap(cluster, workdir):
    summary = fsx(cluster, workdir / "fsx", 12, ops(6000), "--no-mmap", "--max-size", "4m")
    assert "mapread" not in summary.split("disabled:")[0], summary
