# SPDX-License-Identifier: MIT
"""Two mounts of one cluster (rdfs-fuse, or the kernel client under
RDFS_TEST_CLIENT=lkm) see each other's changes (close-to-open)."""
import os

import pytest

from conftest import MiB, assert_bytes_equal, drop_cache, fuse_only


@pytest.fixture
def second_mount(other_mount):
    return other_mount


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


def test_new_file_visible_on_other_mount(workdir, second_mount):
    data = os.urandom(3 * MiB + 5)
    _write(workdir / "f", data)
    other = second_mount / workdir.name / "f"
    assert os.stat(other).st_size == len(data)
    assert_bytes_equal(data, _read(other))


def test_close_to_open_into_zero_timeout_mount(workdir, second_mount):
    mine = workdir / "shared"
    theirs = second_mount / workdir.name / "shared"
    _write(mine, b"a" * 10000)
    assert _read(theirs) == b"a" * 10000
    with open(mine, "r+b") as f:
        f.seek(5000)
        f.write(b"B" * 100)
        f.seek(0, os.SEEK_END)
        f.write(b"C" * 7000)
    assert _read(theirs) == b"a" * 5000 + b"B" * 100 + b"a" * 4900 + b"C" * 7000
    os.truncate(mine, 3000)
    assert _read(theirs) == b"a" * 3000


def test_close_to_open_into_caching_mount(workdir, second_mount):
    """The cluster's own mount caches attributes (attr_timeout=1); an open there
    must still see what the other mount wrote and closed before it (as NFS's
    close-to-open revalidates on open)."""
    mine = workdir / "shared"
    theirs = second_mount / workdir.name / "shared"
    _write(mine, b"a" * 10000)
    assert _read(mine) == b"a" * 10000
    # The other mount overwrites part of it and appends; after its close, an open here sees it.
    with open(theirs, "r+b") as f:
        f.seek(5000)
        f.write(b"B" * 100)
        f.seek(0, os.SEEK_END)
        f.write(b"C" * 7000)
    got = _read(mine)
    assert got == b"a" * 5000 + b"B" * 100 + b"a" * 4900 + b"C" * 7000, \
        "after the other mount grew the file to 17100 bytes an open here read %d bytes" % len(got)
    # Shrink from here, grow from there.
    os.truncate(mine, 3000)
    assert _read(theirs) == b"a" * 3000
    _write(theirs, b"D" * 50, "ab")
    got = _read(mine)
    assert got == b"a" * 3000 + b"D" * 50, \
        "after the other mount appended 50 bytes to 3000 an open here read %d bytes" % len(got)


def test_namespace_changes_visible(workdir, second_mount):
    other = second_mount / workdir.name
    os.mkdir(workdir / "d")
    _write(workdir / "d" / "x", b"x")
    assert os.listdir(other / "d") == ["x"]
    os.rename(other / "d" / "x", other / "d" / "y")
    assert os.listdir(workdir / "d") == ["y"]
    assert _read(workdir / "d" / "y") == b"x"
    os.unlink(workdir / "d" / "y")
    with pytest.raises(FileNotFoundError):
        os.stat(other / "d" / "y")
    os.setxattr(other / "d", "user.k", b"v")
    assert os.getxattr(workdir / "d", "user.k") == b"v"
    # Attributes: seen at once by the mount without an attribute cache.
    os.chmod(workdir / "d", 0o700)
    assert os.stat(other / "d").st_mode & 0o777 == 0o700


def test_file_deleted_on_one_mount_while_open_on_other(workdir, second_mount):
    data = os.urandom(MiB)
    _write(workdir / "f", data)
    with open(second_mount / workdir.name / "f", "rb") as f:
        os.unlink(workdir / "f")
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert_bytes_equal(data, f.read(), "data of a file unlinked by the other mount")


def test_direct_io_mount(cluster, workdir):
    """A mount with -o direct_io (no page cache) reads and writes the same bytes."""
    mnt = cluster.dir / "mnt-direct"
    cluster.mount_second(mnt, "attr_timeout=0,entry_timeout=0,direct_io")
    try:
        data = os.urandom(3 * MiB + 4097)
        p = mnt / workdir.name / "direct"
        with open(p, "wb") as f:
            f.write(data[:5])
            f.write(data[5:])
        assert_bytes_equal(data, _read(workdir / "direct"))
        with open(p, "r+b") as f:
            f.seek(MiB - 3)
            f.write(b"XYZXYZ")
        expected = data[:MiB - 3] + b"XYZXYZ" + data[MiB + 3:]
        assert_bytes_equal(expected, _read(p))
        assert_bytes_equal(expected, _read(workdir / "direct"))
    finally:
        cluster.unmount(mnt)


@fuse_only("max_read and allow_other/default_permissions are FUSE mount options")
def test_large_fuse_requests(cluster):
    """max_read (and so max_write) of at least 1 MiB, as /proc/mounts shows."""
    opts = [line.split()[3] for line in open("/proc/mounts") if line.split()[1] == str(cluster.mnt)]
    assert opts, "no /proc/mounts entry for %s" % cluster.mnt
    kv = dict(o.split("=", 1) for o in opts[0].split(",") if "=" in o)
    assert int(kv.get("max_read", 0)) >= MiB, opts[0]
    assert "allow_other" in opts[0] and "default_permissions" in opts[0], opts[0]


@pytest.mark.parametrize("fresh_block", [True, False], ids=["new-block", "written-block"])
def test_two_clients_write_different_bytes_of_one_block(workdir, second_mount, fresh_block):
    """DESIGN: partial writes of one block from two clients both land (the I/O
    server does the read-modify-write, serialized per block)."""
    mine = workdir / "f"
    theirs = second_mount / workdir.name / "f"
    base = b"" if fresh_block else b"." * 8192
    _write(mine, base)
    a = os.open(mine, os.O_WRONLY)
    b = os.open(theirs, os.O_WRONLY)
    try:
        assert os.pwrite(a, b"A" * 100, 0) == 100
        assert os.pwrite(b, b"B" * 100, 100) == 100
        assert os.pwrite(a, b"C" * 100, 4096 + 50) == 100
        assert os.pwrite(b, b"D" * 100, 4096 + 1000) == 100
        os.fsync(a)
        os.fsync(b)
    finally:
        os.close(a)
        os.close(b)
    expected = bytearray(base.ljust(4096 + 1100, b"\0"))
    expected[0:100] = b"A" * 100
    expected[100:200] = b"B" * 100
    expected[4096 + 50:4096 + 150] = b"C" * 100
    expected[4096 + 1000:4096 + 1100] = b"D" * 100
    if not fresh_block:
        expected = expected.ljust(8192, b".")
    for p in (mine, theirs):
        drop_cache(p)
        assert_bytes_equal(bytes(expected), _read(p), "as read through %s" % p.parent.parent)


@fuse_only("negative entries are rdfs-fuse's LOOKUP reply")
def test_negative_entry_cached_for_entry_timeout(cluster, workdir, other_mount):
    """A name found missing is cached as missing for entry_timeout, as a found
    one is: a mount with a long timeout keeps saying ENOENT for a name another
    mount created after it looked, a mount without caches sees it at once, and
    the caching mount's own create replaces its negative entry."""
    slow = cluster.dir / "mnt-neg"
    cluster.mount_second(slow, opts="attr_timeout=30,entry_timeout=30")
    try:
        mine = slow / workdir.name / "late"
        with pytest.raises(FileNotFoundError):
            os.stat(mine)
        _write(other_mount / workdir.name / "late", b"x")
        assert os.stat(other_mount / workdir.name / "late").st_size == 1
        with pytest.raises(FileNotFoundError):
            os.stat(mine)
        # our own create: a negative entry is no obstacle, O_EXCL still sees the name
        with pytest.raises(FileExistsError):
            os.close(os.open(mine, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        own = slow / workdir.name / "own"
        with pytest.raises(FileNotFoundError):
            os.stat(own)
        _write(own, b"yz")
        assert os.stat(own).st_size == 2
        assert os.stat(other_mount / workdir.name / "own").st_size == 2
    finally:
        cluster.unmount(slow)
