# SPDX-License-Identifier: MIT
"""copy_file_range done between the I/O servers (COPY, op 70), not through the client.

What these tests prove, on real clusters:
  - through the mount (os.copy_file_range on rdfs-fuse): the destination holds
    exactly the source's bytes for aligned and unaligned offsets and lengths
    (1 byte, 4095/4097 across block edges, 9 MiB + 1234 striped over both I/O
    servers), copied into the middle of a destination (the bytes around it are
    unchanged) or past its end (the gap reads as zeros, the size grows), right
    after unflushed writes of the source, after another client replaced both
    files (stale layouts: ESTALE, fetched again), as another uid, on a node-key
    mount, and (by the kernel's own copy) across two clients; checked through the
    writer's cache, by a second client (other_mount) while the writer still has
    the files open, and by both after close;
  - holes: a punched range of the source becomes a hole of the destination over
    data it had, at an aligned or unaligned offset (zeros, lseek SEEK_HOLE finds
    it, fewer st_blocks than a dense file), and a copy ending in a source hole
    still sets the size; a never-written range (blocks allocated ahead that lseek
    calls a hole) becomes a hole too;
  - the short and error answers of copy_file_range(2): 0 at or past the source's
    EOF, a short count up to EOF, the same file without overlap works, with
    overlap EINVAL, wrong open modes EBADF (most of these the kernel answers
    before the call reaches rdfs-fuse: said where);
  - the bytes do not pass through the client: a 64 MiB copy moves far less than
    64 MiB through rdfs-fuse's read/write calls (/proc/PID/io), where a plain
    read+write copy moves more than 64 MiB each way;
  - afterwards `rdfs fsck` is clean, and the connections to the I/O servers keep
    serving (a COPY rewritten into a WRITE used to pause its connection for good);
  - over the wire (rdfswire.py), as a client: a COPY with another node's source
    capability, or one with its holder rewritten, is refused with EACCES; a
    destination capability without WRITE gets EACCES; a source capability from
    before a truncate gets ESTALE; malformed CopyReqs get an error status; in
    every case the destination is unchanged and the I/O server goes on serving.
    A COPY with the client's own capabilities does copy (the control that makes
    the refusals mean something);
  - the client cannot choose where the destination server logs in with the
    server key (the handshake binds no server identity, so a client-named
    address could relay that login to the metaserver): a source URL in the
    request (the field it once had) is ignored, nothing connects to it, and the
    source is the server the capability names.
"""
import ctypes
import errno
import json
import os
import socket
import subprocess
import threading
import time

import pytest

import rdfswire as w
from conftest import MiB, assert_bytes_equal, drop_cache, fallocate, fuse_only, plain_wire
from test_trust import (cap_fields, client_secret, connect, first, ino_of, io_read_req,
                        ioserver_ports, layout, mount_node, node_add, node_name, write_file)

OP_COPY = 70
OP_NODE_LIST = 41
BLK = 4096
K = 1024
COPY_MAX = 4 * MiB
ROOT = w.cred(0, 0)
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02

EACCES, EINVAL, EBADMSG, EIO, ESTALE = (-errno.EACCES, -errno.EINVAL, -errno.EBADMSG,
                                       -errno.EIO, -errno.ESTALE)


# ------------------------------------------------------------------ helpers
def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def copy_range(fin, fout, n, off_in, off_out):
    """copy_file_range until @n bytes are copied or it returns 0; the total."""
    total = 0
    while total < n:
        k = os.copy_file_range(fin, fout, n - total, off_in + total, off_out + total)
        if k == 0:
            break
        total += k
    return total


def copy_file(src, dst, n, off_in, off_out, dst_flags=os.O_RDWR | os.O_CREAT):
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, dst_flags, 0o644)
    try:
        return copy_range(fi, fo, n, off_in, off_out)
    finally:
        os.close(fi)
        os.close(fo)


def expected_after(dst_before, src, off_in, n, off_out):
    """What the destination must hold after copying src[off_in:off_in+n] to off_out."""
    chunk = src[off_in:off_in + n]
    out = bytearray(dst_before)
    if len(out) < off_out:
        out += b"\0" * (off_out - len(out))
    out[off_out:off_out + len(chunk)] = chunk
    return bytes(out)


def check_both_mounts(path, want, other_mount, mnt, what):
    """@path reads @want through the writer's mount (as it has it cached, then from
    the file system) and through the second client."""
    assert_bytes_equal(want, read_all(path), what + " (writer's mount, its cache)")
    drop_cache(path)
    assert_bytes_equal(want, read_all(path), what + " (writer's mount)")
    other = other_mount / path.relative_to(mnt)
    assert os.stat(other).st_size == len(want), \
        "%s: size %d on the second mount, want %d" % (what, os.stat(other).st_size, len(want))
    assert_bytes_equal(want, read_all(other), what + " (second mount)")


def servers_of(c, path, length):
    """The set of I/O server ids that hold @path's bytes [0, length): `rdfs layout`,
    which also works on a cluster that speaks only TLS."""
    rel = "/" + os.path.relpath(path, c.mnt)
    servers = set()
    for line in c.rdfs("layout", rel).stdout.splitlines():
        f = line.split()
        if len(f) == 5 and f[0].isdigit() and f[4] == "written" and int(f[0]) < length:
            servers.add(int(f[2]))
    return servers


def server_ids(c):
    """The registered I/O servers' ids, from `rdfs status` (any transport)."""
    ids = set()
    for line in c.rdfs("status").stdout.splitlines():
        f = line.split()
        if len(f) > 3 and f[0].isdigit() and "://" in f[2]:
            ids.add(int(f[0]))
    assert len(ids) == c.n_io, "rdfs status lists %s" % sorted(ids)
    return ids


def fsck_clean(c, what):
    p = c.rdfs("fsck", "--json", check=False, timeout=300)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("%s: rdfs fsck printed no JSON (exit %d):\n%s\n%s"
                             % (what, p.returncode, p.stdout, p.stderr))
    assert p.returncode == 0 and rep["problems"] == 0, \
        "%s: rdfs fsck exit %d: %s" % (what, p.returncode, json.dumps(rep))
    return rep


# ------------------------------------------------------------------ 1 byte for byte
# (source size, off_in, length, destination size, off_out)
CASES = {
    "whole-9MiB+1234":          (9 * MiB + 1234, 0, 9 * MiB + 1234, 0, 0),
    "unaligned-past-dst-end":   (3 * MiB + 5, 12345, 3 * MiB - 12345 + 5, MiB + 3,
                                 MiB + 3 + 777),
    "one-byte":                 (8192, 4095, 1, 8192, 4097),
    "4095-cross":               (3 * BLK, 4095, 4097, 4 * BLK, 1),
    "4097-cross":               (3 * BLK, 1, 4097, 4 * BLK, 4095),
    "into-the-middle":          (5 * MiB + 77, 100, 4 * MiB + 9000, 11 * MiB, 3 * MiB + 1234),
    "aligned-mid-chunks":       (6 * MiB, MiB, 4 * MiB, 6 * MiB, 2 * MiB),
    "over-5MiB-pieces":         (6 * MiB, 3000, 5 * MiB + 4096 + 3, 2 * MiB, 2 * MiB - 7),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_copy_is_byte_for_byte(cluster, workdir, other_mount, case):
    """The destination is read through the writer's mount before the copy (so its
    caches hold the old bytes), copied into, and read again: through that cache, by the
    second client while the writer still has both files open (the size and bytes are
    on the servers when the call returns), and by both after close."""
    c = cluster
    src_size, off_in, n, dst_size, off_out = CASES[case]
    src_data = os.urandom(src_size)
    dst_data = os.urandom(dst_size)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, src_data)
    write_file(dst, dst_data)
    want = expected_after(dst_data, src_data, off_in, n, off_out)
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_RDWR)
    try:
        assert os.pread(fo, dst_size + 1, 0) == dst_data
        got = copy_range(fi, fo, n, off_in, off_out)
        assert got == n, "%s: copy_file_range copied %d of %d bytes" % (case, got, n)
        assert os.fstat(fo).st_size == len(want)
        assert_bytes_equal(want, os.pread(fo, len(want) + 1, 0), case + " (writer's open file)")
        other = other_mount / dst.relative_to(c.mnt)
        assert os.stat(other).st_size == len(want), "%s: second client sees size %d, not %d" \
            % (case, os.stat(other).st_size, len(want))
        assert_bytes_equal(want, read_all(other), case + " (second client, writer still open)")
    finally:
        os.close(fi)
        os.close(fo)
    check_both_mounts(dst, want, other_mount, c.mnt, case)
    # the source is untouched
    check_both_mounts(src, src_data, other_mount, c.mnt, case + " source")


def test_striped_copy_spans_both_ioservers(cluster, workdir, other_mount):
    """A 9 MiB + 1234 source in 1 MiB chunks sits on both I/O servers; so does its copy."""
    c = cluster
    data = os.urandom(9 * MiB + 1234)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, data)
    assert servers_of(c, src, len(data)) == server_ids(c), \
        "the source is not striped over every I/O server"
    assert copy_file(src, dst, len(data), 0, 0) == len(data)
    assert servers_of(c, dst, len(data)) == server_ids(c)
    check_both_mounts(dst, data, other_mount, c.mnt, "striped copy")


def test_copy_right_after_unflushed_writes(cluster, workdir, other_mount):
    """The source's own writes still in the client (no fsync, file still open) are copied."""
    c = cluster
    data = os.urandom(2 * MiB + 333)
    src, dst = workdir / "src", workdir / "dst"
    fs = os.open(src, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fs, data)
        assert copy_range(fs, fd, len(data), 0, 0) == len(data)
        # and a write to the destination right after lands after the copy
        os.pwrite(fd, b"Z" * 10, 5)
    finally:
        os.close(fs)
        os.close(fd)
    want = data[:5] + b"Z" * 10 + data[15:]
    check_both_mounts(dst, want, other_mount, c.mnt, "copy of unflushed writes")


def test_copy_extending_destination_within_the_same_file(cluster, workdir, other_mount):
    """Same file, ranges apart: [0, 1 MiB + 5) to 3 MiB + 100, past the end (2 MiB)."""
    c = cluster
    data = os.urandom(2 * MiB)
    p = workdir / "f"
    write_file(p, data)
    fd = os.open(p, os.O_RDWR)
    try:
        assert copy_range(fd, fd, MiB + 5, 0, 3 * MiB + 100) == MiB + 5
        # backwards too, inside the file
        assert copy_range(fd, fd, 4097, MiB + 10, 7) == 4097
    finally:
        os.close(fd)
    want = expected_after(data, data, 0, MiB + 5, 3 * MiB + 100)
    want = expected_after(want, want, MiB + 10, 4097, 7)
    check_both_mounts(p, want, other_mount, c.mnt, "same-file copy")


def test_copy_from_another_clients_mount(cluster, workdir, other_mount):
    """Source opened on the second client, destination on the first: two superblocks.
    The kernel does not hand such a copy to rdfs-fuse (FUSE answers EXDEV, the VFS
    falls back to its own splice copy); whatever the path, the bytes are right."""
    c = cluster
    data = os.urandom(3 * MiB + 5)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, data)
    write_file(dst, b"q" * (4 * MiB))
    fi = os.open(other_mount / src.relative_to(c.mnt), os.O_RDONLY)
    fo = os.open(dst, os.O_RDWR)
    try:
        assert copy_range(fi, fo, len(data), 0, 1000) == len(data)
    finally:
        os.close(fi)
        os.close(fo)
    check_both_mounts(dst, expected_after(b"q" * (4 * MiB), data, 0, len(data), 1000),
                      other_mount, c.mnt, "copy across two clients")


def test_copy_after_another_client_replaced_both_files(cluster, workdir, other_mount):
    """The writer copied once (its layouts of both files cached); the second client then
    truncates both files and writes them anew (the old capabilities are fenced). The
    next copy gets ESTALE from the servers, fetches the layouts again and copies the new
    bytes onto the new blocks."""
    c = cluster
    old, new = os.urandom(2 * MiB), os.urandom(2 * MiB)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, old)
    write_file(dst, b"q" * (2 * MiB))
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_RDWR)
    try:
        assert os.pread(fi, 2 * MiB, 0) == old
        assert copy_range(fi, fo, 2 * MiB, 0, 0) == 2 * MiB
        for p, data in ((src, new), (dst, b"r" * (2 * MiB))):
            with open(other_mount / p.relative_to(c.mnt), "r+b") as f:
                f.truncate(0)
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        assert copy_range(fi, fo, 2 * MiB, 0, 0) == 2 * MiB
    finally:
        os.close(fi)
        os.close(fo)
    check_both_mounts(dst, new, other_mount, c.mnt, "copy after both files were replaced")


def test_copy_as_another_user(cluster, workdir, other_mount):
    """uid 1000 copies a 0644 file of root's into its own file: read capability of the
    source, write capability of the destination, both its own."""
    c = cluster
    os.chmod(workdir, 0o777)
    data = os.urandom(3 * MiB + 11)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, data)
    os.chmod(src, 0o644)
    pid = os.fork()
    if pid == 0:                                        # pragma: no cover - the child
        code = 1
        try:
            os.setgid(1000)
            os.setuid(1000)
            code = 0 if copy_file(src, dst, len(data), 0, 0) == len(data) else 2
        except BaseException:                           # noqa: BLE001
            code = 3
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, "copy as uid 1000: child exit %d" \
        % os.waitstatus_to_exitcode(st)
    assert os.stat(dst).st_uid == 1000
    check_both_mounts(dst, data, other_mount, c.mnt, "copy as uid 1000")


@fuse_only("mounts rdfs-fuse with a node key")
def test_copy_on_a_node_key_mount(cluster, workdir, other_mount):
    """A mount with its own node key (capabilities held by node:NAME:1): the destination's
    I/O server takes the source capability as that node's, the source's I/O server
    serves it to the destination's as the node's."""
    c = cluster
    name = node_name("cpm")
    key_file, _, _ = node_add(c, name, "--squash", "none")
    m = mount_node(c, name, key_file)
    try:
        data = os.urandom(5 * MiB + 3)
        src, dst = workdir / "src", workdir / "dst"
        write_file(src, data)
        n = copy_file(m / src.relative_to(c.mnt), m / dst.relative_to(c.mnt), len(data), 0, 0)
        assert n == len(data)
    finally:
        c.unmount(m)
    check_both_mounts(dst, data, other_mount, c.mnt, "copy on a node mount")


# ------------------------------------------------------------------ 2 holes
def data_ranges(path):
    """[(start, end)] of data per lseek SEEK_DATA/SEEK_HOLE."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        off = 0
        while off < size:
            try:
                d = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                assert e.errno == errno.ENXIO
                break
            h = os.lseek(fd, d, os.SEEK_HOLE)
            out.append((d, h))
            off = h
    finally:
        os.close(fd)
    return out


@pytest.mark.parametrize("how,off_out", [("punched", 0), ("punched", 1000),
                                         ("never-written", 0)])
def test_source_holes_become_holes(cluster, workdir, other_mount, how, off_out):
    """A 6 MiB source whose [2, 4) MiB is a hole (punched, or never written: seek+write,
    so blocks allocated ahead there stay unwritten) copied whole to @off_out of a 7 MiB
    destination of 0xff: that range reads as zeros on both mounts, lseek finds the
    hole (the whole blocks of it), and the destination has that many fewer blocks
    than a dense file."""
    c = cluster
    size = 6 * MiB
    hole = (2 * MiB, 4 * MiB)
    data = bytearray(os.urandom(size))
    src, dst, full = workdir / "src", workdir / "dst", workdir / "full"
    if how == "punched":
        write_file(src, bytes(data))
        fd = os.open(src, os.O_RDWR)
        try:
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, hole[0], hole[1] - hole[0])
            os.fsync(fd)
        finally:
            os.close(fd)
    else:
        fd = os.open(src, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.pwrite(fd, bytes(data[:hole[0]]), 0)
            os.pwrite(fd, bytes(data[hole[1]:]), hole[1])
            os.fsync(fd)
        finally:
            os.close(fd)
    data[hole[0]:hole[1]] = bytes(hole[1] - hole[0])
    assert read_all(src) == bytes(data)
    # a destination full of data, and a full (dense) copy to compare blocks with
    dsize = size + MiB
    write_file(dst, b"\xff" * dsize)
    write_file(full, os.urandom(dsize))
    assert copy_file(src, dst, size, 0, off_out) == size
    want = expected_after(b"\xff" * dsize, bytes(data), 0, size, off_out)
    check_both_mounts(dst, want, other_mount, c.mnt, "copy of a %s hole" % how)
    # the whole blocks of the hole where it landed
    dhole = ((hole[0] + off_out + BLK - 1) // BLK * BLK, (hole[1] + off_out) // BLK * BLK)
    ranges = data_ranges(dst)
    assert ranges == [(0, dhole[0]), (dhole[1], dsize)], \
        "the destination's data per SEEK_DATA/SEEK_HOLE: %r, want the hole %r" % (ranges, dhole)
    fd = os.open(dst, os.O_RDONLY)
    try:
        assert os.lseek(fd, 0, os.SEEK_HOLE) == dhole[0]
    finally:
        os.close(fd)
    st_dst, st_full = os.stat(dst), os.stat(full)
    assert st_dst.st_blocks * 512 <= st_full.st_blocks * 512 - (dhole[1] - dhole[0]), \
        "destination has %d blocks, a dense file %d: the hole holds blocks" % (
            st_dst.st_blocks, st_full.st_blocks)
    fsck_clean(c, "after copying a hole")


def test_copy_ending_in_a_hole_sets_the_size(cluster, workdir, other_mount):
    """A source whose last MiB is a hole (truncate up), copied into a new file and into
    an offset of an unaligned one: the size is off_out + length, the tail zeros."""
    c = cluster
    head = os.urandom(MiB + 17)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, head)
    os.truncate(src, 3 * MiB)
    want_src = head + bytes(3 * MiB - len(head))
    assert copy_file(src, dst, 3 * MiB, 0, 0) == 3 * MiB
    check_both_mounts(dst, want_src, other_mount, c.mnt, "copy ending in a hole")
    # all-hole source into the middle of nothing
    empty = workdir / "empty"
    with open(empty, "wb") as f:
        f.truncate(2 * MiB)
    dst2 = workdir / "dst2"
    write_file(dst2, b"a" * 5000)
    assert copy_file(empty, dst2, 2 * MiB, 0, 9000) == 2 * MiB
    check_both_mounts(dst2, b"a" * 5000 + bytes(4000 + 2 * MiB), other_mount, c.mnt,
                      "copy of an all-hole source past the end")


# ------------------------------------------------------------------ 3 short and errors
def test_short_counts_at_and_past_eof(cluster, workdir):
    data = os.urandom(10000)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, data)
    write_file(dst, b"d" * 100)
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_RDWR)
    try:
        # at and past EOF: 0 (the kernel shortens the copy to its idea of the size
        # and answers 0 itself; rdfs_copy_range would answer 0 too)
        assert os.copy_file_range(fi, fo, 100, 10000, 0) == 0
        assert os.copy_file_range(fi, fo, 100, 10001, 0) == 0
        assert os.copy_file_range(fi, fo, 100, 1 << 40, 0) == 0
        # zero length: 0
        assert os.copy_file_range(fi, fo, 0, 0, 0) == 0
        # a length past EOF copies up to EOF
        assert os.copy_file_range(fi, fo, 1 << 30, 9000, 50) == 1000
    finally:
        os.close(fi)
        os.close(fo)
    assert read_all(dst) == b"d" * 50 + data[9000:]


def test_same_file_overlap_is_einval(cluster, workdir):
    data = os.urandom(3 * BLK)
    p = workdir / "f"
    write_file(p, data)
    fd = os.open(p, os.O_RDWR)
    try:
        # (answered by the kernel: generic_copy_file_checks refuses overlap in one inode)
        for off_in, n, off_out in ((0, 2 * BLK, BLK), (BLK, 2 * BLK, 0), (100, 10, 105),
                                   (0, 3 * BLK, 0)):
            with pytest.raises(OSError) as e:
                os.copy_file_range(fd, fd, n, off_in, off_out)
            assert e.value.errno == errno.EINVAL, (off_in, n, off_out, e.value)
        # adjacent but not overlapping: fine
        assert os.copy_file_range(fd, fd, BLK, 0, BLK) == BLK
    finally:
        os.close(fd)
    assert read_all(p) == data[:BLK] + data[:BLK] + data[2 * BLK:]


def test_wrong_open_modes_are_ebadf(cluster, workdir):
    """Destination O_RDONLY, source O_WRONLY, destination O_APPEND: EBADF. The kernel
    answers all three (generic_copy_file_checks: FMODE_READ/FMODE_WRITE/O_APPEND)
    before FUSE sends COPY_FILE_RANGE; rdfs_copy_range checks the same itself."""
    data = os.urandom(8192)
    src, dst = workdir / "src", workdir / "dst"
    write_file(src, data)
    write_file(dst, b"d" * 8192)
    for sflags, dflags in ((os.O_RDONLY, os.O_RDONLY), (os.O_WRONLY, os.O_RDWR),
                           (os.O_RDONLY, os.O_WRONLY | os.O_APPEND),
                           (os.O_RDWR, os.O_RDWR | os.O_APPEND)):
        fi, fo = os.open(src, sflags), os.open(dst, dflags)
        try:
            with pytest.raises(OSError) as e:
                os.copy_file_range(fi, fo, 4096, 0, 0)
            assert e.value.errno == errno.EBADF, (sflags, dflags, e.value)
        finally:
            os.close(fi)
            os.close(fo)
    assert read_all(dst) == b"d" * 8192
    # flags other than 0: EINVAL (the kernel's answer too; rdfs-fuse refuses them as well)
    fi, fo = os.open(src, os.O_RDONLY), os.open(dst, os.O_RDWR)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.copy_file_range.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        libc.copy_file_range.restype = ctypes.c_ssize_t
        off_in, off_out = ctypes.c_int64(0), ctypes.c_int64(0)
        r = libc.copy_file_range(fi, ctypes.byref(off_in), fo, ctypes.byref(off_out), 4096, 1)
        assert r == -1 and ctypes.get_errno() == errno.EINVAL, (r, ctypes.get_errno())
    finally:
        os.close(fi)
        os.close(fo)
    assert read_all(dst) == b"d" * 8192
    # what is allowed: a write-only destination, a read-write source
    for sflags, dflags in ((os.O_RDONLY, os.O_WRONLY), (os.O_RDWR, os.O_WRONLY)):
        fi, fo = os.open(src, sflags), os.open(dst, dflags)
        try:
            assert os.copy_file_range(fi, fo, 5000, 100, 7) == 5000
        finally:
            os.close(fi)
            os.close(fo)
    assert read_all(dst) == b"d" * 7 + data[100:5100] + b"d" * (8192 - 5007)


# ------------------------------------------------------------------ 4 not through the client
def proc_io(pid):
    with open("/proc/%d/io" % pid) as f:
        d = dict(line.split(": ") for line in f.read().splitlines())
    return int(d["rchar"]), int(d["wchar"])


def fuse_pid(c):
    with open(c.dir / "state.json") as f:
        return json.load(f)["procs"]["fuse"]["pid"]


@fuse_only("measures the rdfs-fuse process")
def test_copy_moves_no_bytes_through_the_client(cluster, workdir):
    c = cluster
    size = 64 * MiB
    src, dst, plain = workdir / "src", workdir / "dst", workdir / "plain"
    with open(src, "wb") as f:
        for _ in range(size // (4 * MiB)):
            f.write(os.urandom(4 * MiB))
        f.flush()
        os.fsync(f.fileno())
    drop_cache(src)
    pid = fuse_pid(c)

    r0, w0 = proc_io(pid)
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert copy_range(fi, fo, size, 0, 0) == size
        os.fsync(fo)
    finally:
        os.close(fi)
        os.close(fo)
    r1, w1 = proc_io(pid)
    copy_r, copy_w = r1 - r0, w1 - w0

    drop_cache(src)
    r0, w0 = proc_io(pid)
    with open(src, "rb", buffering=0) as fi, open(plain, "wb", buffering=0) as fo:
        while True:
            b = fi.read(MiB)
            if not b:
                break
            fo.write(b)
        os.fsync(fo.fileno())
    r1, w1 = proc_io(pid)
    plain_r, plain_w = r1 - r0, w1 - w0

    what = ("rdfs-fuse rchar/wchar: COPY +%d/+%d, plain read+write +%d/+%d, for %d bytes"
            % (copy_r, copy_w, plain_r, plain_w, size))
    print(what)
    assert plain_r > size and plain_w > size, "the measure does not see the bytes: " + what
    assert copy_r < size // 8 and copy_w < size // 8, "the bytes went through the client: " + what
    drop_cache(dst)
    assert read_all(dst) == read_all(src)


# ------------------------------------------------------------------ 5 consistency
def test_fsck_clean_and_writes_go_on_after_copies(cluster, workdir, other_mount):
    """Many COPYs on the mount's connections, then plain writes and reads on the same
    I/O servers (over the same connections) complete, and fsck finds nothing."""
    c = cluster
    src, dst = workdir / "src", workdir / "dst"
    data = os.urandom(4 * MiB + 3)
    write_file(src, data)
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(40):
            off = (i * 100003) % (len(data) - 70000)
            assert os.copy_file_range(fi, fo, 70000, off, i * 70000) == 70000
    finally:
        os.close(fi)
        os.close(fo)
    # writes right after, to both I/O servers, from a child with a deadline (a paused
    # connection would leave it waiting forever)
    after = workdir / "after"
    code = ("import os,sys\nd=os.urandom(8<<20)\nf=open(sys.argv[1],'wb')\nf.write(d)\n"
            "f.flush();os.fsync(f.fileno());f.close()\n"
            "g=open(sys.argv[2],'r+b');g.write(b'X'*4096);g.flush();os.fsync(g.fileno())\n"
            "assert open(sys.argv[1],'rb').read()==d\n")
    p = subprocess.run(["python3", "-c", code, str(after), str(dst)], timeout=120,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout
    want = bytearray(40 * 70000)
    for i in range(40):
        off = (i * 100003) % (len(data) - 70000)
        want[i * 70000:(i + 1) * 70000] = data[off:off + 70000]
    want[:4096] = b"X" * 4096
    check_both_mounts(dst, bytes(want), other_mount, c.mnt, "40 COPYs then a write")
    fsck_clean(c, "after copies")


# ------------------------------------------------------------------ 6 over the wire
def io_req(cap, block, nblocks, head, length, stable=1):
    return (w.field_bytes(1, cap) + w.field_varint(2, block) + w.field_varint(3, nblocks)
            + w.field_varint(4, head) + w.field_varint(5, length)
            + w.field_varint(6, stable))


def copy_src(cap, block, nblocks, head, url=None):
    """A CopySrc; @url only to show that field 5 (once the source URL) is ignored."""
    return (w.field_bytes(1, cap) + w.field_varint(2, block) + w.field_varint(3, nblocks)
            + w.field_varint(4, head) + (w.field_bytes(5, url) if url else b""))


def copy_req(dst=None, src=None):
    return ((w.field_bytes(1, dst) if dst is not None else b"")
            + (w.field_bytes(2, src) if src is not None else b""))


def with_holder(cap, holder):
    """@cap with field 7 (holder) replaced, every other field (the MAC too) kept."""
    d = w.decode(cap)
    d[7] = [holder.encode()]
    out = b""
    for num in sorted(d):
        for v in d[num]:
            out += w.field_varint(num, v) if isinstance(v, int) else w.field_bytes(num, v)
    return out


class Wire:
    """A source and a destination file (written through the mount, so their blocks
    are written), their first extents and capabilities on one connection."""

    def __init__(self, c, workdir, key=None, claim="client", src_cred=ROOT, dst_cred=ROOT,
                 dst_allocate=True, size=MiB):
        self.c = c
        self.src_data = os.urandom(size)
        self.dst_data = os.urandom(size)
        self.src, self.dst = workdir / "wsrc", workdir / "wdst"
        write_file(self.src, self.src_data)
        write_file(self.dst, self.dst_data)
        os.chmod(self.src, 0o644)
        os.chmod(self.dst, 0o644)
        self.key = key or client_secret(c)
        self.claim = claim
        self.ports = ioserver_ports(c)
        self.src_ext, self.src_cap = self.extent(self.src, src_cred, False)
        self.dst_ext, self.dst_cap = self.extent(self.dst, dst_cred, dst_allocate)
        self.dst_port = self.ports[self.dst_ext["server"]]

    def extent(self, path, cr, allocate):
        ms = connect(self.c.port, self.key, self.claim)
        try:
            status, lay = layout(ms, ino_of(ms, self.c, path), MiB, cr, allocate=allocate)
        finally:
            ms.close()
        assert status == 0, "LAYOUT of %s: %d" % (path, status)
        ext = [e for e in lay["extents"] if e["offset"] == 0][0]
        assert not ext["unwritten"] and ext["length"] >= 64 * K, ext
        cap = next(cp for cp in lay["caps"] if cap_fields(cp)["server"] == ext["server"])
        return ext, cap

    def req(self, length=10000, src_head=123, dst_head=4000, src_cap=None, dst_cap=None,
            url=None, src_blocks=None):
        """A CopyReq: source bytes [src_head, +length) of the source's first extent to
        [dst_head, +length) of the destination's."""
        sb = src_blocks if src_blocks is not None else (src_head + length + BLK - 1) // BLK
        db = (dst_head + length + BLK - 1) // BLK
        dst = io_req(dst_cap or self.dst_cap, self.dst_ext["block"], db, dst_head, length)
        src = copy_src(src_cap or self.src_cap, self.src_ext["block"], sb, src_head, url)
        return copy_req(dst, src)

    def send(self, body, key=None, claim=None, timeout=60.0):
        io = connect(self.dst_port, key or self.key, claim or self.claim)
        try:
            status, _, _ = io.request(OP_COPY, body, timeout=timeout)
            return status, self.read_ok(io)
        finally:
            io.close()

    def read_ok(self, io):
        """A normal READ of the destination on the same connection right after: its status."""
        try:
            status, _, _ = io.request(w.OP_READ, io_read_req(self.dst_cap, self.dst_ext["block"],
                                                            1), timeout=30)
        except socket.timeout:
            return "no answer in 30 s"
        return status

    def dst_bytes(self):
        """The destination's first MiB as the servers have it (read with the dst cap)."""
        io = connect(self.dst_port, self.key, self.claim)
        try:
            status, _, got = io.request(w.OP_READ, io_read_req(
                self.dst_cap, self.dst_ext["block"], MiB // BLK), timeout=30)
        finally:
            io.close()
        assert status == 0, "READ of the destination: %d" % status
        return got

    def unchanged(self, what):
        assert_bytes_equal(self.dst_data, self.dst_bytes(), what + ": destination")
        drop_cache(self.dst)
        assert_bytes_equal(self.dst_data, read_all(self.dst)[:MiB], what + ": through the mount")


@plain_wire("a hostile client's own frames")
def test_wire_copy_with_own_capabilities_copies(cluster, workdir):
    """The control: a COPY naming the client's own capabilities copies (answered as the
    WRITE: status 0, IoReply length), and the next READ on the connection works."""
    c = cluster
    x = Wire(c, workdir)
    for src_head, dst_head, length in ((123, 4000, 10000), (0, 0, 256 * K), (4095, 1, 1)):
        io = connect(x.dst_port, x.key)
        try:
            status, body, _ = io.request(OP_COPY, x.req(length, src_head, dst_head), timeout=60)
            assert status == 0, "COPY with own capabilities: %d" % status
            assert first(w.decode(body), 1) == length, w.decode(body)
            assert x.read_ok(io) == 0
        finally:
            io.close()
        got = x.dst_bytes()
        want = bytearray(x.dst_data)
        want[dst_head:dst_head + length] = x.src_data[src_head:src_head + length]
        x.dst_data = bytes(want)
        assert_bytes_equal(x.dst_data, got, "destination after a wire COPY")


@plain_wire("a hostile client's own frames")
def test_wire_copy_with_another_nodes_source_capability_is_eacces(cluster, workdir):
    """(a) Node B names node A's source capability: EACCES, and nothing is written.
    The same capability with its holder rewritten to B (MAC now wrong): EACCES."""
    c = cluster
    _, claim_a, key_a = node_add(c, node_name("cpa"))
    _, claim_b, key_b = node_add(c, node_name("cpb"), "--squash", "none")
    x = Wire(c, workdir, key=key_b, claim=claim_b)
    a = Wire.__new__(Wire)
    a.__dict__.update(x.__dict__)
    a.key, a.claim = key_a, claim_a
    cap_a = a.extent(x.src, ROOT, False)[1]
    assert cap_fields(cap_a)["holder"] == claim_a
    assert cap_fields(x.src_cap)["holder"] == claim_b
    status, after = x.send(x.req(src_cap=cap_a))
    assert status == EACCES, "COPY with node A's source capability on B's connection: %d" % status
    assert after == 0
    forged = with_holder(cap_a, claim_b)
    assert cap_fields(forged)["holder"] == claim_b and cap_fields(forged)["ino"] == \
        cap_fields(cap_a)["ino"]
    status, after = x.send(x.req(src_cap=forged))
    assert status == EACCES, "COPY with a source capability whose holder was rewritten: %d" \
        % status
    assert after == 0
    # and a client-secret connection cannot use B's capabilities either
    status, _ = x.send(x.req(), key=client_secret(c), claim="client")
    assert status == EACCES, "COPY of node B's capabilities on a cluster-secret connection: %d" \
        % status
    x.unchanged("refused COPYs")
    # B's own capabilities do copy (so the refusals above were the holder's doing)
    status, _ = x.send(x.req(length=5000, src_head=0, dst_head=0))
    assert status == 0
    assert x.dst_bytes()[:5000] == x.src_data[:5000]


@plain_wire("a hostile client's own frames")
def test_wire_copy_into_a_read_only_destination_capability_is_eacces(cluster, workdir):
    """(b) uid 2000 may read the 0644 destination but not write it: COPY gets EACCES."""
    c = cluster
    x = Wire(c, workdir, dst_cred=w.cred(2000, 2000), dst_allocate=False)
    assert cap_fields(x.dst_cap)["rights"] == w.CAP_READ, cap_fields(x.dst_cap)
    for length in (10000, COPY_MAX - 123):
        status, after = x.send(x.req(length=min(length, MiB - 4000), src_head=123,
                                     dst_head=4000))
        assert status == EACCES, "COPY with a read-only destination capability: %d" % status
        assert after == 0
    x.unchanged("COPY without WRITE rights")


@plain_wire("a hostile client's own frames")
def test_wire_copy_with_a_stale_source_capability_is_estale(cluster, workdir):
    """(c) A source capability from before the source was truncated: ESTALE."""
    c = cluster
    x = Wire(c, workdir)
    status, _ = x.send(x.req(length=100, src_head=0, dst_head=0))
    assert status == 0, "the source capability did not work to begin with: %d" % status
    x.dst_data = x.dst_bytes()
    os.truncate(x.src, 0)
    status, after = x.send(x.req())
    assert status == ESTALE, "COPY with a source capability from before a truncate: %d" % status
    assert after == 0
    x.unchanged("COPY of a stale source")


MALFORMED = {
    "garbage":          lambda x: b"\xff\xfe\xfd\x07garbage",
    "empty":            lambda x: b"",
    "no-src":           lambda x: copy_req(dst=io_req(x.dst_cap, x.dst_ext["block"], 3, 0, 10000)),
    "no-dst":           lambda x: copy_req(src=copy_src(x.src_cap, x.src_ext["block"], 3, 0)),
    "no-src-cap":       lambda x: copy_req(io_req(x.dst_cap, x.dst_ext["block"], 3, 0, 10000),
                                           w.field_varint(2, x.src_ext["block"])
                                           + w.field_varint(3, 3)),
    "length-0":         lambda x: x.req(length=0, src_head=0, dst_head=0, src_blocks=0),
    "length-4MiB+1":    lambda x: x.req(length=COPY_MAX + 1, src_head=0, dst_head=0),
    "src-head-4096":    lambda x: x.req(length=100, src_head=4096, dst_head=0, src_blocks=2),
    "src-head-huge":    lambda x: x.req(length=100, src_head=1 << 31, dst_head=0, src_blocks=1),
    "src-blocks-wrong": lambda x: x.req(length=10000, src_head=0, dst_head=0, src_blocks=9),
}


@plain_wire("a hostile client's own frames")
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_wire_malformed_copy_gets_an_error_and_the_server_goes_on(cluster, workdir, case):
    """(d) Each malformed CopyReq gets an error status (not a hang, not a closed
    connection), a READ on the same connection right after works, and the
    destination is unchanged."""
    c = cluster
    x = Wire(c, workdir)
    status, after = x.send(MALFORMED[case](x))
    assert status < 0, "malformed COPY (%s) answered %d" % (case, status)
    assert status in (EINVAL, EBADMSG, EACCES), "malformed COPY (%s): %d" % (case, status)
    assert after == 0, "READ after the malformed COPY (%s): %d" % (case, after)
    x.unchanged("malformed COPY " + case)


# ------------------------------------------------------------------ no client-named login
@plain_wire("a hostile client's own frames")
def test_wire_copy_never_logs_in_where_the_client_says(fresh_cluster):
    """A client (cluster secret only) puts its own listener in the request as the
    source URL (field 5, the field a source URL once had) and stands ready to relay
    the metaserver's challenge to whoever connects. The I/O server ignores it: the
    COPY copies from the server the source capability names, nothing connects to
    the listener, and the client is still no "server" at the metaserver."""
    c = fresh_cluster
    x = Wire(c, c.mnt)
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    lst.settimeout(3)
    try:
        status, after = x.send(x.req(length=10000, src_head=0, dst_head=0,
                                     url="tcp://127.0.0.1:%d" % lst.getsockname()[1]))
        assert status == 0 and after == 0, "COPY with a client-named URL: %d" % status
        try:
            d, _ = lst.accept()
            d.close()
            pytest.fail("the I/O server connected to the client-named source URL")
        except socket.timeout:
            pass
    finally:
        lst.close()
    got = x.dst_bytes()
    assert_bytes_equal(x.src_data[:10000], got[:10000], "COPY from the named server")
    ms = connect(c.port, client_secret(c))
    try:
        assert w.call(ms, OP_NODE_LIST)[0] == -errno.EPERM
    finally:
        ms.close()
