# SPDX-License-Identifier: MIT
"""The client's fast data path through FUSE: large FUSE requests, write-behind
(the default) and the kernel's writeback cache (-o writeback_cache), each with
close-to-open consistency between two mounts, reads of what was just written,
and failures reported at close rather than lost."""
import os

import pytest

from conftest import MiB, assert_bytes_equal, drop_cache, fuse_only


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


def test_four_mib_write_lands_intact(workdir, other_mount):
    """One write(2) larger than max_write (1 MiB: the kernel splits it) lands whole."""
    data = os.urandom(4 * MiB + 3)
    fd = os.open(workdir / "big", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, data, 5) == len(data)
    finally:
        os.close(fd)
    want = b"\0" * 5 + data
    assert_bytes_equal(want, _read(other_mount / workdir.name / "big"))
    drop_cache(workdir / "big")
    assert_bytes_equal(want, _read(workdir / "big"))


def test_many_small_writes_read_back_elsewhere(workdir, other_mount):
    """Small sequential writes (gathered by write-behind) read back byte for
    byte on another mount after close, and on this one before close."""
    data = os.urandom(3 * MiB + 1234)
    path = workdir / "small"
    with open(path, "wb", buffering=0) as f:
        for off in range(0, len(data), 5000):
            f.write(data[off:off + 5000])
        # this mount sees its own writes before the close
        assert os.stat(path).st_size == len(data)
        with open(path, "rb") as r:
            r.seek(MiB - 7)
            assert r.read(100) == data[MiB - 7:MiB + 93]
    assert_bytes_equal(data, _read(other_mount / workdir.name / "small"))


def test_sequential_read_sees_a_write_made_in_between(workdir):
    data = bytearray(os.urandom(6 * MiB))
    path = workdir / "rw"
    _write(path, data)
    drop_cache(path)
    with open(path, "r+b", buffering=0) as f:
        got = f.read(2 * MiB)
        f.seek(4 * MiB + 100)
        f.write(b"X" * 5000)
        data[4 * MiB + 100:4 * MiB + 5100] = b"X" * 5000
        f.seek(2 * MiB)
        got += f.read()
    assert_bytes_equal(bytes(data), got)


def test_append_through_write_behind(workdir, other_mount):
    path = workdir / "log"
    want = b""
    for i in range(30):
        line = (b"%d " % i) * (100 + i)
        with open(path, "ab") as f:
            f.write(line)
        want += line
    assert _read(other_mount / workdir.name / "log") == want


@fuse_only("write_behind= is an rdfs-fuse (lib/client) option")
def test_write_behind_off_mount(cluster, workdir):
    mnt = cluster.dir / "mnt-nowb"
    cluster.mount_second(mnt, "attr_timeout=0,entry_timeout=0,write_behind=0")
    try:
        data = os.urandom(2 * MiB + 11)
        _write(mnt / workdir.name / "nowb", data)
        assert_bytes_equal(data, _read(workdir / "nowb"))
    finally:
        cluster.unmount(mnt)


@pytest.fixture
def wbc_mount(cluster):
    mnt = cluster.dir / "mnt-wbc"
    cluster.mount_second(mnt, "attr_timeout=1,entry_timeout=1,writeback_cache")
    yield mnt
    cluster.unmount(mnt)


@fuse_only("-o writeback_cache is an rdfs-fuse option")
def test_writeback_cache_close_to_open_both_ways(workdir, other_mount, wbc_mount):
    mine = wbc_mount / workdir.name / "shared"
    theirs = other_mount / workdir.name / "shared"
    data = os.urandom(3 * MiB + 17)
    _write(mine, data)
    assert_bytes_equal(data, _read(theirs))
    assert os.stat(theirs).st_size == len(data)
    # the other mount overwrites part and appends; an open here sees it all
    assert _read(mine)[:10] == data[:10]
    with open(theirs, "r+b") as f:
        f.seek(1000)
        f.write(b"B" * 100)
        f.seek(0, os.SEEK_END)
        f.write(b"C" * 7000)
    want = data[:1000] + b"B" * 100 + data[1100:] + b"C" * 7000
    assert_bytes_equal(want, _read(mine))
    # a partial overwrite through the writeback cache reaches the other mount
    with open(mine, "r+b") as f:
        f.seek(MiB - 3)
        f.write(b"xyzxyz")
    want = want[:MiB - 3] + b"xyzxyz" + want[MiB + 3:]
    assert_bytes_equal(want, _read(theirs))


@fuse_only("-o writeback_cache is an rdfs-fuse option")
def test_writeback_cache_size_mtime_and_setid(workdir, wbc_mount, other_mount):
    path = wbc_mount / workdir.name / "attrs"
    _write(path, b"a" * 10000)
    os.chmod(path, 0o6755)
    before = os.stat(other_mount / workdir.name / "attrs")
    with open(path, "r+b") as f:
        f.seek(20000)
        f.write(b"z")
        f.flush()
        os.fsync(f.fileno())
        assert os.fstat(f.fileno()).st_size == 20001
    after = os.stat(other_mount / workdir.name / "attrs")
    assert after.st_size == 20001
    assert after.st_mtime_ns >= before.st_mtime_ns
    got = _read(other_mount / workdir.name / "attrs")
    assert got == b"a" * 10000 + b"\0" * 10000 + b"z"
    # a truncate through this mount is seen here and elsewhere
    os.truncate(path, 5)
    assert os.stat(path).st_size == 5
    assert _read(other_mount / workdir.name / "attrs") == b"aaaaa"


@fuse_only("-o writeback_cache is an rdfs-fuse option")
def test_writeback_cache_o_append(workdir, wbc_mount, other_mount):
    path = wbc_mount / workdir.name / "app"
    want = b""
    for i in range(10):
        with open(path, "ab") as f:
            f.write(b"%03d" % i * 1000)
        want += b"%03d" % i * 1000
    assert _read(other_mount / workdir.name / "app") == want


def test_interleaved_writes_and_reads_on_one_mount_and_another(workdir, other_mount):
    """rdfs-fuse answers a WRITE before the chunk it completes goes out: 1 MiB
    and odd-size writes through two opens, with reads of the same file (from
    the FS, not the page cache) between them, read back byte for byte here and
    on another mount after the close."""
    import random
    rng = random.Random(7)
    path = workdir / "mixed"
    model = bytearray(24 * MiB)
    end = 0
    a = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    b = os.open(path, os.O_RDWR)
    r = os.open(path, os.O_RDONLY)
    try:
        off = 0
        for i in range(90):
            n = MiB if i % 3 else rng.randrange(1, 3 * MiB)
            if i % 10 == 9:
                off = rng.randrange(0, 20 * MiB)
            n = min(n, len(model) - off)
            data = os.urandom(n)
            assert os.pwrite(b if i % 5 == 4 else a, data, off) == n
            model[off:off + n] = data
            off += n
            end = max(end, off)
            if off == len(model):
                off = 0
            if i % 6 == 5:
                os.posix_fadvise(r, 0, 0, os.POSIX_FADV_DONTNEED)
                at = rng.randrange(0, end)
                got = os.pread(r, 2 * MiB, at)
                assert_bytes_equal(bytes(model[at:min(end, at + 2 * MiB)]), got,
                                   "read at %d after write %d" % (at, i))
    finally:
        os.close(r)
        os.close(b)
        os.close(a)
    want = bytes(model[:end])
    assert_bytes_equal(want, _read(other_mount / workdir.name / "mixed"))
    drop_cache(path)
    assert_bytes_equal(want, _read(path))


def test_close_right_after_a_whole_chunk_write(workdir, other_mount):
    """The chunk a 1 MiB write completes goes out after the reply; a close
    right behind it (the RELEASE racing that send) loses nothing."""
    files = []
    for i in range(40):
        data = os.urandom(MiB * (1 + i % 3))
        fd = os.open(workdir / ("c%d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for off in range(0, len(data), MiB):
                assert os.pwrite(fd, data[off:off + MiB], off) == MiB
        finally:
            os.close(fd)
        files.append(data)
    for i, data in enumerate(files):
        assert_bytes_equal(data, _read(other_mount / workdir.name / ("c%d" % i)),
                           "file c%d" % i)


@fuse_only("rdfs-fuse sends a chunk after answering the WRITE that completed it")
def test_io_server_death_after_whole_chunk_writes_reaches_fsync(fresh_cluster):
    """Write-behind: a chunk sent after its WRITE was answered fails; the next
    write or the fsync reports it (never a silent success)."""
    c = fresh_cluster
    chunk = os.urandom(MiB)
    fd = os.open(c.mnt / "victim-fsync", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, chunk, 0)
        os.fsync(fd)
        c.kill9(c.ioserver_port(0))
        c.kill9(c.ioserver_port(1))
        failed = False
        try:
            for i in range(1, 6):
                os.pwrite(fd, chunk, i * MiB)
        except OSError:
            failed = True
        try:
            os.fsync(fd)
        except OSError:
            failed = True
        assert failed, "writes to dead I/O servers were lost silently"
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def test_io_server_death_is_reported_at_close(fresh_cluster):
    """Write-behind: a WRITE that fails after write(2) returned fails the close."""
    c = fresh_cluster
    path = c.mnt / "victim"
    chunk = os.urandom(MiB)
    f = open(path, "wb", buffering=0)
    f.write(chunk)
    os.fsync(f.fileno())
    c.kill9(c.ioserver_port(0))
    c.kill9(c.ioserver_port(1))
    failed = False
    try:
        for _ in range(8):
            f.write(chunk)
    except OSError:
        failed = True
    try:
        f.close()
    except OSError:
        failed = True
    assert failed, "writes to dead I/O servers were lost silently"


@fuse_only("-o writeback_cache is an rdfs-fuse option")
def test_writeback_cache_non_owner_write_clears_setid(workdir, wbc_mount):
    from test_permissions import ALICE, ok
    f = wbc_mount / workdir.name / "suid"
    f.write_bytes(b"x" * 100)
    os.chmod(f, 0o6777)

    def write_as_other():
        fd = os.open(f, os.O_WRONLY)
        try:
            return os.pwrite(fd, b"hello", 10)
        finally:
            os.close(fd)

    assert ok(ALICE, write_as_other) == 5
    mode = os.stat(f).st_mode & 0o7777
    assert mode & 0o6000 == 0, oct(mode)
    drop_cache(f)
    data = (workdir / "suid").read_bytes()
    assert data[10:15] == b"hello" and len(data) == 100
