# SPDX-License-Identifier: MIT
"""POSIX permissions as non-root users, through the mount (allow_other).

Each check runs in a forked child that drops to the user's uid/gid/groups with
setresuid/setresgid, and reports back the errno (or the result) of what it did.
"""
import errno
import os
import pickle
import stat
import time

import pytest

from conftest import fuse_only

ALICE = (12345, 12345)
BOB = (23456, 23456)
SHARED_GID = 4242


def _become(user, fn, groups):
    """In a child: become @user with @groups and run @fn(): ("ok", value),
    ("errno", n) or ("exception", text) for a bug in the test itself."""
    try:
        os.setgroups(list(groups))
        os.setresgid(user[1], user[1], user[1])
        os.setresuid(user[0], user[0], user[0])
        return ("ok", fn())
    except OSError as e:
        return ("errno", e.errno)
    except BaseException as e:
        return ("exception", repr(e))


def _in_child(body):
    """Run @body() in a forked child: (its pid, what it returned, unpickled;
    None if the child exec'd something or died instead of returning)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, pickle.dumps(body()))
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    return pid, pickle.loads(data) if data else None


def as_user(user, fn, groups=()):
    """Run @fn() as @user (uid, gid) with supplementary @groups.

    Returns ("ok", value) or ("errno", n).
    """
    _, res = _in_child(lambda: _become(user, fn, groups))
    if res is None:
        return ("ok", "no result from the child")
    assert res[0] != "exception", res[1]
    return res


def err(user, fn, groups=()):
    """The errno @fn fails with as @user, or None if it succeeds."""
    res = as_user(user, fn, groups)
    return res[1] if res[0] == "errno" else None


def ok(user, fn, groups=()):
    res = as_user(user, fn, groups)
    assert res[0] == "ok", "failed as uid %d: %s" % (user[0], os.strerror(res[1]))
    return res[1]


def create(path, mode=0o644):
    def fn():
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode))
    return fn


@pytest.fixture
def pdir(workdir):
    """A world-writable directory (without sticky bit) users can work in."""
    os.chmod(workdir, 0o777)
    return workdir


def test_private_directory_gives_eacces(pdir):
    d = pdir / "private"
    os.mkdir(d, 0o700)
    os.chmod(d, 0o700)
    (d / "f").write_bytes(b"secret")
    assert err(ALICE, lambda: os.listdir(d)) == errno.EACCES
    assert err(ALICE, lambda: open(d / "f", "rb").read()) == errno.EACCES
    assert err(ALICE, create(d / "new")) == errno.EACCES
    assert err(ALICE, lambda: os.stat(d / "f")) == errno.EACCES
    # Search permission only: lookups work, listing does not.
    os.chmod(d, 0o711)
    os.chmod(d / "f", 0o644)
    assert ok(ALICE, lambda: open(d / "f", "rb").read()) == b"secret"
    assert err(ALICE, lambda: os.listdir(d)) == errno.EACCES


def test_new_files_belong_to_their_creator(pdir):
    ok(ALICE, create(pdir / "a"))
    ok(ALICE, lambda: os.mkdir(pdir / "adir"))
    for name in ("a", "adir"):
        st = os.stat(pdir / name)
        assert (st.st_uid, st.st_gid) == ALICE, name
    # umask of the creating process applies (the kernel passes it on).
    def make_with_umask():
        os.umask(0o077)
        os.close(os.open(pdir / "m", os.O_CREAT | os.O_WRONLY, 0o666))
    ok(ALICE, make_with_umask)
    assert stat.S_IMODE(os.stat(pdir / "m").st_mode) == 0o600


def test_file_mode_bits(pdir):
    f = pdir / "f"
    ok(ALICE, create(f, 0o600))
    ok(ALICE, lambda: open(f, "wb").write(b"mine"))
    assert err(BOB, lambda: open(f, "rb").read()) == errno.EACCES
    assert err(BOB, lambda: open(f, "ab").write(b"x")) == errno.EACCES
    ok(ALICE, lambda: os.chmod(f, 0o644))
    assert ok(BOB, lambda: open(f, "rb").read()) == b"mine"
    assert err(BOB, lambda: open(f, "ab").write(b"x")) == errno.EACCES
    # Group bits apply to members of the file's group only.
    ok(ALICE, lambda: os.chmod(f, 0o660))
    assert err(BOB, lambda: open(f, "rb").read()) == errno.EACCES
    os.chown(f, ALICE[0], SHARED_GID)
    assert ok(BOB, lambda: open(f, "rb").read(), groups=[SHARED_GID]) == b"mine"
    # Only the owner (or root) changes mode; only root changes the owner.
    assert err(BOB, lambda: os.chmod(f, 0o777)) == errno.EPERM
    assert err(ALICE, lambda: os.chown(f, BOB[0], -1)) == errno.EPERM
    assert err(BOB, lambda: os.utime(f, (1, 1))) == errno.EPERM
    assert err(BOB, lambda: os.truncate(f, 0)) == errno.EACCES
    # Directory write permission governs unlink in a non-sticky directory.
    os.mkdir(pdir / "ro", 0o755)
    (pdir / "ro" / "x").write_bytes(b"")
    assert err(ALICE, lambda: os.unlink(pdir / "ro" / "x")) == errno.EACCES
    assert err(ALICE, lambda: os.rename(pdir / "ro" / "x", pdir / "y")) == errno.EACCES


def test_execute_bit(pdir):
    f = pdir / "prog"
    f.write_bytes(b"#!/bin/sh\nexit 0\n")
    os.chmod(f, 0o644)
    assert err(ALICE, lambda: os.execv(str(f), [str(f)])) == errno.EACCES
    assert not os.access(f, os.X_OK)     # root needs some x bit too


def test_sticky_directory(workdir):
    d = workdir / "tmp"
    os.mkdir(d)
    os.chmod(d, 0o1777)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o1777
    ok(ALICE, create(d / "alice"))
    ok(BOB, create(d / "bob"))
    assert err(BOB, lambda: os.unlink(d / "alice")) == errno.EPERM
    assert err(BOB, lambda: os.rename(d / "alice", d / "stolen")) == errno.EPERM
    assert err(BOB, lambda: os.rename(d / "bob", d / "alice")) == errno.EPERM
    assert (d / "alice").exists()
    ok(ALICE, lambda: os.unlink(d / "alice"))
    os.unlink(d / "bob")        # root may
    assert os.listdir(d) == []


def test_setgid_directory_inheritance(workdir):
    d = workdir / "proj"
    os.mkdir(d)
    os.chown(d, 0, SHARED_GID)
    os.chmod(d, 0o2777)
    ok(ALICE, create(d / "file"))
    ok(ALICE, lambda: os.mkdir(d / "sub"))
    st_f, st_d = os.stat(d / "file"), os.stat(d / "sub")
    assert st_f.st_gid == SHARED_GID
    assert st_d.st_gid == SHARED_GID
    assert st_d.st_mode & stat.S_ISGID, "a subdirectory of a set-gid directory is set-gid"
    assert not st_f.st_mode & stat.S_ISGID
    assert st_f.st_uid == ALICE[0]
    # Deeper levels inherit again.
    ok(ALICE, create(d / "sub" / "deep"))
    assert os.stat(d / "sub" / "deep").st_gid == SHARED_GID


def test_setgid_cleared_by_chmod_of_non_member(workdir):
    d = workdir / "proj"
    os.mkdir(d)
    os.chown(d, 0, SHARED_GID)
    os.chmod(d, 0o2777)
    ok(ALICE, create(d / "f"))                     # alice's file in group SHARED_GID
    # Alice is not in SHARED_GID: asking for set-gid silently drops it.
    ok(ALICE, lambda: os.chmod(d / "f", 0o2755))
    assert stat.S_IMODE(os.stat(d / "f").st_mode) == 0o755
    # A member keeps it.
    ok(ALICE, lambda: os.chmod(d / "f", 0o2755), groups=[SHARED_GID])
    assert stat.S_IMODE(os.stat(d / "f").st_mode) == 0o2755


# ------------------------------------------------------------------ remembered groups
# rdfs-fuse reads a caller's supplementary groups from /proc and remembers them
# per thread for groups_timeout, keyed by the thread's uid and gid too. These
# mounts leave every check to the metaserver (no_default_permissions), so the
# groups rdfs-fuse sends are what decides.

def _groups_mount(cluster, name, timeout):
    return cluster.mount_second(
        cluster.dir / name,
        opts="no_default_permissions,attr_timeout=0,entry_timeout=0,groups_timeout=%s" % timeout)


def _group_file(pdir):
    f = pdir / "g"
    f.write_bytes(b"group")
    os.chown(f, 0, SHARED_GID)
    os.chmod(f, 0o640)
    return f


def _read_as(path, uid, gid, groups):
    """Switch this process's effective ids (the saved uid stays 0) and read @path:
    the bytes, or the errno."""
    os.seteuid(0)
    os.setgroups(list(groups))
    os.setegid(gid)
    os.seteuid(uid)
    try:
        with open(path, "rb") as fp:
            return fp.read()
    except OSError as e:
        return e.errno


def _steps(path, steps, pause=0):
    """In one forked process (one thread id): read @path as each (uid, gid, groups)
    in @steps, sleeping @pause seconds before each step after the first."""
    def fn():
        out = []
        for i, (uid, gid, groups) in enumerate(steps):
            if i and pause:
                time.sleep(pause)
            out.append(_read_as(path, uid, gid, groups))
        return out
    return ok((0, 0), fn)


@fuse_only("rdfs-fuse reads groups from /proc")
def test_groups_timeout_zero_reads_the_groups_for_every_request(cluster, pdir):
    _group_file(pdir)
    m = _groups_mount(cluster, "mnt-groups0", 0)
    try:
        g = m / pdir.name / "g"
        assert _steps(g, [(ALICE[0], ALICE[1], [SHARED_GID]),
                          (ALICE[0], ALICE[1], [])]) == [b"group", errno.EACCES]
    finally:
        cluster.unmount(m)


@fuse_only("rdfs-fuse reads groups from /proc")
def test_remembered_groups_follow_uid_gid_and_thread_changes(cluster, pdir):
    _group_file(pdir)
    m = _groups_mount(cluster, "mnt-groups", 3600)
    try:
        g = m / pdir.name / "g"
        with_g = (ALICE[0], ALICE[1], [SHARED_GID])
        # Within the timeout, a thread keeping its uid and gid keeps its groups
        # (the documented window); a changed uid or gid reads them again at once.
        assert _steps(g, [with_g, (ALICE[0], ALICE[1], [])]) == [b"group", b"group"]
        assert _steps(g, [with_g, (BOB[0], ALICE[1], [])]) == [b"group", errno.EACCES]
        assert _steps(g, [with_g, (ALICE[0], BOB[1], [])]) == [b"group", errno.EACCES]
        # Another process of the same user, without the group, is denied at once.
        assert _steps(g, [with_g]) == [b"group"]
        assert _steps(g, [(ALICE[0], ALICE[1], [])]) == [errno.EACCES]
    finally:
        cluster.unmount(m)


@fuse_only("rdfs-fuse reads groups from /proc")
def test_remembered_groups_are_read_again_after_the_timeout(cluster, pdir):
    _group_file(pdir)
    m = _groups_mount(cluster, "mnt-groups-short", 0.2)
    try:
        g = m / pdir.name / "g"
        assert _steps(g, [(ALICE[0], ALICE[1], [SHARED_GID]), (ALICE[0], ALICE[1], [])],
                      pause=1) == [b"group", errno.EACCES]
        assert _steps(g, [(ALICE[0], ALICE[1], []), (ALICE[0], ALICE[1], [SHARED_GID])],
                      pause=1) == [errno.EACCES, b"group"]
    finally:
        cluster.unmount(m)


def _read_in_child(path, groups, want_pid=None):
    """Fork a child that becomes ALICE with @groups and reads @path: (its pid,
    the bytes or the errno); with @want_pid, a child given another pid reports
    None instead of reading."""
    def read():
        with open(path, "rb") as fp:
            return fp.read()

    def body():
        if want_pid is not None and os.getpid() != want_pid:
            return None
        return _become(ALICE, read, groups)

    pid, res = _in_child(body)
    if res is not None:
        assert res[0] != "exception", res[1]
        res = res[1]
    return pid, res


@fuse_only("rdfs-fuse reads groups from /proc")
def test_a_reused_thread_id_does_not_inherit_remembered_groups(cluster, pdir):
    """A process that exits leaves its groups remembered for groups_timeout; a new
    process of the same uid and gid that gets the same id (ns_last_pid makes the
    kernel hand it out again) must be read afresh, not given them."""
    _group_file(pdir)
    m = _groups_mount(cluster, "mnt-groups-reuse", 3600)
    try:
        g = m / pdir.name / "g"
        for _ in range(10):
            pid_a, res = _read_in_child(g, [SHARED_GID])
            assert res == b"group"
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid_a - 1))
            pid_b, res = _read_in_child(g, [], want_pid=pid_a)
            if pid_b == pid_a:
                assert res == errno.EACCES, "the reused id got the exited process's groups"
                return
        pytest.skip("the kernel gave the id to someone else ten times")
    finally:
        cluster.unmount(m)
