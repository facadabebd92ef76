# SPDX-License-Identifier: MIT
"""Random file operations checked against a model (tests/fsx/rdfs_fsx.py, an
fsx-like tester) on the mount: reads, writes, shared mappings, truncates,
fallocate modes, copy_file_range, fsync and close/reopen.

Runs (ops each, by default):
  - seeds 1, 2, 3, 7: 8000 ops each on a file of up to 256 KiB, with mmap
    (`make soak` runs them at 20000 and more: 20000 once found, in about one
    run in ten, a range copied from a hole that kept the file's old bytes,
    because copy_file_range judged the source twice from two layouts; see
    ClientIo.CopyOfARangeAnotherClientPunchedGivesZeros);
  - seed 11 with --second: 6000 ops, the same file read whole through a
    second mount (other_mount) after every reopen (close-to-open);
  - seed 12 with --no-mmap and --max-size 4m: 6000 ops over a file of four
    1 MiB chunks, so on both I/O servers.
Measured on 2 cores with another long test run beside (load average 6, so
the rates swing with it): 150-300 ops/s on the 256 KiB file (500-560 ops/s in
shorter runs under less load), 250 ops/s with --second, 380 ops/s at 4 MiB;
the module took 328 s when it ran three seeds at 20000 ops.

Space, in every run: the tester bounds the file's st_blocks and, with --df,
the growth of the cluster's used space (statvfs) since the open, every 100
operations, after every reopen and at the end, by (the largest extent the
file had, rounded up to its chunk size, + 64 MiB of allocate-ahead) x its
copies; the chunk size and the copies come from `rdfs layout` of the file.
After the tester's last close, `rdfs fsck` must find the blocks in use (the
allocator's, which statvfs reports) equal to the blocks the files own (the
sum of their st_blocks), and statvfs must agree: no block is held outside a
file once it is closed.

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
over ten times the slowest rate measured), not a performance check.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, wait_until

FSX = REPO / "tests" / "fsx" / "rdfs_fsx.py"


def ops(default):
    n = os.environ.get("RDFS_FSX_OPS")
    return int(n) if n else default


# RDFS_PREALLOC_MAX in lib/client/client_internal.h: the most a client allocates
# past a write at the end of a file (the kernel client allocates none).
ALLOC_AHEAD = 64 << 20


def space_args(cluster, path):
    """The tester's space options for @path (created here if need be): its chunk
    size and copies as `rdfs layout` shows them, and --df (nothing else writes
    to the cluster while a test of this module runs)."""
    if not path.exists():
        path.write_bytes(b"")
    out = cluster.rdfs("layout", "/" + str(path.relative_to(cluster.mnt))).stdout
    chunk = re.search(r"^chunk size:\s+(\d+)$", out, re.M)
    copies = re.search(r"^copies:\s+(\d+)$", out, re.M)
    assert chunk, out
    return ["--chunk-size", chunk.group(1), "--alloc-ahead", ALLOC_AHEAD,
            "--copies", copies.group(1) if copies else 1, "--df"]


def used_space_is_the_files(cluster):
    """After the last close: the blocks in use (statvfs, and the allocator as fsck
    sees it) are exactly the blocks the files own (the sum of their st_blocks).
    Polled: a last close that trims allocate-ahead may still be on its way."""
    last = {}

    def settled():
        st = os.statvfs(cluster.mnt)
        p = cluster.rdfs("fsck", "--json", check=False, timeout=300)
        st2 = os.statvfs(cluster.mnt)
        assert p.returncode in (0, 4), p.stdout + p.stderr
        rep = json.loads(p.stdout)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        used2 = (st2.f_blocks - st2.f_bfree) * st2.f_frsize
        last.update(statvfs_used=used, statvfs_used_after=used2, fsck=rep)
        return (p.returncode == 0 and rep["problems"] == 0
                and rep["blocks_in_use"] == rep["blocks_owned"]
                and used == used2 == rep["blocks_in_use"] * 4096)

    try:
        wait_until(settled, "used space to equal the files' blocks", attempts=60)
    except AssertionError:
        raise AssertionError("after the last close the used space is not the files' blocks: "
                             "%s" % json.dumps(last))


def fsx(cluster, path, seed, nops, *args):
    """Run the tester on @path with the space checks; fail with its report unless it
    exits 0, or if the used space is not the files' blocks afterwards."""
    log = cluster.logs / ("fsx-seed%d.log" % seed)
    cmd = [sys.executable, str(FSX), "--seed", str(seed), "--ops", str(nops),
           "--log", str(log)] + [str(a) for a in list(args) + space_args(cluster, path)] \
        + [str(path)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120 + nops / 10)
    assert p.returncode == 0, ("rdfs_fsx failed (exit %d): %s\n%s"
                               % (p.returncode, " ".join(cmd), p.stdout))
    summary = p.stdout.strip().splitlines()[-1]
    assert summary.startswith("rdfs_fsx: OK"), p.stdout
    assert "used space grew" in summary, summary
    print(summary)
    used_space_is_the_files(cluster)
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


@pytest.mark.parametrize("seed", [21, 22])
def test_fsx_with_o_direct_beside_the_page_cache(cluster, workdir, seed):
    """O_DIRECT reads and writes of any offset and length mixed with cached ones,
    mappings, truncates and fallocate on the same file."""
    summary = fsx(cluster, workdir / "fsx", seed, ops(6000), "--direct")
    assert "dread=" in summary and "dwrite=" in summary, summary
    assert summary.endswith("disabled: none"), summary


def test_fsx_several_chunks_without_mmap(cluster, workdir):
    summary = fsx(cluster, workdir / "fsx", 12, ops(6000), "--no-mmap", "--max-size", "4m")
    assert "mapread" not in summary.split("disabled:")[0], summary

