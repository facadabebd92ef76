# SPDX-License-Identifier: MIT
"""The I/O server's read pipeline, read-ahead cache and write-back through real
FUSE mounts: bytes are exact under overlapped sends whatever the unit size and
depth, whole and overlap modes agree, a read after an overwrite from another
mount never sees cached old bytes, a slow reader's pipelined READs are exact,
and committed (fsync'ed) data survives a kill -9 of every I/O server."""
import os
import random
import socket
import time

import pytest

import rdfswire as w
from conftest import (BIN, LOCAL_CLUSTER, MiB, Cluster, _cluster_root, _remove, _stop,
                      assert_bytes_equal, drop_cache, run)
from test_trust import (cap_for_extent, client_secret, connect, ino_of, io_read_req,
                        ioserver_ports, layout)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _pread(path, off, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        out = b""
        while len(out) < n:
            b = os.pread(fd, n - len(out), off + len(out))
            if not b:
                break
            out += b
        return out
    finally:
        os.close(fd)


class OptCluster(Cluster):
    """A cluster whose I/O servers run with extra options (local-cluster --ioserver-opt)."""

    def __init__(self, root, n_io, opts):
        super().__init__(root, n_io)
        self.opts = opts

    def up(self):
        import conftest
        if self not in conftest._live:
            conftest._live.append(self)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        run([LOCAL_CLUSTER, "up", "--dir", self.dir, "--ioservers", self.n_io,
             "--mount", self.mnt, "--port-base", self.port, "--bin", BIN]
            + getattr(conftest, "LC_TRANSPORT_OPTS", [])
            + ["--ioserver-opt=" + o for o in self.opts], timeout=180)
        assert os.path.ismount(self.mnt), "local-cluster up returned but %s is not a mount" % self.mnt


def _opt_cluster(opts):
    c = OptCluster(_cluster_root("pipeline"), 2, opts)
    try:
        c.up()
    except BaseException:
        c.down()
        _remove(c)
        raise
    return c


def _check_reads(path, data, seed):
    """Whole-file read and preads at unaligned offsets and lengths match @data."""
    drop_cache(path)
    assert_bytes_equal(data, _read(path), "whole file")
    rnd = random.Random(seed)
    for _ in range(40):
        off = rnd.randrange(0, len(data))
        n = rnd.choice([1, 4095, 4096, 4097, 65536 + 3, 128 * 1024, MiB + 17, 3 * MiB])
        drop_cache(path)
        got = _pread(path, off, n)
        assert_bytes_equal(data[off:off + n], got, "pread(%d, %d)" % (off, n))


@pytest.mark.parametrize("opts", [
    ["--send-mode=whole", "--readahead-cache=0"],
    ["--unit-size=4k", "--pipeline-depth=1", "--readahead-cache=0"],
    ["--unit-size=64k", "--pipeline-depth=8"],
    ["--unit-size=1m", "--pipeline-depth=2", "--readahead-cache=1"],
], ids=["whole", "4k-depth1", "64k-depth8", "1m-depth2-tinycache"])
def test_bytes_exact_under_every_send_mode(opts):
    c = _opt_cluster(opts)
    try:
        data = os.urandom(9 * MiB + 12345)
        f = c.mnt / "big"
        _write(f, data)
        _check_reads(f, data, 1)
        # small files: one partial block, a few blocks
        for n in (1, 100, 4096, 4097, 10000):
            small = os.urandom(n)
            p = c.mnt / ("small-%d" % n)
            _write(p, small)
            drop_cache(p)
            assert _read(p) == small
    finally:
        _stop(c)


def test_overlap_default_reads_exact(workdir):
    """The shared cluster runs the defaults: overlap, 256 KiB units, depth 4, read-ahead on."""
    data = os.urandom(7 * MiB + 999)
    f = workdir / "f"
    _write(f, data)
    _check_reads(f, data, 2)


def test_readahead_never_serves_old_bytes_after_overwrite_from_other_mount(workdir, other_mount):
    data = bytearray(os.urandom(24 * MiB))
    mine = workdir / "stream"
    theirs = other_mount / workdir.name / "stream"
    _write(mine, bytes(data))
    # Read it sequentially from the other mount: the servers read ahead of the stream.
    drop_cache(theirs)
    assert_bytes_equal(bytes(data), _read(theirs), "first sequential read")
    # Again, so the cache holds what the second pass will ask for.
    drop_cache(theirs)
    assert_bytes_equal(bytes(data), _read(theirs), "second sequential read")
    # Overwrite pieces through this mount: unaligned, inside blocks, across chunks.
    rnd = random.Random(3)
    for _ in range(12):
        off = rnd.randrange(0, len(data) - 300000)
        piece = os.urandom(rnd.choice([1, 100, 4096, 5000, 70000, 300000]))
        with open(mine, "r+b") as fh:
            fh.seek(off)
            fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        data[off:off + len(piece)] = piece
    # The other mount reads it again: every byte is the new one.
    drop_cache(theirs)
    assert_bytes_equal(bytes(data), _read(theirs), "read after overwrite")
    # And sequential preads that continue a stream through the overwritten ranges.
    for off in range(0, len(data), 3 * MiB):
        drop_cache(theirs)
        got = _pread(theirs, off, 3 * MiB)
        assert_bytes_equal(bytes(data[off:off + 3 * MiB]), got, "pread at %d" % off)


def test_pipelined_reads_of_a_slow_reader_are_exact(cluster, workdir):
    """A client pipelines 24 READs of up to 4 MiB on one connection with a small
    receive buffer, and reads the replies only after a pause: the I/O server's
    READs run out of the connection's share of the buffer pool, wait for any
    buffer or for their own sends to give theirs back, and every reply is
    still byte-exact."""
    data = os.urandom(16 * MiB)
    p = workdir / "slow-reader"
    _write(p, data)
    secret = client_secret(cluster)
    meta = connect(cluster.port, secret)
    try:
        status, lay = layout(meta, ino_of(meta, cluster, p), len(data), w.cred(0, 0))
    finally:
        meta.close()
    assert status == 0, "LAYOUT: %d" % status
    ext = max((e for e in lay["extents"] if not e["unwritten"]), key=lambda e: e["length"])
    nblocks = min(ext["length"], 4 * MiB) // 4096
    spare = ext["length"] // 4096 - nblocks
    cap = cap_for_extent(lay, ext)
    conn = connect(ioserver_ports(cluster)[ext["server"]], secret)
    try:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        want, frames = {}, []
        for tag in range(1, 25):
            blk = (tag * 97) % (spare + 1)
            off = ext["offset"] + blk * 4096
            want[tag] = data[off:off + nblocks * 4096]
            frames.append(w.frame(w.OP_READ, io_read_req(cap, ext["block"] + blk, nblocks),
                                  tag=tag))
        conn.send(b"".join(frames))
        time.sleep(2)           # the server fills the socket and spends the share
        got = {tag: bytearray() for tag in want}
        left = set(want)
        conn.sock.settimeout(60)
        while left:
            hdr, _, part = conn.recv_frame()
            assert hdr["status"] == 0, "READ %d: status %d" % (hdr["tag"], hdr["status"])
            got[hdr["tag"]] += part
            if not hdr["flags"] & w.FLAG_MORE:
                left.discard(hdr["tag"])
    finally:
        conn.close()
    for tag in want:
        assert_bytes_equal(want[tag], bytes(got[tag]), "READ %d of a slow reader" % tag)


def test_committed_writes_survive_kill9_of_every_ioserver(fresh_cluster):
    c = fresh_cluster
    data = os.urandom(6 * MiB + 4321)
    f = c.mnt / "durable"
    _write(f, data)         # fsync: every touched I/O server committed
    saved = [c.kill9(c.ioserver_port(i)) for i in range(c.n_io)]
    for s in saved:
        c.restart(s)
    c.wait_servers_up()
    drop_cache(f)
    assert_bytes_equal(data, _read(f), "after kill -9 and restart of the I/O servers")
