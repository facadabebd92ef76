# SPDX-License-Identifier: MIT
"""Holes through the mount: lseek SEEK_DATA/SEEK_HOLE answer from the layout.

Allocated and written blocks are data; unallocated ranges, blocks allocated
ahead and never written, and punched ranges are holes; the end of the file is
a hole (lseek(2)). Checked by the writer and by a second mount.
"""
import errno
import os

import pytest

from conftest import MiB, fallocate

K = 1024
PUNCH = 0x01 | 0x02       # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


def seeks(path):
    """{(whence, offset): result or 'ENXIO'} for the offsets the test asks about."""
    fd = os.open(path, os.O_RDONLY)
    out = {}
    try:
        for whence in (os.SEEK_DATA, os.SEEK_HOLE):
            for off in (0, 100 * K, 128 * K, 256 * K, MiB, 3 * MiB, 4 * MiB - 1, 4 * MiB):
                try:
                    out[(whence, off)] = os.lseek(fd, off, whence)
                except OSError as e:
                    assert e.errno == errno.ENXIO, (whence, off, e)
                    out[(whence, off)] = "ENXIO"
    finally:
        os.close(fd)
    return out


WANT = {
    (os.SEEK_DATA, 0): 0, (os.SEEK_HOLE, 0): 128 * K,
    (os.SEEK_DATA, 100 * K): 100 * K, (os.SEEK_HOLE, 100 * K): 128 * K,
    (os.SEEK_DATA, 128 * K): 256 * K, (os.SEEK_HOLE, 128 * K): 128 * K,
    (os.SEEK_DATA, 256 * K): 256 * K, (os.SEEK_HOLE, 256 * K): MiB,
    (os.SEEK_DATA, MiB): 3 * MiB, (os.SEEK_HOLE, MiB): MiB,
    (os.SEEK_DATA, 3 * MiB): 3 * MiB, (os.SEEK_HOLE, 3 * MiB): 4 * MiB,
    (os.SEEK_DATA, 4 * MiB - 1): 4 * MiB - 1, (os.SEEK_HOLE, 4 * MiB - 1): 4 * MiB,
    (os.SEEK_DATA, 4 * MiB): "ENXIO", (os.SEEK_HOLE, 4 * MiB): "ENXIO",
}


def test_seek_data_and_hole_follow_the_layout(cluster, workdir, other_mount):
    path = workdir / "sparse"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fd, os.urandom(MiB), 0)            # data [0, 1M), then a hole
        os.pwrite(fd, os.urandom(MiB), 3 * MiB)      # data [3M, 4M)
        os.fsync(fd)
        fallocate(fd, PUNCH, 128 * K, 128 * K)       # a hole [128K, 256K)
        assert os.fstat(fd).st_size == 4 * MiB
        got = {}
        for whence, off in WANT:
            try:
                got[(whence, off)] = os.lseek(fd, off, whence)
            except OSError as e:
                assert e.errno == errno.ENXIO
                got[(whence, off)] = "ENXIO"
        assert got == WANT, "the writer's view"
    finally:
        os.close(fd)
    assert seeks(path) == WANT, "a fresh open's view"
    other = other_mount / workdir.name / "sparse"
    assert seeks(other) == WANT, "a second mount's view"


def test_keep_size_blocks_survive_the_last_close(cluster, workdir):
    """fallocate(KEEP_SIZE) past the end stays allocated after close, as on
    ext4 and XFS; what writes allocated ahead speculatively does not."""
    kept = workdir / "kept"
    fd = os.open(kept, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"k" * 10000)
        fallocate(fd, 0x01, 0, 4 * MiB)          # FALLOC_FL_KEEP_SIZE
        assert os.fstat(fd).st_size == 10000
        assert os.fstat(fd).st_blocks * 512 >= 4 * MiB
    finally:
        os.close(fd)
    st = os.stat(kept)
    assert st.st_size == 10000
    assert st.st_blocks * 512 == 4 * MiB, st.st_blocks
    # a second open and close keeps them too; a truncate up to them uses them
    fd = os.open(kept, os.O_RDWR)
    os.close(fd)
    assert os.stat(kept).st_blocks * 512 == 4 * MiB
    os.truncate(kept, 2 * MiB)
    assert os.stat(kept).st_blocks * 512 == 2 * MiB
    with open(kept, "rb") as f:
        data = f.read()
    assert data == b"k" * 10000 + bytes(2 * MiB - 10000)

    written = workdir / "written"
    fd = os.open(written, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"w" * 10000)
    finally:
        os.close(fd)
    assert os.stat(written).st_blocks * 512 == 12 * K    # 3 blocks, nothing ahead


def test_zero_range_keeps_the_blocks(cluster, workdir):
    """FALLOC_FL_ZERO_RANGE zeroes, and the range stays allocated (later writes
    there find room, as fallocate(2) promises); PUNCH_HOLE frees it."""
    path = workdir / "zeroed"
    data = os.urandom(MiB)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
        full = os.fstat(fd).st_blocks
        assert full * 512 == MiB, full
        fallocate(fd, 0x10, 1000, MiB - 5000)              # FALLOC_FL_ZERO_RANGE
        assert os.fstat(fd).st_blocks == full, os.fstat(fd).st_blocks
        assert os.fstat(fd).st_size == MiB
        fallocate(fd, PUNCH, 8 * K, 64 * K)
        assert os.fstat(fd).st_blocks * 512 == MiB - 64 * K
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        got = f.read()
    assert got == data[:1000] + bytes(MiB - 5000) + data[MiB - 4000:]
