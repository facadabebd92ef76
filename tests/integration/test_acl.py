# SPDX-License-Identifier: MIT
"""POSIX ACLs through a real mount with getfacl/setfacl (Debian's acl package),
after that package's own test suite (test/misc.test, test/cp.test): set and get,
the mask as setfacl -m and chmod move it, default ACL inheritance with the
umask ignored, access as other users, setfacl -b/-k, the noacl mount option,
and, over the wire (rdfswire.py), that the metaserver refuses what the ACL
refuses to a client that skips the kernel's checks.

Users are forked children that drop to a uid, gid and groups (as in
test_permissions.py).
"""
import errno
import os
import stat
import subprocess

import pytest

import rdfswire as w
from conftest import fuse_only, plain_wire
from test_permissions import ALICE, BOB, SHARED_GID, create, err, ok, pdir  # noqa: F401


ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"

# Linux's xattr form: version 2, then (tag, perm, id) little-endian
TAG = dict(user_obj=1, user=2, group_obj=4, group=8, mask=0x10, other=0x20)
NOID = 0xFFFFFFFF


def acl_blob(*entries, version=2):
    out = version.to_bytes(4, "little")
    for tag, perm, ident in entries:
        out += TAG[tag].to_bytes(2, "little") + perm.to_bytes(2, "little")
        out += (NOID if ident is None else ident).to_bytes(4, "little")
    return out


def setfacl(*args):
    p = subprocess.run(["setfacl", *map(str, args)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, "setfacl %s: %s" % (" ".join(map(str, args)), p.stderr)


def getfacl(path, *opts):
    """getfacl's entries of @path (numeric ids, no header, no effective-rights notes)."""
    p = subprocess.run(["getfacl", "-n", "--omit-header", "-E", *opts, str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, "getfacl %s: %s" % (path, p.stderr)
    return [line for line in p.stdout.splitlines() if line]


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def has_xattr(path, name):
    try:
        os.getxattr(path, name)
        return True
    except OSError as e:
        assert e.errno == errno.ENODATA, "getxattr %s %s: %s" % (path, name, e)
        return False


def with_umask(umask, fn):
    old = os.umask(umask)
    try:
        return fn()
    finally:
        os.umask(old)


def test_set_get_round_trip(pdir):
    f = pdir / "f"
    f.write_bytes(b"data")
    os.chmod(f, 0o640)
    setfacl("-m", "u:%d:rw,g:%d:r" % (ALICE[0], SHARED_GID), f)
    assert getfacl(f) == ["user::rw-", "user:%d:rw-" % ALICE[0], "group::r--",
                          "group:%d:r--" % SHARED_GID, "mask::rw-", "other::---"]
    # the group class of the mode is the mask now
    assert mode(f) == 0o660
    # the raw xattr is what the kernel builds from it: sorted, ids only where named
    assert os.getxattr(f, ACCESS) == acl_blob(
        ("user_obj", 6, None), ("user", 6, ALICE[0]), ("group_obj", 4, None),
        ("group", 4, SHARED_GID), ("mask", 6, None), ("other", 0, None))
    assert ACCESS in os.listxattr(f)
    # an ACL equal to the mode is no ACL: only the mode changes
    g = pdir / "g"
    g.write_bytes(b"")
    setfacl("-m", "u::rwx,g::r-x,o::-", g)
    assert mode(g) == 0o750
    assert not has_xattr(g, ACCESS)
    assert getfacl(g) == ["user::rwx", "group::r-x", "other::---"]


def test_mask_follows_setfacl_and_chmod(pdir):
    f = pdir / "f"
    f.write_bytes(b"")
    os.chmod(f, 0o640)
    setfacl("-m", "u:%d:r" % ALICE[0], f)
    assert "mask::r--" in getfacl(f)
    # setfacl -m recomputes the mask as the union of the group class
    setfacl("-m", "u:%d:rwx" % BOB[0], f)
    assert "mask::rwx" in getfacl(f)
    assert mode(f) == 0o670
    # chmod sets the mask, not the owning group's entry; named entries stay
    os.chmod(f, 0o614)
    entries = getfacl(f)
    assert "mask::--x" in entries and "group::r--" in entries, entries
    assert "user:%d:rwx" % BOB[0] in entries and "other::r--" in entries, entries
    out = subprocess.run(["getfacl", "-n", "--omit-header", str(f)], capture_output=True,
                         text=True, check=True).stdout
    assert "#effective:--x" in out, out
    # the narrowed mask binds: bob's named rwx is worth --x now, and though
    # other's r-- would let him read, his matching entry decides
    assert err(BOB, lambda: open(f, "rb").read()) == errno.EACCES
    os.chmod(f, 0o664)
    assert ok(BOB, lambda: open(f, "rb").read()) == b""
    ok(BOB, lambda: open(f, "ab").write(b"bob"))
    assert f.read_bytes() == b"bob"


def test_access_as_named_users_and_groups(pdir):
    f = pdir / "secret"
    f.write_bytes(b"top")
    os.chmod(f, 0o600)
    setfacl("-m", "u:%d:rw,g:%d:r" % (ALICE[0], SHARED_GID), f)
    assert ok(ALICE, lambda: open(f, "rb").read()) == b"top"
    ok(ALICE, lambda: open(f, "ab").write(b"+a"))
    assert err(BOB, lambda: open(f, "rb").read()) == errno.EACCES
    assert ok(BOB, lambda: open(f, "rb").read(), groups=[SHARED_GID]) == b"top+a"
    assert err(BOB, lambda: open(f, "ab").write(b"x"), groups=[SHARED_GID]) == errno.EACCES
    # a named user entry that denies wins over other's bits
    setfacl("-m", "u:%d:-,o::r" % BOB[0], f)
    assert err(BOB, lambda: open(f, "rb").read()) == errno.EACCES
    assert ok((34567, 34567), lambda: open(f, "rb").read()) == b"top+a"
    # only the owner sets an ACL
    assert err(ALICE, lambda: os.setxattr(f, ACCESS, os.getxattr(f, ACCESS))) == errno.EPERM
    # directories: search, create, remove and rename by the ACL
    d = pdir / "private"
    os.mkdir(d, 0o700)
    setfacl("-m", "u:%d:rwx" % ALICE[0], d)
    ok(ALICE, create(d / "a"))
    ok(ALICE, lambda: os.rename(d / "a", d / "b"))
    assert err(BOB, lambda: os.listdir(d)) == errno.EACCES
    assert err(BOB, create(d / "c")) == errno.EACCES
    assert err(BOB, lambda: os.stat(d / "b")) == errno.EACCES
    # the mask narrows it: search stays, write goes
    os.chmod(d, 0o750)
    assert ok(ALICE, lambda: os.listdir(d)) == ["b"]
    assert err(ALICE, lambda: os.unlink(d / "b")) == errno.EACCES
    os.chmod(d, 0o770)
    ok(ALICE, lambda: os.unlink(d / "b"))


def test_default_acl_inheritance(pdir):
    d = pdir / "shared"
    os.mkdir(d, 0o755)
    setfacl("-d", "-m", "u:%d:rwx,g:%d:rx" % (ALICE[0], SHARED_GID), d)
    default = getfacl(d, "-d")
    assert default == ["user::rwx", "user:%d:rwx" % ALICE[0], "group::r-x",
                       "group:%d:r-x" % SHARED_GID, "mask::rwx", "other::r-x"], default
    assert not has_xattr(d, ACCESS) and mode(d) == 0o755
    # a file: the umask is ignored, each class gets what the mode and the ACL allow
    with_umask(0o077, lambda: os.close(os.open(d / "f", os.O_CREAT | os.O_WRONLY, 0o666)))
    assert mode(d / "f") == 0o664
    assert getfacl(d / "f") == ["user::rw-", "user:%d:rwx" % ALICE[0], "group::r-x",
                                "group:%d:r-x" % SHARED_GID, "mask::rw-", "other::r--"]
    assert not has_xattr(d / "f", DEFAULT)
    ok(ALICE, lambda: open(d / "f", "ab").write(b"alice"))
    # a directory gets it as its access and its default ACL, and passes it on
    with_umask(0o077, lambda: os.mkdir(d / "sub", 0o777))
    assert mode(d / "sub") == 0o775
    assert getfacl(d / "sub", "-d") == default
    os.mkdir(d / "sub" / "deeper", 0o700)
    assert getfacl(d / "sub" / "deeper", "-d") == default
    assert "mask::---" in getfacl(d / "sub" / "deeper")
    # alice creates through the inherited ACL; her files inherit too
    ok(ALICE, lambda: with_umask(0o022, create(d / "sub" / "a", 0o640)))
    st = os.stat(d / "sub" / "a")
    assert st.st_uid == ALICE[0] and mode(d / "sub" / "a") == 0o640
    assert "user:%d:rwx" % ALICE[0] in getfacl(d / "sub" / "a")
    # without a default ACL the umask applies as always
    os.mkdir(pdir / "plain", 0o777)
    with_umask(0o027, lambda: os.close(os.open(pdir / "plain" / "p",
                                               os.O_CREAT | os.O_WRONLY, 0o666)))
    assert mode(pdir / "plain" / "p") == 0o640
    with_umask(0o027, lambda: os.mkdir(pdir / "plain" / "q", 0o777))
    assert mode(pdir / "plain" / "q") == 0o750
    # a default ACL only on directories
    p = subprocess.run(["setfacl", "-d", "-m", "u:%d:r" % ALICE[0], str(d / "f")],
                       capture_output=True, text=True)
    assert p.returncode != 0


def test_setfacl_b_and_k_remove_acls(pdir):
    d = pdir / "d"
    os.mkdir(d, 0o750)
    setfacl("-m", "u:%d:rwx,g:%d:rx" % (ALICE[0], SHARED_GID), d)
    setfacl("-d", "-m", "u:%d:rx" % BOB[0], d)
    assert has_xattr(d, ACCESS) and has_xattr(d, DEFAULT)
    setfacl("-k", d)
    assert not has_xattr(d, DEFAULT) and has_xattr(d, ACCESS)
    with_umask(0o022, lambda: os.mkdir(d / "after-k", 0o777))
    assert not has_xattr(d / "after-k", ACCESS) and mode(d / "after-k") == 0o755
    setfacl("-b", d)
    assert not has_xattr(d, ACCESS)
    # the base entries remain: the group class is the owning group's entry again
    assert getfacl(d) == ["user::rwx", "group::r-x", "other::---"]
    assert mode(d) == 0o750
    assert err(ALICE, lambda: os.listdir(d)) == errno.EACCES
    # removing what is not there succeeds
    setfacl("-b", d)


def test_noacl_mount(cluster, pdir):
    f = pdir / "f"
    f.write_bytes(b"open")
    os.chmod(f, 0o644)
    # bob is named with no rights: the mode alone (other r--) would let him read
    setfacl("-m", "u:%d:-" % BOB[0], f)
    assert mode(f) == 0o644
    d = pdir / "dflt"
    os.mkdir(d, 0o777)
    setfacl("-d", "-m", "u:%d:rwx" % ALICE[0], d)
    m2 = cluster.mount_second(cluster.dir / "mnt-noacl",
                              opts="noacl,attr_timeout=0,entry_timeout=0")
    try:
        f2 = m2 / pdir.name / "f"
        for call in (lambda: os.getxattr(f2, ACCESS),
                     lambda: os.setxattr(f2, ACCESS, acl_blob(("user_obj", 6, None),
                                                               ("group_obj", 4, None),
                                                               ("other", 4, None))),
                     lambda: os.removexattr(f2, ACCESS)):
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EOPNOTSUPP
        # user xattrs are unaffected
        os.setxattr(f2, "user.x", b"1")
        assert os.getxattr(f2, "user.x") == b"1"
        # the kernel of this mount knows no ACL and lets bob by other's r--;
        # the metaserver refuses him by his entry
        assert err(BOB, lambda: open(f2, "rb").read()) == errno.EACCES
        assert ok((34567, 34567), lambda: open(f2, "rb").read()) == b"open"
        # the mode comes masked by the kernel here, then takes the default ACL
        with_umask(0o077, lambda: os.close(os.open(m2 / pdir.name / "dflt" / "n",
                                                   os.O_CREAT | os.O_WRONLY, 0o666)))
        assert mode(d / "n") == 0o600
        assert "user:%d:rwx" % ALICE[0] in [e.split("\t")[0] for e in getfacl(d / "n")]
        # the ACL is still there for the ACL mount
        assert "user:%d:---" % BOB[0] in getfacl(f)
    finally:
        cluster.unmount(m2)


def test_other_mount_sees_acl_changes(other_mount, pdir):
    """A second mount (attr_timeout=0) checks with the ACL as it is now: its
    kernel forgets a cached ACL whenever it fetches attributes again."""
    f = pdir / "f"
    f.write_bytes(b"shared")
    os.chmod(f, 0o600)
    f2 = other_mount / pdir.name / "f"
    assert err(BOB, lambda: open(f2, "rb").read()) == errno.EACCES      # caches "no ACL"
    setfacl("-m", "u:%d:r" % BOB[0], f)
    assert ok(BOB, lambda: open(f2, "rb").read()) == b"shared"
    setfacl("-x", "u:%d" % BOB[0], f)
    assert err(BOB, lambda: open(f2, "rb").read()) == errno.EACCES
    # a chmod here narrows the mask there
    setfacl("-m", "u:%d:rw" % BOB[0], f)
    assert ok(BOB, lambda: open(f2, "rb").read()) == b"shared"
    os.chmod(f, 0o600)
    assert "mask::---" in getfacl(f2)
    assert err(BOB, lambda: open(f2, "rb").read()) == errno.EACCES


@fuse_only("no_default_permissions is an rdfs-fuse option")
def test_no_default_permissions_leaves_acls_to_the_metaserver(cluster, pdir):
    """Without default_permissions rdfs-fuse does not ask for FUSE_POSIX_ACL
    (it would turn the kernel's checks on): the ACL xattrs pass through to the
    metaserver, which alone checks them."""
    f = pdir / "f"
    f.write_bytes(b"open")
    os.chmod(f, 0o644)
    m2 = cluster.mount_second(cluster.dir / "mnt-nodp",
                              opts="no_default_permissions,attr_timeout=0,entry_timeout=0")
    try:
        f2 = m2 / pdir.name / "f"
        setfacl("-m", "u:%d:-" % BOB[0], f2)
        assert "user:%d:---" % BOB[0] in getfacl(f2)
        assert "user:%d:---" % BOB[0] in getfacl(f)
        assert err(BOB, lambda: open(f2, "rb").read()) == errno.EACCES
        assert ok((34567, 34567), lambda: open(f2, "rb").read()) == b"open"
    finally:
        cluster.unmount(m2)


# ------------------------------------------------------------------ wire
def _connect(c):
    conn = w.Conn(c.port)
    res = w.authenticate(conn, w.load_secret(c.secret))
    assert res == "accepted", res
    return conn


def _lookup(conn, c, path):
    ino = w.ROOT_INO
    for part in path.relative_to(c.mnt).parts:
        status, body = w.call(conn, w.OP_LOOKUP, w.field_bytes(1, w.cred(0, 0))
                              + w.field_varint(2, ino) + w.field_bytes(3, part))
        assert status == 0, "LOOKUP %s: %d" % (part, status)
        attr = w.decode(w.decode(body)[1][0])
        ino = attr[1][0]
    return ino


def _xattr(conn, op, cr, ino, name, value=None):
    body = w.field_bytes(1, cr) + w.field_varint(2, ino) + w.field_bytes(3, name)
    if value is not None:
        body += w.field_bytes(4, value)
    return w.call(conn, op, body)


def _mode_of(body):
    return w.decode(w.decode(body)[1][0])[2][0]


@plain_wire("talks to the metaserver directly")
def test_metaserver_enforces_acl_without_the_kernel(cluster, pdir):
    """A client that skips the kernel's checks (it sends any uid it likes, as a
    node's key lets it) still meets the ACL at the metaserver."""
    c = cluster
    f = pdir / "f"
    f.write_bytes(b"open")
    os.chmod(f, 0o644)
    bob = w.cred(*BOB)
    stranger = w.cred(34567, 34567)
    conn = _connect(c)
    try:
        ino = _lookup(conn, c, f)

        def open_as(cr, flags):
            return w.call(conn, w.OP_OPEN, w.field_bytes(1, cr) + w.field_varint(2, ino)
                          + w.field_varint(3, flags))[0]

        assert open_as(bob, os.O_RDONLY) == 0
        # root sets u:bob:--- (mode stays 0644): bob is refused, others are not
        blob = acl_blob(("user_obj", 6, None), ("user", 0, BOB[0]), ("group_obj", 4, None),
                        ("mask", 4, None), ("other", 4, None))
        assert _xattr(conn, w.OP_SETXATTR, w.cred(0, 0), ino, ACCESS, blob)[0] == 0
        assert open_as(bob, os.O_RDONLY) == -errno.EACCES
        assert open_as(stranger, os.O_RDONLY) == 0
        # bob cannot lift it: not the owner
        lift = acl_blob(("user_obj", 6, None), ("group_obj", 4, None), ("other", 4, None))
        assert _xattr(conn, w.OP_SETXATTR, bob, ino, ACCESS, lift)[0] == -errno.EPERM
        assert _xattr(conn, w.OP_REMOVEXATTR, bob, ino, ACCESS)[0] == -errno.EPERM
        # hostile blobs: refused, the ACL unchanged, the connection still served
        hostile = [b"", b"\x02\x00\x00", blob[:-1], acl_blob(("user_obj", 6, None),
                   ("user", 6, 7), ("group_obj", 4, None), ("other", 4, None)),
                   acl_blob(("user_obj", 6, None), ("group_obj", 4, None),
                            ("other", 4, None), version=1),
                   acl_blob(("user_obj", 6, None), ("user", 6, 9), ("user", 6, 8),
                            ("group_obj", 4, None), ("mask", 6, None), ("other", 4, None)),
                   b"\x02\x00\x00\x00" + b"\xff" * 8 * 200]
        for h in hostile:
            status, _ = _xattr(conn, w.OP_SETXATTR, w.cred(0, 0), ino, ACCESS, h)
            assert status in (-errno.EINVAL, -errno.EOPNOTSUPP, -errno.ENOSPC), (h, status)
        status, body = _xattr(conn, w.OP_GETXATTR, stranger, ino, ACCESS)
        assert status == 0 and w.decode(body)[1][0] == blob
        assert open_as(bob, os.O_RDONLY) == -errno.EACCES
        # and through the mount root sees the same ACL
        assert "user:%d:---" % BOB[0] in getfacl(f)
    finally:
        conn.close()


@plain_wire("talks to the metaserver directly")
def test_umask_travels_with_creates(cluster, pdir):
    """MKNOD/MKDIR's umask: applied without a default ACL, ignored under one;
    absent, as from clients that mask the mode themselves, it changes nothing."""
    c = cluster
    os.mkdir(pdir / "plain", 0o777)
    os.mkdir(pdir / "dflt", 0o777)
    setfacl("-d", "-m", "u:%d:rwx" % ALICE[0], pdir / "dflt")
    conn = _connect(c)
    root = w.cred(0, 0)
    try:
        plain, dflt = _lookup(conn, c, pdir / "plain"), _lookup(conn, c, pdir / "dflt")

        def mknod(parent, name, perm, umask=None):
            body = (w.field_bytes(1, root) + w.field_varint(2, parent) + w.field_bytes(3, name)
                    + w.field_varint(4, stat.S_IFREG | perm) + w.field_varint(6, 1))
            if umask is not None:
                body += w.field_varint(9, umask)
            status, rbody = w.call(conn, w.OP_MKNOD, body)
            assert status == 0, (name, status)
            return stat.S_IMODE(_mode_of(rbody))

        def mkdir(parent, name, perm, umask=None):
            body = (w.field_bytes(1, root) + w.field_varint(2, parent) + w.field_bytes(3, name)
                    + w.field_varint(4, perm))
            if umask is not None:
                body += w.field_varint(5, umask)
            status, rbody = w.call(conn, w.OP_MKDIR, body)
            assert status == 0, (name, status)
            return stat.S_IMODE(_mode_of(rbody))

        assert mknod(plain, "a", 0o666, 0o022) == 0o644
        assert mknod(plain, "b", 0o640) == 0o640
        assert mkdir(plain, "c", 0o777, 0o077) == 0o700
        assert mknod(dflt, "a", 0o666, 0o077) == 0o664
        assert mkdir(dflt, "c", 0o777, 0o077) == 0o775
        assert "user:%d:rwx" % ALICE[0] in getfacl(pdir / "dflt" / "a")
    finally:
        conn.close()
