# SPDX-License-Identifier: MIT
"""Namespace through the FUSE mount: readdir, rename/link/symlink, names, xattrs, statfs."""
import collections
import ctypes
import errno
import os
import re
import stat
import subprocess


from conftest import CLIENT, run

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2

_libc = ctypes.CDLL(None, use_errno=True)


def renameat2(old, new, flags):
    """renameat2(2) through libc; raises OSError with its errno."""
    r = _libc.renameat2(AT_FDCWD, os.fsencode(str(old)), AT_FDCWD, os.fsencode(str(new)),
                        ctypes.c_uint(flags))
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(old))


def errno_of(fn, *args):
    """The errno @fn raised, or None when it succeeded."""
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return None


def touch(path, data=b""):
    with open(path, "wb") as f:
        f.write(data)


def content(path):
    with open(path, "rb") as f:
        return f.read()


# ------------------------------------------------------------------ readdir
def test_readdir_10000_entries(workdir):
    n = 10000
    names = ["entry-%05d-%s" % (i, "x" * (i % 37)) for i in range(n)]
    for name in names:
        os.close(os.open(workdir / name, os.O_CREAT | os.O_WRONLY, 0o644))
    listed = os.listdir(workdir)
    counts = collections.Counter(listed)
    dupes = [k for k, v in counts.items() if v > 1]
    assert not dupes, "listed more than once: %s" % dupes[:10]
    assert set(listed) == set(names), "missing: %s; unexpected: %s" % (
        sorted(set(names) - set(listed))[:10], sorted(set(listed) - set(names))[:10])
    # scandir reports types; every entry is a regular file.
    with os.scandir(workdir) as it:
        kinds = collections.Counter(e.is_file(follow_symlinks=False) for e in it)
    assert kinds == {True: n}


def test_readdir_stable_while_directory_changes(workdir):
    """Entries present for the whole listing are returned exactly once."""
    stable = ["s%04d" % i for i in range(3000)]
    for name in stable:
        os.close(os.open(workdir / name, os.O_CREAT | os.O_WRONLY, 0o644))
    seen = []
    with os.scandir(workdir) as it:
        for i, e in enumerate(it):
            seen.append(e.name)
            if i == 100:
                # Changes during the listing, before and after the cursor.
                for j in range(200):
                    os.close(os.open(workdir / ("a%04d" % j), os.O_CREAT | os.O_WRONLY, 0o644))
                    os.close(os.open(workdir / ("z%04d" % j), os.O_CREAT | os.O_WRONLY, 0o644))
    counts = collections.Counter(seen)
    assert all(counts[s] == 1 for s in stable), \
        "stable entries missing or repeated: %s" % [s for s in stable if counts[s] != 1][:10]
    assert max(counts.values()) == 1


def test_readdir_dot_entries_and_types(workdir):
    os.mkdir(workdir / "d")
    touch(workdir / "f")
    os.symlink("f", workdir / "l")
    with os.scandir(workdir) as it:
        kinds = {e.name: (e.is_dir(follow_symlinks=False), e.is_symlink()) for e in it}
    assert kinds == {"d": (True, False), "f": (False, False), "l": (False, True)}
    assert os.stat(workdir / "d").st_nlink == 2
    assert os.stat(workdir).st_nlink == 3


# ------------------------------------------------------------------ rename
def test_rename_replaces_file(workdir):
    touch(workdir / "a", b"A")
    touch(workdir / "b", b"B")
    ino_a = os.stat(workdir / "a").st_ino
    os.rename(workdir / "a", workdir / "b")
    assert not (workdir / "a").exists()
    assert content(workdir / "b") == b"A"
    assert os.stat(workdir / "b").st_ino == ino_a


def test_rename_across_directories(workdir):
    os.mkdir(workdir / "d1")
    os.mkdir(workdir / "d2")
    touch(workdir / "d1" / "f", b"data")
    os.rename(workdir / "d1" / "f", workdir / "d2" / "g")
    assert os.listdir(workdir / "d1") == []
    assert content(workdir / "d2" / "g") == b"data"
    os.rename(workdir / "d2", workdir / "d1" / "sub")
    assert content(workdir / "d1" / "sub" / "g") == b"data"
    assert os.stat(workdir / "d1").st_nlink == 3
    assert os.stat(workdir).st_nlink == 3


def test_rename_errors(workdir):
    os.mkdir(workdir / "dir")
    os.mkdir(workdir / "full")
    touch(workdir / "full" / "x")
    os.mkdir(workdir / "empty")
    touch(workdir / "file")
    assert errno_of(os.rename, workdir / "file", workdir / "dir") == errno.EISDIR
    assert errno_of(os.rename, workdir / "dir", workdir / "file") == errno.ENOTDIR
    assert errno_of(os.rename, workdir / "dir", workdir / "full") == errno.ENOTEMPTY
    assert errno_of(os.rename, workdir / "missing", workdir / "x") == errno.ENOENT
    assert errno_of(os.rename, workdir / "dir", workdir / "dir" / "inside") == errno.EINVAL
    # A directory may replace an empty one.
    os.rename(workdir / "dir", workdir / "empty")
    assert not (workdir / "dir").exists()
    assert (workdir / "empty").is_dir()


def test_renameat2_noreplace(workdir):
    touch(workdir / "a", b"A")
    touch(workdir / "b", b"B")
    assert errno_of(renameat2, workdir / "a", workdir / "b", RENAME_NOREPLACE) == errno.EEXIST
    assert content(workdir / "a") == b"A" and content(workdir / "b") == b"B"
    renameat2(workdir / "a", workdir / "c", RENAME_NOREPLACE)
    assert not (workdir / "a").exists()
    assert content(workdir / "c") == b"A"


def test_renameat2_exchange(workdir):
    touch(workdir / "a", b"A")
    os.mkdir(workdir / "d")
    touch(workdir / "d" / "inner", b"I")
    renameat2(workdir / "a", workdir / "d", RENAME_EXCHANGE)
    assert content(workdir / "d") == b"A"
    assert content(workdir / "a" / "inner") == b"I"
    assert errno_of(renameat2, workdir / "a", workdir / "missing", RENAME_EXCHANGE) == errno.ENOENT


# ------------------------------------------------------------------ links
def test_hard_link(workdir):
    touch(workdir / "f", b"shared")
    os.link(workdir / "f", workdir / "g")
    a, b = os.stat(workdir / "f"), os.stat(workdir / "g")
    assert a.st_ino == b.st_ino
    assert a.st_nlink == b.st_nlink == 2
    with open(workdir / "g", "ab") as f:
        f.write(b"+more")
    assert content(workdir / "f") == b"shared+more"
    os.unlink(workdir / "f")
    assert os.stat(workdir / "g").st_nlink == 1
    assert content(workdir / "g") == b"shared+more"
    assert errno_of(os.link, workdir / "g", workdir / "g") == errno.EEXIST
    os.mkdir(workdir / "d")
    assert errno_of(os.link, workdir / "d", workdir / "d2") == errno.EPERM


def test_symlink(workdir):
    touch(workdir / "target", b"T")
    os.symlink("target", workdir / "rel")
    os.symlink(str(workdir / "target"), workdir / "abs")
    os.symlink("nowhere", workdir / "dangling")
    os.symlink("loop2", workdir / "loop1")
    os.symlink("loop1", workdir / "loop2")
    long_target = "t" * 4000
    os.symlink(long_target, workdir / "long")
    assert os.readlink(workdir / "rel") == "target"
    assert os.readlink(workdir / "abs") == str(workdir / "target")
    assert os.readlink(workdir / "long") == long_target
    assert content(workdir / "rel") == b"T"
    assert content(workdir / "abs") == b"T"
    assert stat.S_ISLNK(os.lstat(workdir / "rel").st_mode)
    assert os.lstat(workdir / "rel").st_size == len("target")
    assert errno_of(os.stat, workdir / "dangling") == errno.ENOENT
    assert errno_of(os.stat, workdir / "loop1") == errno.ELOOP
    assert errno_of(os.readlink, workdir / "target") == errno.EINVAL
    assert errno_of(os.symlink, "x", workdir / "rel") == errno.EEXIST


def test_unlink_rmdir_errors(workdir):
    os.mkdir(workdir / "d")
    touch(workdir / "d" / "f")
    assert errno_of(os.rmdir, workdir / "d") == errno.ENOTEMPTY
    assert errno_of(os.unlink, workdir / "d") == errno.EISDIR
    assert errno_of(os.rmdir, workdir / "d" / "f") == errno.ENOTDIR
    assert errno_of(os.unlink, workdir / "nope") == errno.ENOENT
    assert errno_of(os.mkdir, workdir / "d") == errno.EEXIST
    assert errno_of(os.open, workdir / "d" / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY) == errno.EEXIST
    assert errno_of(os.open, workdir / "d" / "f" / "x", os.O_RDONLY) == errno.ENOTDIR
    os.unlink(workdir / "d" / "f")
    os.rmdir(workdir / "d")
    assert os.listdir(workdir) == []


# ------------------------------------------------------------------ names
def test_name_of_256_bytes_is_enametoolong(workdir):
    ok = "n" * 255
    long = "n" * 256
    touch(workdir / ok, b"ok")
    assert content(workdir / ok) == b"ok"
    os.mkdir(workdir / "d")
    checks = {
        "create": lambda: os.open(workdir / long, os.O_CREAT | os.O_WRONLY, 0o644),
        "mkdir": lambda: os.mkdir(workdir / long),
        "lookup": lambda: os.stat(workdir / long),
        "symlink": lambda: os.symlink("x", workdir / long),
        "link": lambda: os.link(workdir / ok, workdir / long),
        "rename": lambda: os.rename(workdir / ok, workdir / long),
        "mknod": lambda: os.mknod(workdir / long, 0o644 | stat.S_IFIFO),
        "unlink": lambda: os.unlink(workdir / long),
        "rmdir": lambda: os.rmdir(workdir / long),
    }
    got = {k: errno_of(fn) for k, fn in checks.items()}
    assert got == {k: errno.ENAMETOOLONG for k in checks}
    # Multi-byte names count bytes, not characters.
    assert errno_of(os.mkdir, workdir / ("é" * 128)) == errno.ENAMETOOLONG
    os.mkdir(workdir / ("é" * 127))
    assert sorted(os.listdir(workdir)) == sorted(["d", ok, "é" * 127])


def test_special_files_and_chmod(workdir):
    os.mkfifo(workdir / "fifo", 0o640)
    st = os.lstat(workdir / "fifo")
    assert stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640
    touch(workdir / "f")
    os.chmod(workdir / "f", 0o4751)
    assert stat.S_IMODE(os.stat(workdir / "f").st_mode) == 0o4751
    os.chown(workdir / "f", 1234, 5678)
    st = os.stat(workdir / "f")
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    os.utime(workdir / "f", ns=(1_000_000_123, 2_000_000_456))
    st = os.stat(workdir / "f")
    assert st.st_atime_ns == 1_000_000_123 and st.st_mtime_ns == 2_000_000_456


# ------------------------------------------------------------------ xattrs
def test_xattrs(workdir):
    f = workdir / "f"
    touch(f)
    os.setxattr(f, "user.a", b"value-a")
    os.setxattr(f, "user.empty", b"")
    big = bytes(range(256)) * 256          # 64 KiB, the largest value
    os.setxattr(f, "user.big", big)
    assert os.getxattr(f, "user.a") == b"value-a"
    assert os.getxattr(f, "user.empty") == b""
    assert os.getxattr(f, "user.big") == big
    assert sorted(os.listxattr(f)) == ["user.a", "user.big", "user.empty"]
    assert errno_of(os.setxattr, f, "user.a", b"x", os.XATTR_CREATE) == errno.EEXIST
    assert errno_of(os.setxattr, f, "user.new", b"x", os.XATTR_REPLACE) == errno.ENODATA
    os.setxattr(f, "user.a", b"replaced", os.XATTR_REPLACE)
    assert os.getxattr(f, "user.a") == b"replaced"
    os.setxattr(f, "user.new", b"created", os.XATTR_CREATE)
    os.removexattr(f, "user.a")
    assert errno_of(os.getxattr, f, "user.a") == errno.ENODATA
    assert errno_of(os.removexattr, f, "user.a") == errno.ENODATA
    assert sorted(os.listxattr(f)) == ["user.big", "user.empty", "user.new"]


def test_xattrs_on_directory_and_size_rules(workdir):
    os.setxattr(workdir, "user.dir", b"d" * 100)
    assert os.getxattr(workdir, "user.dir") == b"d" * 100
    # getxattr(2) with a too-small buffer: ERANGE (size 0 asks for the size).
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(10)
    path = os.fsencode(str(workdir))
    assert libc.getxattr(path, b"user.dir", None, ctypes.c_size_t(0)) == 100
    assert libc.getxattr(path, b"user.dir", buf, ctypes.c_size_t(10)) == -1
    assert ctypes.get_errno() == errno.ERANGE
    out = subprocess.run(["getfattr", "-n", "user.dir", "--only-values", str(workdir)],
                         stdout=subprocess.PIPE, timeout=60)
    assert out.returncode == 0 and out.stdout == b"d" * 100


# ------------------------------------------------------------------ statfs
def test_statfs(cluster, workdir):
    st = os.statvfs(cluster.mnt)
    assert st.f_bsize > 0 and st.f_frsize > 0
    assert st.f_blocks > 0
    assert 0 < st.f_bfree <= st.f_blocks
    assert st.f_bavail <= st.f_bfree
    assert st.f_namemax == 255
    if CLIENT == "lkm":
        # the kernel client's own type (RDFS_SUPER_MAGIC), which stat does not name
        fstype = run(["stat", "-f", "-c", "%t", cluster.mnt]).stdout.strip()
        assert fstype == "53464452", fstype
    else:
        fstype = run(["stat", "-f", "-c", "%T", cluster.mnt]).stdout.strip()
        assert fstype in ("fuseblk", "fuse"), fstype
    # Writing data takes free space away.
    size = 32 << 20
    with open(workdir / "space", "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
    after = os.statvfs(cluster.mnt)
    used = (st.f_bfree - after.f_bfree) * after.f_frsize
    assert used >= size, "free space dropped by %d bytes after writing %d" % (used, size)


def test_rdfs_status_lists_both_servers(cluster):
    out = cluster.rdfs("status").stdout
    for i in range(cluster.n_io):
        assert re.search(r"(tcp|rdma)://\S+:%d\b" % cluster.ioserver_port(i), out), out
    df = cluster.rdfs("df")
    assert df.returncode == 0 and df.stdout.strip()


def test_rdfs_json_listings_match_the_mount(cluster, workdir, other_mount):
    """rdfs status, df and ls --json parse, and say what the mount says: every
    I/O server, the space statfs reports, each entry's type and attributes
    (names that are not UTF-8 or need escaping still give valid JSON)."""
    import json
    st = json.loads(cluster.rdfs("status", "--json").stdout)
    ports = sorted(int(s["url"].rsplit(":", 1)[1]) for s in st["servers"])
    assert ports == sorted(cluster.ioserver_port(i) for i in range(cluster.n_io))
    assert all(s["state"] == "up" and s["capacity_bytes"] ==
               s["used_bytes"] + s["free_bytes"] for s in st["servers"])
    df = json.loads(cluster.rdfs("df", "--json").stdout)
    vfs = os.statvfs(other_mount)
    assert df["size_bytes"] == vfs.f_blocks * vfs.f_frsize
    assert df["inodes"] == vfs.f_files
    os.mkdir(workdir / "sub", 0o711)
    with open(workdir / "data", "wb") as f:
        f.write(b"d" * 12345)
    os.symlink("data", workdir / "ln")
    odd = os.fsencode(str(workdir)) + b"/q\"\\\x01\xff\xc3\xa9"
    os.close(os.open(odd, os.O_CREAT | os.O_WRONLY, 0o600))
    rel = "/" + workdir.name
    ls = json.loads(cluster.rdfs("ls", "-l", "--json", rel).stdout)
    assert ls["path"] == rel
    got = {e["name"]: e for e in ls["entries"]}
    assert got["sub"]["type"] == "dir" and got["sub"]["mode"] == 0o711
    assert got["data"]["type"] == "file" and got["data"]["size"] == 12345
    assert got["ln"]["type"] == "symlink"
    for name in ("sub", "data", "ln"):
        p = os.lstat(other_mount / workdir.name / name)
        e = got[name]
        assert (e["ino"], e["nlink"], e["uid"], e["gid"], e["mtime_ns"]) == \
            (p.st_ino, p.st_nlink, p.st_uid, p.st_gid, p.st_mtime_ns), name
    # quote, backslash and a control byte escaped; a byte that is not UTF-8 as
    # \u00ff; the UTF-8 "\xc3\xa9" as itself (U+00E9)
    assert 'q"\\\x01\xff\xe9' in got
    short = json.loads(cluster.rdfs("ls", "--json", rel).stdout)["entries"]
    assert sorted(e["name"] for e in short) == sorted(got) and "size" not in short[0]


# ------------------------------------------------------------------ times
def test_ctime_mtime_updates(workdir, other_mount):
    """POSIX's time updates, seen through a mount without an attribute cache."""
    d = other_mount / workdir.name
    f = d / "f"

    def times(p):
        st = os.lstat(p)
        return st.st_mtime_ns, st.st_ctime_ns

    def changed(p, op):
        """(mtime advanced, ctime advanced) of @p across @op()."""
        m0, c0 = times(p)
        op()
        m1, c1 = times(p)
        assert m1 >= m0 and c1 >= c0, "%s: times went back" % p
        return m1 > m0, c1 > c0

    assert changed(d, lambda: touch(f, b"x")) == (True, True)           # create: parent
    assert changed(f, lambda: open(f, "ab").write(b"more")) == (True, True)
    assert changed(f, lambda: os.truncate(f, 1)) == (True, True)
    assert changed(f, lambda: os.chmod(f, 0o600)) == (False, True)
    assert changed(f, lambda: os.chown(f, 1, 1)) == (False, True)
    assert changed(f, lambda: os.setxattr(f, "user.x", b"1")) == (False, True)
    assert changed(f, lambda: os.link(f, d / "g")) == (False, True)     # nlink changes
    assert changed(d, lambda: os.unlink(d / "g")) == (True, True)
    assert changed(d, lambda: os.mkdir(d / "sub")) == (True, True)
    sub = d / "sub"
    assert changed(sub, lambda: os.rename(f, sub / "f")) == (True, True)  # new parent
    assert changed(d, lambda: os.rename(sub / "f", d / "f")) == (True, True)  # and the old
    assert changed(d, lambda: os.symlink("f", d / "s")) == (True, True)
    assert changed(d, lambda: os.rmdir(sub)) == (True, True)
    # utime sets mtime (and atime) as asked, even into the past; ctime moves on.
    c0 = os.stat(f).st_ctime_ns
    os.utime(f, ns=(5_000_000_000, 7_000_000_000))
    st = os.stat(f)
    assert (st.st_atime_ns, st.st_mtime_ns) == (5_000_000_000, 7_000_000_000)
    assert st.st_ctime_ns > c0


def test_rename_over_open_file(workdir):
    touch(workdir / "victim", b"old contents")
    touch(workdir / "new", b"new")
    fd = os.open(workdir / "victim", os.O_RDONLY)
    try:
        os.rename(workdir / "new", workdir / "victim")
        assert content(workdir / "victim") == b"new"
        assert os.fstat(fd).st_nlink == 0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert os.pread(fd, 100, 0) == b"old contents"
    finally:
        os.close(fd)


def test_listing_with_attributes_matches_stat_from_another_client(cluster, workdir, other_mount):
    """What `ls -l` shows (readdirplus attributes on rdfs-fuse, lookups on the
    kernel client) is what a client without caches stats: modes, sizes, link
    counts, owners, times; a file this mount is writing shows its written size."""
    sizes = {}
    for i in range(300):
        p = workdir / ("e%03d" % i)
        if i % 10 == 0:
            os.mkdir(p, 0o750)
            continue
        with open(p, "wb") as f:
            f.write(b"x" * (i * 37))
        os.chmod(p, 0o600 + i % 64)
        sizes[p.name] = i * 37
    os.link(workdir / "e001", workdir / "hard")
    os.chown(workdir / "e002", 1234, 5678)
    writing = open(workdir / "open", "wb")
    try:
        writing.write(b"y" * 5000)
        writing.flush()
        out = subprocess.run(["ls", "-ln", "--time-style=+%s", str(workdir)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.splitlines()[1:]
        listed = {}
        for line in out:
            f = line.split()
            listed[f[-1]] = (f[0], int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5]))
        assert listed["open"][4] == 5000, listed["open"]
        theirs = other_mount / workdir.name
        for name, (modestr, nlink, uid, gid, size, mtime) in listed.items():
            if name == "open":
                continue
            st = os.lstat(theirs / name)
            assert stat.filemode(st.st_mode) == modestr[:10], name
            assert (nlink, uid, gid) == (st.st_nlink, st.st_uid, st.st_gid), name
            if not stat.S_ISDIR(st.st_mode):
                assert size == st.st_size == sizes.get(name, sizes.get("e001")), name
            assert mtime == int(st.st_mtime), name
        assert listed["hard"][1] == 2 and listed["e002"][2:4] == (1234, 5678)
        assert len(listed) == 302
    finally:
        writing.close()
