# SPDX-License-Identifier: MIT
"""Hosts whose clocks disagree: an I/O server or a client an hour ahead of (or
behind) the metaserver still reads and writes every byte.

Capabilities and fences carry absolute expiry times of the metaserver's clock
(CLOCK_REALTIME there). The I/O server checks them against the metaserver's
clock as it learned it at registration, and a client judges when a capability
it holds runs out from what the metaserver said it had left, so neither depends
on the hosts' clocks agreeing (NTP keeps them within milliseconds; a host that
booted without it may be off by hours). Each process here runs with Debian's
libfaketime preloaded (FAKETIME=+/-1h); the tests skip, saying why, without it.
"""
import os
import subprocess
import sys

import pytest

from conftest import MiB, _start, _stop, assert_bytes_equal, drop_cache, fsck_clean

FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/faketime/libfaketimeMT.so.1")
FAKETIME_LIB = next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)

pytestmark = pytest.mark.skipif(FAKETIME_LIB is None,
                                reason="libfaketime is not installed (make deps installs it)")


def skewed(offset):
    """The environment of a process whose clocks run @offset (e.g. "+3600") seconds
    off. CLOCK_MONOTONIC moves by as much, which no interval notices (libfaketime's
    timed waits are wrong when it fakes one clock and not the other)."""
    return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": offset, "FAKETIME_NO_CACHE": "1"}


@pytest.fixture(scope="module")
def c2():
    c = _start("skew", 2)
    yield c
    try:
        fsck_clean(c)
    finally:
        _stop(c)


def io_run(code, timeout=120):
    """Run @code (Python) in a child with a deadline: a client that loops on
    capabilities it thinks expired must fail the test, not hang it."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def write_and_check(c, path, reader, size=5 * MiB + 321):
    """Write @size random bytes to @path (striped over both servers), fsync, and read
    them back through @reader (another mount's view of the same file)."""
    data = os.urandom(size)
    src = c.dir / (path.name + ".src")
    with open(src, "wb") as f:          # the bytes to write, outside the mount
        f.write(data)
    io_run("import os,shutil\n"
           "d=open(%r,'rb').read()\n"
           "with open(%r,'wb') as f:\n"
           "    f.write(d); f.flush(); os.fsync(f.fileno())\n" % (str(src), str(path)))
    os.unlink(src)
    drop_cache(reader)
    assert_bytes_equal(data, open(reader, "rb").read(), "read back across the skew")


@pytest.mark.parametrize("offset", ["+3600", "-3600"])
def test_ioserver_with_a_skewed_clock_serves(c2, offset):
    """One I/O server restarted an hour ahead (or behind): files striped over both
    servers are written through one mount and read through another; a capability
    the metaserver granted for 10 minutes is neither expired nor stretched there."""
    saved = c2.kill9(c2.ioserver_port(0))
    c2.restart(saved, env=skewed(offset))
    c2.wait_servers_up()
    name = "io%s" % offset.replace("+", "ahead").replace("-", "behind")
    write_and_check(c2, c2.mnt / name, c2.mnt / name)
    other = c2.mount_second(c2.dir / ("mnt-" + name))
    try:
        drop_cache(c2.mnt / name)
        with open(c2.mnt / name, "rb") as f:
            want = f.read()
        assert_bytes_equal(want, open(other / name, "rb").read(), "through a second mount")
    finally:
        c2.unmount(other)
    # back to the real clock for the next test
    saved = c2.kill9(c2.ioserver_port(0))
    c2.restart(saved)
    c2.wait_servers_up()


@pytest.mark.parametrize("offset", ["+3600", "-3600"])
def test_client_with_a_skewed_clock_reads_and_writes(c2, offset):
    """A client an hour ahead (or behind) of the metaserver writes a file and reads
    one back. (It counts a capability's lifetime from what the metaserver said was
    left: by its own clock, an hour ahead, every cached layout would look expired
    and be asked for again, which costs requests, not bytes, so this checks the
    bytes.)"""
    name = "client%s" % offset.replace("+", "ahead").replace("-", "behind")
    mnt = c2.mount_second(c2.dir / ("mnt-" + name), env=skewed(offset))
    try:
        write_and_check(c2, mnt / name, c2.mnt / name)
        theirs = os.urandom(3 * MiB + 7)
        with open(c2.mnt / (name + "-main"), "wb") as f:
            f.write(theirs)
            os.fsync(f.fileno())
        out = io_run("import sys\nsys.stdout.write(open(%r,'rb').read().hex())\n"
                     % str(mnt / (name + "-main")))
        assert_bytes_equal(theirs, bytes.fromhex(out), "read by the skewed client")
    finally:
        c2.unmount(mnt)
