# SPDX-License-Identifier: MIT
"""Partitions, not only kills: a cluster whose hosts are network namespaces
(netns.py), copies=2 on three I/O servers, two rdfs-fuse clients, the
metaserver's ioserver_timeout at 2 s and its rebuild grace at 5 s.

What these tests prove, every file checked byte for byte:
  (a) an I/O server cut off in the middle of a large sequential read: the
      read completes (the client times out, marks the server suspect and
      reads the other copy);
  (b) an I/O server cut off in the middle of a rewrite + fsync: both succeed,
      the file reads back right, the cut-off server's copy of what was
      rewritten is no longer current at the metaserver, and after the heal a
      second client that held the old layout (capabilities naming the old
      copy) never reads the old bytes;
  (c) the metaserver marks a cut-off server down by its silence (`rdfs
      status`, bounded well below the 30 s+ of TCP keepalive) and, after the
      rebuild grace, every block has 2 current copies on the other servers
      (`rdfs layout`); the healed server registers again;
  (d) loss and delay on a client's and a server's link break nothing;
  (e) a SIGSTOPped I/O server (its socket stays open, the kernel answers TCP
      keepalive) is marked down, its copies go stale under a rewrite, and on
      SIGCONT it serves none of them before it has registered again;
  (f) an I/O server cut off from the metaserver and the writer but not from a
      reader that holds its old capabilities: once the metaserver has dropped
      it and its copies went stale, it serves the reader nothing (the read
      fails over or fails, it never returns the old bytes);
  (g) every host, each client's rdfs-fuse included, serves its metrics at the
      URL `status --json` names, and `rdfs metrics` reaches it from another host.
`rdfs fsck` is clean at the end.
"""
import os
import re

import pytest

import netns
from conftest import MiB, assert_bytes_equal, drop_cache
from test_block_reuse import write_file
from test_layout import parse_layout

BLK = 4096
TIMEOUT_MS = 2000       # the metaserver's ioserver_timeout here
# Bounds on waits (hangs), not speed checks: well above the 2 s heartbeat, well
# below what TCP keepalive alone takes (15 s idle + 3 x 5 s).
DOWN_BOUND_S = 12

pytestmark = netns.module_marks()


@pytest.fixture(scope="module")
def nc():
    yield from netns.module_cluster(
        "netns", setup=lambda c: c.rdfs("setcopies", "2", "/"), n_io=3, n_clients=2,
        metaserver_conf={"ioserver_timeout": TIMEOUT_MS, "rebuild_grace": 5,
                         "rebuild_interval": 1},
        fuse_opts=["timeout=5000", "attr_timeout=0", "entry_timeout=0"])


@pytest.fixture
def healed(nc):
    """Every fault is healed and every server is up again when the test ends."""
    yield nc
    for h in nc.hosts.values():
        if "stopped" in h.faults:
            nc.cont(h.name)
        if h.faults:
            nc.heal(h.name)
    nc.wait_all_up()


def mnt(nc, client):
    return nc.hosts[client].mount


def server_ids(nc):
    out = nc.rdfs("status").stdout
    return {m.group(2): int(m.group(1)) for m in
            re.finditer(r"^\s*(\d+)\s+(\S+)\s+\S+://\S+\s+(?:up|down)\b", out, re.M)}


def current_copies(nc, path):
    """{file block: servers holding a current copy (not stale, not being built)}
    from `rdfs layout`."""
    per = {}
    for r in parse_layout(nc.rdfs("layout", path).stdout):
        if r["state"] not in ("written", "unwritten"):
            continue
        for b in range(r["offset"] // BLK, (r["offset"] + r["length"]) // BLK):
            per.setdefault(b, set()).add(r["server"])
    return per


def read_fresh(path):
    drop_cache(path)
    with open(path, "rb") as f:
        return f.read()


def read_until_up(nc, reader, want, server, what):
    """Read through the open @reader (its cached layout: no open, which would fetch
    it again) at once and on, until @server is up again: @want every time."""
    for n in range(40):
        os.posix_fadvise(reader, 0, 0, os.POSIX_FADV_DONTNEED)
        assert_bytes_equal(want, os.pread(reader, len(want), 0), "%s (read %d)" % (what, n))
        if n >= 4 and nc.server_states().get(server) == "up":
            return
    nc.wait(lambda: nc.server_states().get(server) == "up", server + " to register again", 60)


def test_a_partition_mid_sequential_read(healed):
    nc = healed
    data = os.urandom(64 * MiB)
    write_file(mnt(nc, "client0") / "a", data)
    got = []
    with open(mnt(nc, "client1") / "a", "rb") as f:
        got.append(f.read(16 * MiB))
        nc.partition("io0")
        while True:
            b = f.read(MiB)
            if not b:
                break
            got.append(b)
    assert_bytes_equal(data, b"".join(got), "read across a partition of io0")


def test_b_partition_mid_write_then_no_stale_read_after_heal(healed):
    nc = healed
    path = "/b"
    old = os.urandom(32 * MiB)
    write_file(mnt(nc, "client0") / "b", old)
    ids = server_ids(nc)
    # client1 holds the file open with its layout: capabilities for every copy
    reader = os.open(mnt(nc, "client1") / "b", os.O_RDONLY)
    try:
        assert_bytes_equal(old, os.pread(reader, len(old), 0), "before the partition")
        new = os.urandom(len(old))
        with open(mnt(nc, "client0") / "b", "r+b") as f:
            f.write(new[:8 * MiB])
            nc.partition("io1")
            f.write(new[8 * MiB:])
            f.flush()
            os.fsync(f.fileno())
        assert_bytes_equal(new, read_fresh(mnt(nc, "client0") / "b"), "rewritten, io1 cut off")
        # what io1 missed is not a current copy there (stale, or already freed)
        per = current_copies(nc, path)
        for b in range(len(new) // BLK):
            assert per.get(b), "block %d has no current copy" % b
        missed = [b for b in range(8 * MiB // BLK, len(new) // BLK) if ids["io1"] in per[b]]
        assert not missed, "io1 still holds current copies of rewritten blocks %s.." % missed[:4]
        # heal, and read at once, before and after io1 registers again: never the old bytes
        nc.heal("io1")
        read_until_up(nc, reader, new, "io1", "client1 after the heal")
    finally:
        os.close(reader)
    nc.wait_all_up()
    assert_bytes_equal(new, read_fresh(mnt(nc, "client1") / "b"), "client1, io1 back")
    assert_bytes_equal(new, read_fresh(mnt(nc, "client0") / "b"), "client0, io1 back")


def test_c_partitioned_server_marked_down_and_rebuilt(healed):
    nc = healed
    data = os.urandom(16 * MiB + 77)
    write_file(mnt(nc, "client0") / "c", data)
    ids = server_ids(nc)
    nc.partition("io2")
    nc.wait(lambda: nc.server_states().get("io2") == "down",
            "the metaserver to mark io2 down by its silence", DOWN_BOUND_S)
    nblocks = (len(data) + BLK - 1) // BLK

    def rebuilt():
        per = current_copies(nc, "/c")
        return all(len(per.get(b, set()) - {ids["io2"]}) == 2 for b in range(nblocks))

    nc.wait(rebuilt, "every block of /c to have 2 current copies without io2", 120)
    assert_bytes_equal(data, read_fresh(mnt(nc, "client1") / "c"), "after the rebuild")
    nc.heal("io2")
    nc.wait(lambda: nc.server_states().get("io2") == "up", "io2 to register again", 60)


def test_d_loss_and_delay_keep_data_right(healed):
    nc = healed
    nc.degrade("client0", delay_ms=20, loss_pct=5)
    nc.degrade("io0", delay_ms=20, loss_pct=5)
    data = os.urandom(16 * MiB + 4097)
    write_file(mnt(nc, "client0") / "d", data)
    assert_bytes_equal(data, read_fresh(mnt(nc, "client1") / "d"), "client1 over lossy links")
    assert_bytes_equal(data, read_fresh(mnt(nc, "client0") / "d"), "client0 over its lossy link")


def test_e_sigstopped_server_marked_down_serves_nothing_on_wake(healed):
    nc = healed
    old = os.urandom(16 * MiB)
    write_file(mnt(nc, "client0") / "e", old)
    reader = os.open(mnt(nc, "client1") / "e", os.O_RDONLY)
    try:
        assert_bytes_equal(old, os.pread(reader, len(old), 0), "before the stop")
        nc.stop("io0")
        nc.wait(lambda: nc.server_states().get("io0") == "down",
                "the metaserver to mark the stopped io0 down", DOWN_BOUND_S)
        new = os.urandom(len(old))
        with open(mnt(nc, "client0") / "e", "r+b") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        nc.cont("io0")
        read_until_up(nc, reader, new, "io0", "client1 after SIGCONT")
    finally:
        os.close(reader)
    assert_bytes_equal(new, read_fresh(mnt(nc, "client1") / "e"), "io0 back")


def test_f_server_cut_from_metaserver_serves_no_stale_copy(healed):
    nc = healed
    # the file's copies on io0 and io1 only: io2 takes no new block while drained
    nc.rdfs("drain", "io2")
    try:
        old = os.urandom(2 * MiB)
        write_file(mnt(nc, "client0") / "f", old)
        ids = server_ids(nc)
        per = current_copies(nc, "/f")
        assert all(per[b] == {ids["io0"], ids["io1"]} for b in range(len(old) // BLK)), per
        # a client that trusts its caches (attributes for a minute, as a site may
        # set): no attribute change makes it fetch the layout again
        lazy = nc.mount("client1", nc.dir / "mnt-client1-lazy",
                        ["attr_timeout=60", "entry_timeout=60"])
        reader = os.open(lazy / "f", os.O_RDONLY)
        try:
            # client1 loses io0, and learns it: reads rotate over the copies by MiB,
            # so one of two MiB asks io0 first, times out and marks it suspect
            nc.cut("client1", "io0")
            assert_bytes_equal(old, os.pread(reader, len(old), 0), "io0 cut from client1")
            # io1 loses the metaserver and the writer, not client1
            nc.cut("io1", "ms")
            nc.cut("io1", "client0")
            nc.wait(lambda: nc.server_states().get("io1") == "down",
                    "the metaserver to mark io1 down by its silence", DOWN_BOUND_S)
            new = os.urandom(len(old))
            with open(mnt(nc, "client0") / "f", "r+b") as f:
                f.write(new)
                f.flush()
                os.fsync(f.fileno())
            # client1's cached layout names io1's copy, now stale; io0 is suspect,
            # so io1 is asked first: it must refuse, not serve the old bytes
            # (an open would fetch the layout again: the open reader's pages go)
            os.posix_fadvise(reader, 0, 0, os.POSIX_FADV_DONTNEED)
            try:
                got = os.pread(reader, 128 * 1024, 0)
            except OSError:
                got = None      # no copy it may read is reachable: an error, fine
            if got is not None:
                assert got != old[:len(got)], "client1 read io1's stale copy"
                assert_bytes_equal(new[:len(got)], got, "client1 while io1 is cut off")
        finally:
            os.close(reader)
    finally:
        nc.rdfs("drain", "--cancel", "io2")
    nc.heal("client1")
    nc.heal("io1")
    nc.wait_all_up()
    assert_bytes_equal(new, read_fresh(mnt(nc, "client1") / "f"), "after the heal")


def test_g_every_host_serves_its_metrics(healed):
    """status --json names a metrics endpoint for every host, the clients' rdfs-fuse
    included, and `rdfs metrics` on the metaserver's host dumps each across the
    bridge: the servers' families, and each client's FUSE requests."""
    nc = healed
    hosts = nc.status_json()["hosts"]
    assert {h["role"] for h in hosts} == {"metaserver", "ioserver", "client"}
    prefix = {"metaserver": "rdfs_ms_requests_total", "ioserver": "rdfs_ios_requests_total",
              "client": 'rdfs_fuse_requests_total{op="init"} 1\n'}
    for h in hosts:
        assert h["metrics_url"] == "http://%s:9100/metrics" % h["address"], h
        out = nc.rdfs("metrics", "--url", h["metrics_url"], timeout=30).stdout
        assert prefix[h["role"]] in out, (h["name"], out[:2000])
