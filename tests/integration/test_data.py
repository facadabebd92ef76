# SPDX-License-Identifier: MIT
"""File data through the FUSE mount: contents, holes, truncate, append, concurrency."""
import concurrent.futures
import hashlib
import os
import subprocess
import sys

import pytest

from conftest import MiB, assert_bytes_equal, drop_cache


def pattern(seed, size):
    """Deterministic bytes that differ per seed and per offset (cheap for 100 MiB)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(b"%d:%d" % (seed, counter)).digest() * 64   # 2 KiB per hash
        counter += 1
    return bytes(out[:size])


def write_file(path, data, fsync=True):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        off = 0
        while off < len(data):
            off += os.write(fd, view[off:off + 4 * MiB])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb", buffering=0) as f:
        chunks = []
        while True:
            b = f.read(4 * MiB)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks)


SIZES = [0, 1, 4095, 4096, 4097, MiB - 1, MiB, MiB + 1, 100 * MiB]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "%dB" % s)
def test_contents_byte_for_byte(workdir, other_mount, size):
    data = pattern(size, size)
    p = workdir / "f"
    write_file(p, data)
    assert os.stat(p).st_size == size
    # Read from the page cache, then again from the servers, then through another client.
    assert_bytes_equal(data, read_file(p), "cached read")
    drop_cache(p)
    assert_bytes_equal(data, read_file(p), "read after dropping the page cache")
    assert_bytes_equal(data, read_file(other_mount / workdir.name / "f"), "read by another client")


def test_overwrite_inside_file(workdir):
    """Partial-block overwrites of written blocks keep the bytes around them."""
    p = workdir / "f"
    data = bytearray(pattern(1, 3 * MiB))
    write_file(p, bytes(data))
    fd = os.open(p, os.O_WRONLY)
    for off, n in [(0, 1), (4095, 2), (MiB - 7, 100), (2 * MiB + 1, 4096), (3 * MiB - 1, 1)]:
        patch = pattern(off, n)
        assert os.pwrite(fd, patch, off) == n
        data[off:off + n] = patch
    os.fsync(fd)
    os.close(fd)
    drop_cache(p)
    assert_bytes_equal(bytes(data), read_file(p))


def test_sparse_file_reads_zeros_and_uses_fewer_blocks(workdir):
    p = workdir / "sparse"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"A" * 4096, 0)
    os.lseek(fd, 8 * MiB + 123, os.SEEK_SET)
    os.write(fd, b"hello")
    os.fsync(fd)
    os.close(fd)
    size = 8 * MiB + 128
    st = os.stat(p)
    assert st.st_size == size
    assert 0 < st.st_blocks * 512 < size // 4, "st_blocks=%d for a file with 8 KiB of data" % st.st_blocks
    drop_cache(p)
    expected = b"A" * 4096 + bytes(8 * MiB + 123 - 4096) + b"hello"
    assert_bytes_equal(expected, read_file(p))


def test_write_inside_new_block_pads_with_zeros(workdir):
    p = workdir / "f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"abc", 100)
    os.pwrite(fd, b"xyz", 3 * 4096 + 5)
    os.fsync(fd)
    os.close(fd)
    drop_cache(p)
    expected = bytes(100) + b"abc" + bytes(3 * 4096 + 5 - 103) + b"xyz"
    assert_bytes_equal(expected, read_file(p))


def test_hole_in_middle_of_file_after_truncate_up(workdir):
    p = workdir / "f"
    write_file(p, b"x" * 10)
    os.truncate(p, 5 * MiB)
    with open(p, "ab") as f:
        f.write(b"tail")
    drop_cache(p)
    assert_bytes_equal(b"x" * 10 + bytes(5 * MiB - 10) + b"tail", read_file(p))
    assert os.stat(p).st_blocks * 512 < MiB


def test_truncate_down_unaligned_then_extend_reads_zeros(workdir):
    p = workdir / "f"
    data = pattern(7, 3 * MiB)
    write_file(p, data)
    cut = MiB + 123
    os.truncate(p, cut)
    assert os.stat(p).st_size == cut
    drop_cache(p)
    assert_bytes_equal(data[:cut], read_file(p), "after truncate down")
    # Extending must not resurrect the old bytes beyond the cut.
    os.truncate(p, 3 * MiB)
    assert os.stat(p).st_size == 3 * MiB
    drop_cache(p)
    assert_bytes_equal(data[:cut] + bytes(3 * MiB - cut), read_file(p), "after extending again")


def test_ftruncate_on_open_file_and_write_past_end(workdir):
    p = workdir / "f"
    data = pattern(8, 100000)
    write_file(p, data)
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 5000)
    assert os.fstat(fd).st_size == 5000
    os.pwrite(fd, b"Z", 9000)
    os.fsync(fd)
    os.close(fd)
    drop_cache(p)
    assert_bytes_equal(data[:5000] + bytes(4000) + b"Z", read_file(p))


def test_truncate_to_zero_and_o_trunc(workdir):
    p = workdir / "f"
    write_file(p, pattern(9, 2 * MiB))
    os.truncate(p, 0)
    assert os.stat(p).st_size == 0
    assert read_file(p) == b""
    write_file(p, b"new")
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert os.stat(p).st_size == 0
    os.truncate(p, 4097)
    drop_cache(p)
    assert read_file(p) == bytes(4097)


def test_append(workdir):
    p = workdir / "log"
    expected = b""
    for i in range(5):
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        rec = pattern(i, 1000 + i * 3000)
        # O_APPEND writes go to the end wherever the offset points.
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, rec)
        os.write(fd, b"|")
        os.close(fd)
        expected += rec + b"|"
    assert os.stat(p).st_size == len(expected)
    drop_cache(p)
    assert_bytes_equal(expected, read_file(p))


def test_append_two_descriptors(workdir):
    p = workdir / "log"
    a = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    b = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(a, b"1" * 5000)
    os.write(b, b"2" * 10)
    os.write(a, b"3" * 7)
    os.close(a)
    os.close(b)
    drop_cache(p)
    assert read_file(p) == b"1" * 5000 + b"2" * 10 + b"3" * 7


def _write_and_fsync(path, seed, size):
    write_file(path, pattern(seed, size))
    return path


def test_concurrent_writers_threads(workdir):
    n, size = 8, 3 * MiB + 17
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        paths = list(ex.map(lambda i: _write_and_fsync(workdir / ("t%d" % i), i, size), range(n)))
    for i, p in enumerate(paths):
        drop_cache(p)
        assert_bytes_equal(pattern(i, size), read_file(p), "file %s" % p)


WRITER = r"""
import hashlib, os, sys
path, seed, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = bytearray(); c = 0
while len(out) < size:
    out += hashlib.sha256(b"%d:%d" % (seed, c)).digest() * 64; c += 1
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
v = memoryview(bytes(out[:size])); off = 0
while off < size:
    off += os.write(fd, v[off:off + 65536])
os.fsync(fd); os.close(fd)
"""


def test_concurrent_writers_processes(workdir):
    n, size = 4, 5 * MiB + 4095
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(workdir / ("p%d" % i)),
                               str(100 + i), str(size)]) for i in range(n)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    for i in range(n):
        p = workdir / ("p%d" % i)
        drop_cache(p)
        assert_bytes_equal(pattern(100 + i, size), read_file(p), "file %s" % p)


def test_unlinked_open_file_keeps_working(workdir):
    p = workdir / "ghost"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    data = pattern(5, 2 * MiB + 3)
    os.write(fd, data)
    os.fsync(fd)
    os.unlink(p)
    with pytest.raises(FileNotFoundError):
        os.stat(p)
    assert p.name not in os.listdir(workdir)
    st = os.fstat(fd)
    assert st.st_nlink == 0
    assert st.st_size == len(data)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    assert_bytes_equal(data, os.pread(fd, len(data) + 10, 0), "unlinked file data")
    more = pattern(6, MiB)
    os.pwrite(fd, more, len(data))
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    assert_bytes_equal(data + more, os.pread(fd, 4 * MiB, 0), "unlinked file after more writes")
    os.close(fd)
    # A new file of the same name is a different, empty file.
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    assert os.fstat(fd).st_size == 0
    os.close(fd)


def test_space_allocated_in_blocks(workdir):
    """A 10 KiB file holds 3 blocks (space grows by 4 KiB blocks, not chunks)."""
    p = workdir / "small"
    write_file(p, pattern(3, 10 * 1024))
    assert os.stat(p).st_blocks * 512 == 3 * 4096


def test_freed_blocks_return_to_free_space(cluster, workdir):
    from conftest import wait_until
    before = os.statvfs(cluster.mnt).f_bfree
    write_file(workdir / "a", pattern(1, 40 * MiB))
    write_file(workdir / "b", pattern(2, 24 * MiB))
    mid = os.statvfs(cluster.mnt)
    assert (before - mid.f_bfree) * mid.f_frsize >= 64 * MiB
    os.truncate(workdir / "b", 4096)
    os.unlink(workdir / "a")
    # Freed at once or soon after the last release: bounded wait, no timing assertion.
    wait_until(lambda: before - os.statvfs(cluster.mnt).f_bfree <= 4096 // mid.f_frsize + 1,
               "the blocks of removed and truncated data to be free again (free before %d, "
               "now %d)" % (before, os.statvfs(cluster.mnt).f_bfree), attempts=40)
    # And they are used again: the next file fits in what was freed.
    write_file(workdir / "c", pattern(3, 40 * MiB))
    drop_cache(workdir / "c")
    assert_bytes_equal(pattern(3, 40 * MiB), read_file(workdir / "c"))


# ------------------------------------------------------------------ O_DIRECT
def _odirect_open(path, flags):
    return os.open(path, flags | os.O_DIRECT, 0o644)


def test_o_direct_aligned_and_unaligned(workdir, other_mount):
    """O_DIRECT reads and writes at any offset, length and buffer alignment, byte
    for byte against a model, and what they wrote read through another client."""
    import mmap
    p = workdir / "direct"
    model = bytearray(pattern(1, 3 * MiB + 3 * 4096))
    fd = _odirect_open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        # aligned: a page-aligned buffer, offsets and lengths in whole blocks
        buf = mmap.mmap(-1, len(model))
        buf[:] = model
        assert os.pwrite(fd, buf, 0) == len(model)
        back = mmap.mmap(-1, len(model))
        assert os.preadv(fd, [back], 0) == len(model)
        assert_bytes_equal(bytes(model), bytes(back), "aligned O_DIRECT read")
        # unaligned: bytes at odd offsets, in a buffer of Python's (any alignment)
        for off, n, seed in ((12345, 10000, 2), (MiB - 7, 2 * 4096 + 13, 3),
                             (len(model) - 100, 5000, 4)):
            data = pattern(seed, n)
            assert os.pwrite(fd, data, off) == n
            model[off:off + n] = data
        for off, n in ((5000, 7777), (MiB - 4096, 3 * 4096 + 1), (0, len(model) + 9999)):
            assert_bytes_equal(bytes(model[off:off + n]), os.pread(fd, n, off),
                               "unaligned O_DIRECT read at %d" % off)
        # past the end: short, then empty
        assert os.pread(fd, 4096, len(model) - 10) == bytes(model[-10:])
        assert os.pread(fd, 4096, len(model) + 4096) == b""
        assert os.fstat(fd).st_size == len(model)
    finally:
        os.close(fd)
    assert_bytes_equal(bytes(model), read_file(p), "buffered read after O_DIRECT writes")
    assert_bytes_equal(bytes(model), read_file(other_mount / p.relative_to(workdir.parent)),
                       "another client after close")


def test_o_direct_is_coherent_with_the_page_cache(workdir):
    """A direct read sees bytes still dirty in the page cache; a buffered reader
    with the old bytes cached sees what a direct write wrote."""
    p = workdir / "mixed"
    full = pattern(5, 64 * 1024)
    write_file(p, full)
    cached = os.open(p, os.O_RDWR)
    direct = _odirect_open(p, os.O_RDWR)
    try:
        assert os.pread(cached, 64 * 1024, 0) == full                   # now cached
        os.pwrite(cached, b"dirty bytes", 100)                          # not written back
        assert os.pread(direct, 20, 95) == full[95:100] + b"dirty bytes" + full[111:115]
        os.pwrite(direct, b"direct!", 40000)
        assert os.pread(cached, 9, 39999) == full[39999:40000] + b"direct!" + full[40007:40008]
    finally:
        os.close(direct)
        os.close(cached)


def test_dd_oflag_direct(workdir):
    """What a user tries first: dd with oflag=direct and iflag=direct."""
    p = workdir / "dd"
    src = workdir / "dd-src"
    write_file(src, pattern(6, 5 * MiB + 1000))
    subprocess.run(["dd", "if=%s" % src, "of=%s" % p, "bs=1M", "oflag=direct", "status=none"],
                   check=True)
    out = subprocess.run(["dd", "if=%s" % p, "bs=1M", "iflag=direct", "status=none"],
                         check=True, stdout=subprocess.PIPE).stdout
    assert_bytes_equal(pattern(6, 5 * MiB + 1000), out, "dd iflag=direct")
