# SPDX-License-Identifier: MIT
"""Taking blocks back: capabilities stop working when their blocks leave the file.

Issue 13's fencing, and issue 12's hole 2 (a capability outlived the blocks it
names: a client kept a WRITE capability, unlinked its file, and after the
blocks were reused read and overwrote another user's 0600 file). Each test keeps
a capability, makes the metaserver take its blocks or rights back, and replays
it at the I/O server over the wire: the answer must be -ESTALE (the client's
cue to fetch the layout again), never data; once rights are taken away (chmod
by the owner or by root, a named user's ACL entry removed by the owner), asking
the metaserver for a new layout is refused too (EACCES). Plus the space that a
file that is truncated and rewritten in place keeps (it used to grow without
bound while the file stayed open).
"""
import errno
import os
import signal
import stat
import subprocess

import pytest

import rdfswire as w
from conftest import MiB, drop_cache, listener_pid, wait_until
from test_trust import (cap_fields, client_secret, connect, ino_of, io_read_req,
                        ioserver_ports, layout, server_key, write_file)

ESTALE = -errno.ESTALE
ROOT = w.cred(0, 0)
OWNER = (1000, 1000)            # owns the files of the revocation tests
OTHER = (2000, 2000)            # is given rights to them, then loses them
OTHER_CRED = w.cred(*OTHER)


def io_write_req(cap, block, data):
    return (w.field_bytes(1, cap) + w.field_varint(2, block)
            + w.field_varint(3, (len(data) + 4095) // 4096) + w.field_varint(4, 0)
            + w.field_varint(5, len(data)) + w.field_varint(6, 1))


def cap_of(c, path, cr=ROOT, allocate=False, length=MiB):
    """(I/O server port, first extent, its capability) of @path from a raw LAYOUT."""
    ms = connect(c.port, client_secret(c))
    try:
        status, lay = layout(ms, ino_of(ms, c, path), length, cr, allocate=allocate)
        assert status == 0, "LAYOUT of %s: %d" % (path, status)
    finally:
        ms.close()
    ext = lay["extents"][0]
    cap = next(cp for cp in lay["caps"] if cap_fields(cp)["server"] == ext["server"])
    return ioserver_ports(c)[ext["server"]], ext, cap


def replay_read(c, port, ext, cap):
    """READ one block of @ext with @cap on a fresh connection: (status, data)."""
    io = connect(port, client_secret(c))
    try:
        status, _, data = io.request(w.OP_READ, io_read_req(cap, ext["block"], 1))
        return status, data
    finally:
        io.close()


def replay_write(c, port, ext, cap, data):
    io = connect(port, client_secret(c))
    try:
        status, _, _ = io.request(w.OP_WRITE, io_write_req(cap, ext["block"], data), data)
        return status
    finally:
        io.close()


def test_a_capability_kept_across_a_truncate_is_refused(cluster, workdir):
    c = cluster
    path = workdir / "f"
    data = os.urandom(MiB)
    write_file(path, data)
    port, ext, cap = cap_of(c, path)
    status, got = replay_read(c, port, ext, cap)
    assert status == 0 and got == data[:4096], "the capability did not work to begin with"

    os.truncate(path, 0)
    status, got = replay_read(c, port, ext, cap)
    assert status == ESTALE, "READ with a capability from before the truncate: %d" % status
    assert got == b""
    assert replay_write(c, port, ext, cap, b"x" * 4096) == ESTALE
    # the file's own client goes on through a fresh layout
    with open(path, "r+b") as f:
        f.write(b"after")
    with open(path, "rb") as f:
        assert f.read() == b"after"


def test_a_write_capability_of_an_unlinked_file_reaches_no_other_file(cluster, workdir):
    """Hole 2: keep a WRITE capability, unlink the file, try on the blocks' next owner."""
    c = cluster
    os.chmod(workdir, 0o777)
    mine = workdir / "mine"
    write_file(mine, b"m" * MiB)
    os.chown(mine, 1000, 1000)
    port, ext, cap = cap_of(c, mine, cr=w.cred(1000, 1000), allocate=True)
    assert cap_fields(cap)["rights"] & w.CAP_WRITE
    os.unlink(mine)
    # whatever file gets those blocks next: the old capability reaches nothing
    secret = workdir / "secret"
    write_file(secret, b"s" * (8 * MiB))
    os.chmod(secret, 0o600)
    status, got = replay_read(c, port, ext, cap)
    assert status == ESTALE and got == b"", "READ after unlink: %d, %d bytes" % (status,
                                                                               len(got))
    assert replay_write(c, port, ext, cap, b"x" * 4096) == ESTALE
    with open(secret, "rb") as f:
        assert f.read() == b"s" * (8 * MiB)


def assert_revoked(c, path, port, ext, cap, who):
    """@cap (of @who) reads and writes no more, and a new LAYOUT for @who is refused."""
    status, got = replay_read(c, port, ext, cap)
    assert status == ESTALE and got == b"", "READ with the old capability: %d" % status
    assert replay_write(c, port, ext, cap, b"x" * 4096) == ESTALE
    # and asking again is refused by the metaserver itself
    ms = connect(c.port, client_secret(c))
    try:
        status, _ = layout(ms, ino_of(ms, c, path), MiB, who, allocate=True)
        assert status == -errno.EACCES, "LAYOUT after the rights went: %d" % status
        status, _ = layout(ms, ino_of(ms, c, path), MiB, who)
        assert status == -errno.EACCES, "LAYOUT (read) after the rights went: %d" % status
    finally:
        ms.close()


def run_as(user, argv):
    """Run @argv as @user (uid, gid) with no supplementary groups; fail on failure."""
    p = subprocess.run([str(a) for a in argv], user=user[0], group=user[1], extra_groups=[],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, "%s as uid %d: exit %d: %s" % (" ".join(map(str, argv)),
                                                              user[0], p.returncode, p.stderr)
    return p.stdout


@pytest.mark.parametrize("by", ["owner", "root"])
def test_chmod_000_revokes_capabilities_issued_before(cluster, workdir, by):
    c = cluster
    os.chmod(workdir, 0o777)
    path = workdir / "f"
    write_file(path, b"p" * MiB)
    os.chown(path, *OWNER)
    os.chmod(path, 0o666)
    # uid 2000 may read and write it, and takes a capability
    port, ext, cap = cap_of(c, path, cr=OTHER_CRED, allocate=True)
    assert cap_fields(cap)["rights"] == w.CAP_READ | w.CAP_WRITE
    assert replay_read(c, port, ext, cap)[0] == 0
    if by == "owner":
        run_as(OWNER, ["chmod", "000", path])
    else:
        os.chmod(path, 0o000)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0
    assert_revoked(c, path, port, ext, cap, OTHER_CRED)
    with open(path, "rb") as f:
        assert f.read() == b"p" * MiB


def test_an_acl_entry_removed_by_the_owner_revokes_capabilities_issued_before(cluster, workdir):
    """ns_acl.c fences when an ACL change may take rights away: a named user's
    entry grants a non-owner read and write, the owner (not root) removes it
    with setfacl on the mount, and the capability it had is refused."""
    c = cluster
    os.chmod(workdir, 0o777)
    path = workdir / "f"
    write_file(path, b"q" * MiB)
    os.chown(path, *OWNER)
    os.chmod(path, 0o600)
    run_as(OWNER, ["setfacl", "-m", "u:%d:rw" % OTHER[0], path])
    port, ext, cap = cap_of(c, path, cr=OTHER_CRED, allocate=True)
    assert cap_fields(cap)["rights"] == w.CAP_READ | w.CAP_WRITE, \
        "the named-user entry did not grant read and write"
    assert replay_read(c, port, ext, cap)[0] == 0
    assert replay_write(c, port, ext, cap, b"w" * 4096) == 0

    run_as(OWNER, ["setfacl", "-x", "u:%d" % OTHER[0], path])
    assert "user:%d:" % OTHER[0] not in run_as(OWNER, ["getfacl", "-n", path])
    assert_revoked(c, path, port, ext, cap, OTHER_CRED)
    # the owner's own access is untouched (and sees the write made before)
    drop_cache(path)
    with open(path, "rb") as f:
        got = f.read()
    assert len(got) == MiB and got.count(b"w") == 4096 and got.count(b"q") == MiB - 4096


def test_a_metaserver_restart_fences_every_capability_issued_before(fresh_cluster):
    """The hold-back list of old was memory only: after a restart nothing was held."""
    c = fresh_cluster
    path = c.mnt / "f"
    write_file(path, b"r" * MiB)
    port, ext, cap = cap_of(c, path)
    assert replay_read(c, port, ext, cap)[0] == 0
    saved = c.kill9(c.port)
    c.restart(saved)
    c.wait_servers_up()
    status, got = replay_read(c, port, ext, cap)
    assert status == ESTALE and got == b"", "a capability of before the restart: %d" % status
    with open(path, "rb") as f:
        assert f.read() == b"r" * MiB


def test_a_file_fenced_before_a_metaserver_restart_reads_after_it(fresh_cluster):
    """Generations start again with a restarted metaserver: old fences must not refuse them."""
    c = fresh_cluster
    path = c.mnt / "f"
    write_file(path, b"a" * MiB)
    os.truncate(path, 4096)             # fenced: generation 1 on its servers
    write_file(c.mnt / "g", b"g" * MiB)
    with open(path, "r+b") as f:
        f.write(b"b" * 4096)
        os.fsync(f.fileno())
    saved = c.kill9(c.port)
    c.restart(saved)
    c.wait_servers_up()
    drop_cache(path)
    with open(path, "rb") as f:
        assert f.read() == b"b" * 4096
    with open(path, "r+b") as f:         # and written, and fenced again
        f.write(b"c" * 8192)
        os.fsync(f.fileno())
    os.truncate(path, 4096)
    drop_cache(path)
    with open(path, "rb") as f:
        assert f.read() == b"c" * 4096


def test_only_the_metaserver_may_fence(cluster):
    c = cluster
    body = (w.field_bytes(1, w.field_varint(1, 12345) + w.field_varint(2, 7))
            + w.field_varint(2, 1 << 62) + w.field_varint(3, 1))
    io = connect(c.ioserver_port(0), client_secret(c))
    try:
        assert io.request(69, body)[0] == -errno.EPERM
    finally:
        io.close()
    io = connect(c.ioserver_port(0), server_key(c), "server")
    try:
        assert io.request(69, body)[0] == 0
    finally:
        io.close()


def test_a_file_rewritten_in_place_keeps_no_space_it_no_longer_has(cluster, workdir):
    """Issue 13's loop: open once, then 200 x (pwrite 256 KiB, fsync, ftruncate 0).

    Before fencing the truncated blocks waited for the last close and
    allocate-ahead kept adding more: 2.9/6.1/12 GiB used after 50/100/200 rounds.
    """
    c = cluster
    st = os.statvfs(c.mnt)
    base = (st.f_blocks - st.f_bfree) * st.f_frsize
    buf = os.urandom(256 * 1024)
    fd = os.open(workdir / "log", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    worst = 0
    used = {}
    try:
        for i in range(1, 201):
            assert os.pwrite(fd, buf, 0) == len(buf)
            os.fsync(fd)
            os.ftruncate(fd, 0)
            st = os.statvfs(c.mnt)
            now = (st.f_blocks - st.f_bfree) * st.f_frsize - base
            worst = max(worst, now)
            if i in (50, 100, 200):
                used[i] = now
    finally:
        os.close(fd)
    print("used space over the start after 50/100/200 rounds: %s; worst %d KiB" % (
        ", ".join("%d KiB" % (used[k] // 1024) for k in (50, 100, 200)), worst // 1024))
    # a truncated file holds nothing: what is left is at most one round in flight
    assert worst <= 4 * MiB, "the rewrite loop kept %d KiB at worst" % (worst // 1024)
    wait_until(lambda: (lambda s: (s.f_blocks - s.f_bfree) * s.f_frsize - base)(
        os.statvfs(c.mnt)) <= 0, "the file's space to be back after close")


def test_a_punched_hole_frees_its_blocks_at_once_and_fences_them(cluster, workdir):
    """fallocate(PUNCH_HOLE): the blocks leave the file, open or not, and are free at once;
    a capability from before reaches them no more; the rest of the file is intact."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    c = cluster
    path = workdir / "holey"
    data = os.urandom(4 * MiB)
    write_file(path, data)
    port, ext, cap = cap_of(c, path, length=4 * MiB)
    fd = os.open(path, os.O_RDWR)
    try:
        blocks = os.fstat(fd).st_blocks
        st = os.statvfs(c.mnt)
        free0 = st.f_bfree * st.f_frsize
        # 3 MiB minus a byte at either end, from 100: blocks 1..767 go, 0 and 768 are zeroed in part
        off, length = 100, 3 * MiB
        assert libc.fallocate(fd, 0x01 | 0x02, off, length) == 0, os.strerror(ctypes.get_errno())
        want = data[:off] + bytes(length) + data[off + length:]
        assert os.pread(fd, 4 * MiB, 0) == want
        assert os.fstat(fd).st_size == 4 * MiB
        freed = (length + off) // 4096 - 1      # whole blocks inside the range
        assert os.fstat(fd).st_blocks == blocks - freed * 8
        st = os.statvfs(c.mnt)
        assert st.f_bfree * st.f_frsize - free0 == freed * 4096, "space not back at once"
    finally:
        os.close(fd)
    if ext["offset"] < off + length and ext["offset"] + ext["length"] > 4096:
        status, got = replay_read(c, port, ext, cap)
        assert status == ESTALE and got == b""
    with open(path, "rb") as f:
        assert f.read() == want
