# SPDX-License-Identifier: MIT
"""Crashes: kill -9 of the metaserver or of an I/O server.

Each test has a cluster of its own. A killed server is started again with the
arguments it had (read from /proc before the kill), like an init system would.
"""
import os
import subprocess
import sys

import pytest

from conftest import MiB, assert_bytes_equal, drop_cache, wait_until

CLIENT_TIMEOUT = 30          # rdfs-fuse's default per-request timeout ([fuse] timeout)
READ_DEADLINE = 8 * CLIENT_TIMEOUT   # far more than one timeout: only a hang gets there


def populate(root):
    """Files, fsync'ed, plus acknowledged namespace changes. Returns {relpath: bytes}."""
    files = {}
    os.mkdir(root / "dir")
    os.mkdir(root / "dir" / "sub")
    for i, size in enumerate([0, 1, 4097, MiB + 1, 5 * MiB + 3]):
        rel = "dir/f%d" % i if i % 2 else "dir/sub/f%d" % i
        data = os.urandom(size)
        with open(root / rel, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        files[rel] = data
    os.rename(root / "dir" / "f1", root / "dir" / "renamed")
    files["dir/renamed"] = files.pop("dir/f1")
    os.symlink("renamed", root / "dir" / "link")
    os.setxattr(root / "dir" / "renamed", "user.tag", b"kept")
    os.chmod(root / "dir" / "sub", 0o750)
    # Overwrite the middle of a file, then fsync.
    with open(root / "dir" / "sub" / "f4", "r+b") as f:
        f.seek(MiB)
        f.write(b"\xAA" * 10000)
        f.flush()
        os.fsync(f.fileno())
    d = bytearray(files["dir/sub/f4"])
    d[MiB:MiB + 10000] = b"\xAA" * 10000
    files["dir/sub/f4"] = bytes(d)
    return files


def check(root, files):
    for rel, data in files.items():
        p = root / rel
        assert os.stat(p).st_size == len(data), rel
        drop_cache(p)
        with open(p, "rb") as f:
            assert_bytes_equal(data, f.read(), rel)
    assert os.readlink(root / "dir" / "link") == "renamed"
    assert os.getxattr(root / "dir" / "renamed", "user.tag") == b"kept"
    assert os.stat(root / "dir" / "sub").st_mode & 0o777 == 0o750
    assert not (root / "dir" / "f1").exists()


def test_metaserver_kill9_keeps_everything_fsynced(fresh_cluster):
    c = fresh_cluster
    files = populate(c.mnt)
    saved = c.kill9(c.port)
    c.restart(saved)
    c.wait_servers_up()
    # A new client sees all of it.
    mnt2 = c.mount_second(c.dir / "mnt-after")
    check(mnt2, files)
    out = c.rdfs("status").stdout
    assert out


def test_metaserver_kill9_existing_mount_recovers(fresh_cluster):
    c = fresh_cluster
    files = populate(c.mnt)
    saved = c.kill9(c.port)
    c.restart(saved)
    # The mount that lived through the crash reconnects and serves old data...
    check(c.mnt, files)
    # ...and new data once the I/O servers have registered with the new metaserver.
    c.wait_servers_up()
    with open(c.mnt / "after", "wb") as f:
        f.write(b"new data")
        os.fsync(f.fileno())
    assert (c.mnt / "after").read_bytes() == b"new data"


READER = r"""
import errno, os, sys
path, chunk = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
size = os.fstat(fd).st_size
res = []
for off in range(0, size, chunk):
    try:
        b = os.pread(fd, chunk, off)
        res.append("ok:%d:%d" % (off, len(b)))
    except OSError as e:
        res.append("err:%d:%d" % (off, e.errno))
print(" ".join(res))
"""


def read_chunks(path, chunk):
    """Read @path chunk by chunk in a child; {offset: ('ok', n) | ('err', errno)}."""
    p = subprocess.run([sys.executable, "-c", READER, str(path), str(chunk)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=READ_DEADLINE)
    assert p.returncode == 0, p.stderr
    out = {}
    for item in p.stdout.split():
        kind, off, v = item.split(":")
        out[int(off)] = (kind, int(v))
    return out


def test_ioserver_kill9_gives_eio_then_recovers(fresh_cluster):
    c = fresh_cluster
    p = c.mnt / "striped"
    data = os.urandom(8 * MiB)
    with open(p, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    saved = c.kill9(c.ioserver_port(0))
    try:
        res = read_chunks(p, MiB)
    except subprocess.TimeoutExpired:
        pytest.fail("a read of a file with blocks on a killed I/O server hung for %d s"
                    % READ_DEADLINE)
    errs = {off: v for off, (kind, v) in res.items() if kind == "err"}
    oks = {off for off, (kind, _) in res.items() if kind == "ok"}
    assert errs, "every chunk was readable with an I/O server dead: %s" % res
    assert set(errs.values()) == {5}, "errors other than EIO: %s" % errs
    assert oks, "no chunk readable although one I/O server still runs: %s" % res
    c.restart(saved)
    # The restarted server re-registers; reads work again (bounded wait for that).
    wait_until(lambda: all(k == "ok" for k, _ in read_chunks(p, MiB).values()),
               "reads to work after the I/O server came back", attempts=60, interval=1)
    drop_cache(p)
    with open(p, "rb") as f:
        assert_bytes_equal(data, f.read())
    # And new writes land on both servers again.
    with open(c.mnt / "after", "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    drop_cache(c.mnt / "after")
    assert_bytes_equal(data, (c.mnt / "after").read_bytes())
