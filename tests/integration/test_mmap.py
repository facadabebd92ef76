# SPDX-License-Identifier: MIT
"""mmap(2) of files on the mount: reads, shared writes and private writes,
checked byte for byte against read(2), after the page cache is dropped, and
through another client."""
import mmap
import os

from conftest import MiB, assert_bytes_equal, drop_cache
from test_data import pattern, read_file, write_file

PAGE = mmap.PAGESIZE


def test_mmap_read_matches_the_file(workdir, other_mount):
    size = 3 * MiB + 123          # several chunks, a partial last page
    data = pattern(21, size)
    p = workdir / "f"
    write_file(p, data)
    drop_cache(p)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        assert len(m) == size
        assert_bytes_equal(data, m[:], "mmap read after dropping the page cache")
        # Pages touched out of order read the same bytes.
        for off in (size - 1, 2 * MiB + 7, 0, MiB - 1, PAGE):
            assert m[off] == data[off], "byte %d" % off
    theirs = other_mount / workdir.name / "f"
    with open(theirs, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        assert_bytes_equal(data, m[:], "mmap read through another client")


def test_mmap_shared_writes_reach_the_servers(workdir, other_mount):
    size = 2 * MiB + 5000
    data = bytearray(pattern(22, size))
    p = workdir / "f"
    write_file(p, bytes(data))
    patches = [(0, 1), (PAGE - 3, 6), (MiB - 100, 300), (2 * MiB + 4000, 1000), (size - 1, 1)]
    fd = os.open(p, os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as m:
            for off, n in patches:
                patch = pattern(off + 1000, n)
                m[off:off + n] = patch
                data[off:off + n] = patch
            m.flush()
    finally:
        os.close(fd)
    assert os.stat(p).st_size == size
    assert_bytes_equal(bytes(data), read_file(p), "read(2) of the mmap-written file")
    drop_cache(p)
    assert_bytes_equal(bytes(data), read_file(p), "after dropping the page cache")
    assert_bytes_equal(bytes(data), read_file(other_mount / workdir.name / "f"),
                       "through another client")


def test_mmap_write_into_a_file_grown_by_ftruncate(workdir, other_mount):
    """Pages of a hole written through a shared mapping: the rest stays zero."""
    size = MiB + 3 * PAGE
    p = workdir / "f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, size)
        expected = bytearray(size)
        with mmap.mmap(fd, size) as m:
            for off in (PAGE + 10, MiB + PAGE - 1, size - 50):
                patch = pattern(off, 40)
                m[off:off + 40] = patch
                expected[off:off + 40] = patch
            m.flush()
        os.fsync(fd)
    finally:
        os.close(fd)
    drop_cache(p)
    assert_bytes_equal(bytes(expected), read_file(p), "read after the mapping's writes")
    assert_bytes_equal(bytes(expected), read_file(other_mount / workdir.name / "f"),
                       "through another client")


def test_mmap_private_writes_stay_private(workdir):
    data = pattern(23, 100000)
    p = workdir / "f"
    write_file(p, data)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                                       prot=mmap.PROT_READ | mmap.PROT_WRITE) as m:
        m[0:5] = b"XXXXX"
        assert m[0:5] == b"XXXXX"
    drop_cache(p)
    assert_bytes_equal(data, read_file(p), "file after private writes")


def test_read_sees_mmap_write_and_mmap_sees_write(workdir):
    """One page cache: write(2) and a shared mapping of the same file agree at once."""
    size = 3 * PAGE
    p = workdir / "f"
    write_file(p, bytes(size))
    fd = os.open(p, os.O_RDWR)
    try:
        with mmap.mmap(fd, size) as m:
            m[100:105] = b"mmap!"
            assert os.pread(fd, 5, 100) == b"mmap!"
            os.pwrite(fd, b"write", PAGE + 7)
            assert m[PAGE + 7:PAGE + 12] == b"write"
    finally:
        os.close(fd)
