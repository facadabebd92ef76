# SPDX-License-Identifier: MIT
"""Copies: files whose chunks are kept on several I/O servers, through real mounts.

What these tests prove, on a cluster of three I/O servers:
  - `rdfs setcopies`/`getcopies` and the rdfs.copies xattr (setfattr/getfattr
    through the mount) set and show the copies of a file and the default of a
    directory, inherited by what is created in it; bad values are refused
    (EINVAL, exit 2) and only the owner may change it;
  - `rdfs layout` shows every copy: each block of a 2-copy file on two
    distinct servers;
  - kill -9 of an I/O server in the middle of a large sequential read through a
    second mount: the read completes, byte for byte;
  - kill -9 of an I/O server in the middle of a stream of writes and fsync: the
    writes, fsync and close succeed, and the file reads back byte for byte from
    another mount; the dead server's copy is shown stale by `rdfs layout` after
    its restart, and reads (from a fresh mount) never return its old bytes;
  - `rdfs fsck` is clean after every test (an autouse fixture), the kills of
    I/O servers and of the metaserver included.
The same tests run against the kernel client in the qemu guest
(tests/vm/suite.d/lkm-copies: RDFS_TEST_CLIENT=lkm, over TCP and RDMA), whose
reads fail over through the helper and whose writes go to every copy.
"""
import errno
import os
import re

import pytest

from conftest import MiB, _start, _stop, assert_bytes_equal, fsck_clean, wait_until
from test_layout import parse_layout

BLK = 4096
# MiB read across a server's death (a quarter before it); half as many are
# written while it is dead. The guest (TCG) runs it smaller.
FAILOVER_MIB = int(os.environ.get("RDFS_TEST_COPIES_MIB") or 64)


@pytest.fixture(scope="module")
def c3():
    c = _start("copies", 3)
    yield c
    _stop(c)


@pytest.fixture(autouse=True)
def fsck_after(c3):
    """`rdfs fsck` clean after each test: most kill I/O servers or the metaserver."""
    yield
    fsck_clean(c3)


def copies_per_block(rows, states=("written", "unwritten")):
    """{file block: set of servers} over the rows in @states."""
    per = {}
    for r in rows:
        if r["state"] not in states:
            continue
        for b in range(r["offset"] // BLK, (r["offset"] + r["length"]) // BLK):
            per.setdefault(b, set()).add(r["server"])
    return per


def lowest_id_port(c):
    """The port of the I/O server with the lowest id: the first copy of every
    block it holds, the one a reader with no other preference asks."""
    out = c.rdfs("status").stdout
    rows = re.findall(r"^\s*(\d+)\s+\S+\s+\S+://[^:]+:(\d+)\s", out, re.M)
    assert rows, out
    return int(min(rows, key=lambda r: int(r[0]))[1])


def test_copies_attribute_tool_and_inheritance(c3):
    d = c3.mnt / "attr"
    d.mkdir()
    assert c3.rdfs("getcopies", "/attr").stdout.strip() == "/attr: 1"
    c3.rdfs("setcopies", "2", "/attr")
    assert os.getxattr(d, "rdfs.copies") == b"2"
    (d / "f").write_bytes(b"x")
    (d / "sub").mkdir()
    assert os.getxattr(d / "f", "rdfs.copies") == b"2"
    assert c3.rdfs("getcopies", "/attr/sub").stdout.strip() == "/attr/sub: 2"
    os.setxattr(d / "f", "rdfs.copies", b"3")
    assert c3.rdfs("getcopies", "/attr/f").stdout.strip() == "/attr/f: 3"
    for bad in (b"0", b"9", b"x", b""):
        with pytest.raises(OSError) as e:
            os.setxattr(d / "f", "rdfs.copies", bad)
        assert e.value.errno == errno.EINVAL, bad
    for bad in ("0", "9", "two", ""):
        p = c3.rdfs("setcopies", bad, "/attr/f", check=False)
        assert p.returncode == 2 and "from 1 to 8" in p.stderr, (bad, p.stderr)
    p = c3.rdfs("setcopies", "2", "/attr/missing", check=False)
    assert p.returncode == 1 and "No such file" in p.stderr, p.stderr
    # not the owner: refused (the tool runs as root here, so ask as another uid)
    os.chown(d / "f", 1234, 1234)
    r = os.fork()
    if r == 0:
        try:
            os.setgid(1234)
            os.setuid(4321)
            try:
                os.setxattr(d / "f", "rdfs.copies", b"1")
                os._exit(1)
            except OSError as e:
                os._exit(0 if e.errno in (errno.EPERM, errno.EACCES) else 2)
        finally:
            os._exit(3)
    assert os.waitpid(r, 0)[1] == 0
    assert "rdfs.copies" not in os.listxattr(d / "f")


def test_two_copies_on_distinct_servers(c3):
    d = c3.mnt / "spread"
    d.mkdir()
    c3.rdfs("setcopies", "2", "/spread")
    data = os.urandom(20 * MiB + 123)
    with open(d / "f", "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    out = c3.rdfs("layout", "/spread/f").stdout
    assert "copies:      2" in out, out
    per = copies_per_block(parse_layout(out))
    nblocks = (len(data) + BLK - 1) // BLK
    assert all(len(per.get(b, ())) == 2 for b in range(nblocks)), out
    assert len(set().union(*per.values())) == 3, "copies not spread over all servers:\n" + out


def test_server_killed_mid_read_and_mid_write(c3, tmp_path_factory):
    d = c3.mnt / "failover"
    d.mkdir()
    c3.rdfs("setcopies", "2", "/failover")
    data = os.urandom(FAILOVER_MIB * MiB)
    with open(d / "r", "wb") as f:
        f.write(data)
    reader = c3.mount_second(c3.dir / "mnt-reader")
    try:
        # a sequential read through another mount; an I/O server dies a quarter in
        got = []
        with open(reader / "failover" / "r", "rb") as f:
            got.append(f.read(FAILOVER_MIB // 4 * MiB))
            saved = c3.kill9(lowest_id_port(c3))
            while True:
                b = f.read(MiB)
                if not b:
                    break
                got.append(b)
        assert_bytes_equal(data, b"".join(got), "read across the death of an I/O server")

        # a stream of writes and fsync while one of the two copies' servers is dead
        new = os.urandom(FAILOVER_MIB // 2 * MiB)
        with open(d / "w", "wb") as f:
            for i in range(FAILOVER_MIB // 2):
                f.write(new[i * MiB:(i + 1) * MiB])
            f.flush()
            os.fsync(f.fileno())
        # and the file written before, rewritten: its copies on the dead server go stale
        with open(d / "r", "r+b") as f:
            f.write(new)
            os.fsync(f.fileno())
        # looked at while the server is still dead: once it is back, a rebuild pass
        # (every 10 s) may already have repaired the stale copies
        out = c3.rdfs("layout", "/failover/r").stdout
        assert any(r["state"] == "stale" for r in parse_layout(out)), out
        c3.restart(saved)
        c3.wait_servers_up()
        out = c3.rdfs("layout", "/failover/r").stdout
        cur = copies_per_block(parse_layout(out))
        assert all(len(cur.get(b, ())) >= 1 for b in range(len(data) // BLK)), out
    finally:
        c3.unmount(reader)
    # a fresh mount reads the new bytes, never the stale copy's old ones
    fresh = c3.mount_second(c3.dir / "mnt-fresh")
    try:
        with open(fresh / "failover" / "w", "rb") as f:
            assert_bytes_equal(new, f.read(), "written while a server was dead")
        with open(fresh / "failover" / "r", "rb") as f:
            assert_bytes_equal(new + data[len(new):], f.read(), "rewritten with a stale copy")
    finally:
        c3.unmount(fresh)
    p = c3.rdfs("fsck", check=False, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


STATUS = re.compile(r"copies \(rebuild pass (\d+)\): (\d+) chunks under-replicated, (\d+) being "
                    r"rebuilt, (\d+) lost")


def copies_status(c):
    out = c.rdfs("status").stdout
    m = STATUS.search(out)
    assert m, out
    return dict(passes=int(m.group(1)), under=int(m.group(2)), building=int(m.group(3)),
                lost=int(m.group(4)))


def test_dead_server_rebuilt_elsewhere(c3):
    """After the grace (0 here), every chunk of a dead server gets its second copy
    on the server left over, checked through the metaserver; then the other
    original server dies too, and a fresh mount reads every byte back."""
    # a rebuilder with no grace that passes every second: the metaserver restarted with it
    with open(c3.conf, "a") as f:
        f.write("\n[metaserver]\nrebuild_grace = 0\nrebuild_interval = 1\n")
    c3.restart(c3.kill9(c3.port))
    c3.wait_servers_up()
    d = c3.mnt / "rebuild"
    d.mkdir()
    c3.rdfs("setcopies", "2", "/rebuild")
    data = os.urandom(16 * MiB + 99)
    with open(d / "f", "wb") as f:
        f.write(data)
    before = copies_status(c3)
    saved = c3.kill9(lowest_id_port(c3))
    out = c3.rdfs("status").stdout
    down = [int(m) for m in re.findall(r"^\s*(\d+)\s+\S+\s+\S+\s+down\b", out, re.M)]
    assert len(down) == 1, out
    nblocks = (len(data) + BLK - 1) // BLK

    def rebuilt():
        lay = c3.rdfs("layout", "/rebuild/f").stdout
        per = copies_per_block(parse_layout(lay))
        return all(len(per.get(b, set()) - set(down)) == 2 for b in range(nblocks))

    # checked through the metaserver: two current copies of every block on live servers
    wait_until(rebuilt, "the rebuilder to give every chunk of the file its copies again")
    st = copies_status(c3)
    assert st["passes"] > before["passes"], st
    # every other server but one dies: the rebuilt copies must hold the bytes
    ports = [p for p in (c3.ioserver_port(i) for i in range(3)) if p != saved["port"]]
    second = c3.kill9(ports[0])
    fresh = c3.mount_second(c3.dir / "mnt-rebuilt")
    try:
        # blocks whose only live copy is now a rebuilt one are read from it
        with open(fresh / "rebuild" / "f", "rb") as f:
            assert_bytes_equal(data, f.read(), "read back from rebuilt copies")
    finally:
        c3.unmount(fresh)
        c3.restart(saved)
        c3.restart(second)
        c3.wait_servers_up()


def test_drain_empties_a_server_online(c3):
    """`rdfs drain --wait` returns once the server holds no block, with a file
    open for reading through it; every file reads back from a fresh mount with
    the drained server stopped; --cancel gives it back; bad use is refused."""
    assert c3.rdfs("drain", check=False).returncode == 2
    assert c3.rdfs("drain", "--wait", "--cancel", "1", check=False).returncode == 2
    p = c3.rdfs("drain", "no-such-server", check=False)
    assert p.returncode == 1 and "No such file" in p.stderr, p.stderr
    d = c3.mnt / "drain"
    d.mkdir()
    files = {}
    for name, copies in (("one", 1), ("two", 2)):
        (d / name).write_bytes(b"")
        os.setxattr(d / name, "rdfs.copies", str(copies).encode())
        files[name] = os.urandom(6 * MiB + copies)
        (d / name).write_bytes(files[name])
    port = lowest_id_port(c3)
    out = c3.rdfs("status").stdout
    row = re.search(r"^\s*(\d+)\s+(\S+)\s+\S+://[^:]+:%d\s" % port, out, re.M)
    assert row, out
    name = row.group(2)
    with open(d / "one", "rb") as held:
        p = c3.rdfs("drain", "--wait", name, timeout=300)
        assert "drained" in p.stdout, p.stdout
        assert_bytes_equal(files["one"], held.read(), "read through the drain")
    out = c3.rdfs("status").stdout
    assert re.search(r"^\s*%s\s+%s\s+\S+\s+drain\s" % (row.group(1), name), out, re.M), out
    saved = c3.kill9(port)
    fresh = c3.mount_second(c3.dir / "mnt-drained")
    try:
        for n, data in files.items():
            with open(fresh / "drain" / n, "rb") as f:
                assert_bytes_equal(data, f.read(), "read back with the drained server stopped")
    finally:
        c3.unmount(fresh)
        c3.restart(saved)
        c3.wait_servers_up()
    p = c3.rdfs("drain", "--cancel", name)
    assert "no longer draining" in p.stdout
    assert re.search(r"^\s*%s\s+%s\s+\S+\s+up\s" % (row.group(1), name),
                     c3.rdfs("status").stdout, re.M)


def test_rebalance_tool(c3):
    """`rdfs rebalance`: bad use is refused (exit 2, nothing asked); with a band
    as wide as can be (--threshold 100: +-50 points) every server is in it, so
    --wait returns at the metaserver's next pass saying so, and `rdfs status`
    shows no rebalance line once it ended; --cancel answers. The moves
    themselves are tested in tests/unit (ms_rebuild_test, client_copies_test)."""
    help_ = c3.rdfs("rebalance", "--help").stdout
    assert "--threshold PCT" in help_ and "--wait" in help_ and "--cancel" in help_, help_
    assert "rebalance" in c3.rdfs("--help", check=False).stdout
    for bad in (["--threshold", "0"], ["--threshold", "101"], ["--threshold", "x"],
                ["--threshold", "-5"], ["--cancel", "--wait"], ["--cancel", "--threshold", "5"],
                ["now"]):
        p = c3.rdfs("rebalance", *bad, check=False)
        assert p.returncode == 2, (bad, p.stdout, p.stderr)
        assert "usage" in p.stderr or "rebalance" in p.stderr, (bad, p.stderr)
    assert "rebalance:" not in c3.rdfs("status").stdout
    p = c3.rdfs("rebalance", "--threshold", "100", "--wait", timeout=120)
    assert "balanced: every I/O server within \u00b150% of the cluster's usage" in p.stdout, \
        p.stdout
    assert "rebalance:" not in c3.rdfs("status").stdout
    p = c3.rdfs("rebalance", "--cancel")
    assert "rebalance cancelled" in p.stdout, p.stdout
