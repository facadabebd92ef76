# SPDX-License-Identifier: MIT
"""Freed blocks are not reachable by a client that still holds their capabilities.

A client that has a file open caches its layout, with capabilities valid for
minutes. When another client truncates that file, the metaserver fences the
file on its I/O servers (they refuse capabilities of its older layout
generation) before the freed blocks go back to the allocator, so the first
client can neither read nor overwrite whatever file gets them next; its own
I/O is refused as stale, it fetches the layout again and goes on.

The cluster here is tiny (one I/O server, 8 MiB of blocks) and filled so that
the allocator's next search starts over at block 0: without the fence the new
file's first blocks would be exactly the truncated file's.
"""
import os

import pytest

from conftest import (BIN, LC_CLIENT_OPTS, LC_TRANSPORT_OPTS, LOCAL_CLUSTER, MiB, Cluster,
                      _cluster_root, _remove, _stop, run, wait_until)

BLOCK = 4096
DATA_BYTES = 8 * MiB


class SmallCluster(Cluster):
    """One I/O server whose volume holds DATA_BYTES of blocks."""

    def up(self):
        from conftest import _live
        if self not in _live:
            _live.append(self)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        run([LOCAL_CLUSTER, "up", "--dir", self.dir, "--ioservers", self.n_io,
             "--mount", self.mnt, "--port-base", self.port,
             "--volume-size", "%dM" % (1 + DATA_BYTES // MiB), "--bin", BIN]
            + LC_TRANSPORT_OPTS + LC_CLIENT_OPTS, timeout=180)
        assert os.path.ismount(self.mnt)


@pytest.fixture
def small_cluster():
    c = SmallCluster(_cluster_root("reuse"), 1)
    try:
        c.up()
    except BaseException:
        c.down()
        _remove(c)
        raise
    yield c
    _stop(c)


def pattern(tag, nbytes):
    """Every 4 KiB block names @tag and its index, so a stray block says whose it is."""
    out = bytearray()
    for i in range(nbytes // BLOCK):
        head = b"%s block %06d " % (tag, i)
        out += (head * (BLOCK // len(head) + 1))[:BLOCK]
    return bytes(out)


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def free_bytes(mnt):
    st = os.statvfs(mnt)
    return st.f_bfree * st.f_frsize


def test_truncated_blocks_of_an_open_file_are_not_reused(small_cluster):
    c = small_cluster
    b = c.mnt                                   # mount B: the cluster's own
    # Mount A: no page cache, and attributes kept, so it reads with the layout
    # it cached while writing, as a client that missed the truncate does.
    a = c.mount_second(c.dir / "mnt-a", "attr_timeout=3600,entry_timeout=3600,direct_io")

    f_data, g_data = pattern(b"FFFF", MiB), pattern(b"GGGG", 4 * MiB)
    a_data = pattern(b"AAAA", MiB)

    # Blocks 0..255: a spare file; 256..511: F, open on A; 512..1535: T;
    # 1536..1791: H, the last ones, so the next search wraps to block 0.
    write_file(b / "spare", pattern(b"SSSS", MiB))
    fd = os.open(a / "F", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.write(fd, f_data) == len(f_data)
        os.fsync(fd)
        write_file(b / "T", pattern(b"TTTT", 4 * MiB))
        write_file(b / "H", pattern(b"HHHH", MiB))
        os.unlink(b / "spare")
        os.unlink(b / "T")
        # a close's RELEASE travels asynchronously: wait until the space is back
        wait_until(lambda: free_bytes(b) >= 6 * MiB, "the removed files' blocks to be free")

        # B empties F, which A still has open, and writes G where space is free.
        os.truncate(b / "F", 0)
        write_file(b / "G", g_data)

        # A reads its open F: its old bytes or zeros, never G's.
        got = os.pread(fd, MiB, 0)
        zeros = bytes(BLOCK)
        for i in range(len(got) // BLOCK):
            blk = got[i * BLOCK:(i + 1) * BLOCK]
            assert blk in (f_data[i * BLOCK:(i + 1) * BLOCK], zeros), \
                "block %d of the open file reads %r..., not its old data or zeros" % (i, blk[:32])

        # A writes through its stale layout, then closes: G must not change.
        assert os.pwrite(fd, a_data, 0) == len(a_data)
    finally:
        os.close(fd)

    # through A (no page cache): a fresh open, a fresh layout, the servers' bytes
    got = read_file(a / "G")
    assert len(got) == len(g_data)
    for i in range(len(got) // BLOCK):
        blk = got[i * BLOCK:(i + 1) * BLOCK]
        assert blk == g_data[i * BLOCK:(i + 1) * BLOCK], \
            "block %d of G was overwritten: it reads %r..." % (i, blk[:32])

    # A's write went to F itself, through a fresh layout: F is A's bytes now
    got = read_file(b / "F")
    assert got == a_data, "F after the truncate and A's write: %r..." % (got[:32],)
    # F's old blocks were free at the truncate: H, G and F hold 6 MiB of 8
    wait_until(lambda: free_bytes(b) >= 2 * MiB, "F's old blocks to be free")
