# SPDX-License-Identifier: MIT
"""rdfs-fuse's own session loop (client-fuse/session_loop.c): it stops cleanly
on SIGTERM and on unmount, hands whole-chunk WRITE buffers to write-behind
without losing a byte, and its single-threaded form (-s) cannot deadlock on a
write that makes the kernel write a mapped page back through it."""
import os
import signal
import subprocess
import sys

from conftest import BIN, MiB, assert_bytes_equal, fuse_only, wait_until


def _start(cluster, mnt, *extra):
    """rdfs-fuse in the foreground on @mnt (its own process, for signals)."""
    mnt.mkdir(parents=True, exist_ok=True)
    log = open(cluster.dir / ("%s.log" % mnt.name), "ab")
    p = subprocess.Popen([BIN / "rdfs-fuse", "-f", *extra, "-o",
                          "secret_file=%s,attr_timeout=0,entry_timeout=0" % cluster.secret,
                          cluster.mount_spec, mnt], stdout=log, stderr=log)
    try:
        wait_until(lambda: os.path.ismount(mnt) or p.poll() is not None, "mount at %s" % mnt)
    except BaseException:
        p.kill()
        raise
    assert p.poll() is None, "rdfs-fuse exited with %s" % p.returncode
    return p


def _stop(cluster, mnt, p):
    """Unmount while the daemon still serves (a killed one leaves a dead mount
    behind), then make sure it is gone."""
    try:
        cluster.unmount(mnt)
    finally:
        if p.poll() is None:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)


def _write_chunks_and_check(path, other):
    """Whole-chunk writes (sent from the request buffers) and odd ones around them."""
    data = os.urandom(6 * MiB + 12345)
    with open(path, "wb") as f:            # write-only: direct_writes
        f.write(data[:4 * MiB])
        f.write(data[4 * MiB:4 * MiB + 100])
        f.write(data[4 * MiB + 100:])
    with open(path, "r+b") as f:           # read-write: through the page cache
        f.seek(MiB)
        f.write(b"r" * MiB)
    data = data[:MiB] + b"r" * MiB + data[2 * MiB:]
    with open(path, "rb") as f:
        assert_bytes_equal(data, f.read(), "read back through the writing mount")
    with open(other, "rb") as f:
        assert_bytes_equal(data, f.read(), "read back through the cluster's mount")


@fuse_only("rdfs-fuse's session loop and signals")
def test_sigterm_ends_the_session_and_unmounts(cluster, workdir):
    mnt = cluster.dir / "mnt-term"
    p = _start(cluster, mnt)
    try:
        _write_chunks_and_check(mnt / workdir.name / "f", workdir / "f")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0
        assert not os.path.ismount(mnt)
    finally:
        _stop(cluster, mnt, p)


@fuse_only("rdfs-fuse's session loop")
def test_unmount_ends_the_session(cluster, workdir):
    mnt = cluster.dir / "mnt-umount"
    p = _start(cluster, mnt)
    try:
        (mnt / workdir.name / "g").write_bytes(b"x" * MiB)
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True, timeout=60)
        assert p.wait(timeout=60) == 0
        assert (workdir / "g").read_bytes() == b"x" * MiB
    finally:
        _stop(cluster, mnt, p)


# Run in a child so that a deadlock fails the test (timeout) instead of hanging it.
_MAPPED_THEN_WRITTEN = r"""
import mmap, os, sys
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"a" * 8192)
w = os.open(path, os.O_WRONLY)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 8192)
m[0:100] = b"m" * 100
os.pwrite(w, b"w" * 100, 50)
m.flush()
m.close()
os.close(fd)
os.close(w)
with open(path, "rb") as f:
    got = f.read()
sys.exit(0 if got == b"m" * 50 + b"w" * 100 + b"a" * (8192 - 150) else 1)
"""


def _abort_connection(dev):
    """Abort the FUSE connection of the mount on @dev (fusectl): every request
    waiting on it fails, so a deadlocked mount lets its processes go."""
    ctl = "/sys/fs/fuse/connections"
    if not os.path.exists(os.path.join(ctl, str(os.minor(dev)))):
        subprocess.run(["mount", "-t", "fusectl", "none", ctl], timeout=30)
    with open(os.path.join(ctl, str(os.minor(dev)), "abort"), "w") as f:
        f.write("1")


@fuse_only("rdfs-fuse's -s")
def test_single_threaded_session_serves_writes_over_a_dirty_mapping(cluster, workdir):
    mnt = cluster.dir / "mnt-single"
    p = _start(cluster, mnt, "-s")
    dev = os.stat(mnt).st_dev
    try:
        child = subprocess.Popen([sys.executable, "-c", _MAPPED_THEN_WRITTEN,
                                  str(mnt / workdir.name / "mapped")])
        try:
            rc = child.wait(timeout=120)
        except subprocess.TimeoutExpired:
            _abort_connection(dev)
            child.wait(timeout=60)
            raise AssertionError("deadlock: a write over a dirty mapping never finished "
                                 "on a single-threaded rdfs-fuse (connection aborted)")
        assert rc == 0
        _write_chunks_and_check(mnt / workdir.name / "f", workdir / "f")
    finally:
        _stop(cluster, mnt, p)
