# SPDX-License-Identifier: MIT
"""`rdfs fsck`: a live metaserver's layouts checked against its allocation maps.

What these tests prove, on real clusters:
  - no false positives: after a mixed workload through the mount (sizes from 0
    to many MiB, overwrites, truncates down and up, fallocate, PUNCH_HOLE and
    ZERO_RANGE, sparse writes, unlink and rename-over of open files, hard links,
    mkdir/rmdir) fsck exits 0 with no problem, every block in use is owned by a
    file, its totals agree with what the mount shows (inodes, files,
    directories, blocks), and open unlinked files are counted as open orphans
    until their last close, then gone;
  - no false positives while the file system is busy: several runs during a
    concurrent writer that creates, truncates, punches, renames and removes;
  - crashes leave nothing fsck objects to: kill -9 of the metaserver in the
    middle of writes and in the middle of unlinks/truncates, then a restart;
    kill -9 of an I/O server while files are removed (its blocks, which no fence
    could reach, are "held", not leaked) and after its restart held is 0;
  - it is not vacuous: faults written into a stopped metaserver's database
    (a layout of no file, a wrong block count, a wrong quota usage record) are
    found (exit 4), left alone by a client's FSCK, and repaired by `rdfs fsck
    --repair`; a layout record copied to a second file (two owners of one run
    of blocks) is found as doubly owned and left alone by the repair;
  - authority: FSCK over a connection that proved only the cluster secret gets
    -EPERM whatever role it claims (claiming "server" fails at the handshake),
    starts no check and repairs nothing, and the server keeps serving (that
    connection and others); the tool with a wrong capability key exits 1;
  - the command line: --help, and usage errors exit 2.
"""
import ctypes
import ctypes.util
import errno
import json
import os
import random
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time

import pytest

import rdfswire as w
from conftest import BIN, MiB, fallocate, fuse_only, listener_pid, run, wait_until
from test_trust import (client_secret, connect, ino_of, ioserver_ports, layout, server_key,
                        write_file)

OP_FSCK = 43
EPERM = -errno.EPERM
ROOT = w.cred(0, 0)
BLK = 4096

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

KINDS = {"leaked", "doubly-owned", "out-of-range", "above-high-water", "unmapped",
         "layout-without-inode", "leaked-orphan", "unlinked-without-orphan", "stale-orphan",
         "block-count", "dangling-entry", "link-count", "corrupt-record", "quota-blocks",
         "quota-inodes", "quota-corrupt"}


# ------------------------------------------------------------------ helpers
def fsck(c, *args, timeout=300):
    """`rdfs fsck --json ARGS`: (exit status, the report as a dict, the process)."""
    p = c.rdfs("fsck", "--json", *args, check=False, timeout=timeout)
    assert p.returncode in (0, 4), ("rdfs fsck failed (exit %d)\n--- stdout\n%s\n--- stderr\n%s"
                                    % (p.returncode, p.stdout, p.stderr))
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("rdfs fsck --json printed no JSON:\n" + p.stdout)
    assert set(rep["counts"]) <= KINDS and {q["kind"] for q in rep["list"]} <= KINDS, p.stdout
    return p.returncode, rep, p


def assert_clean(rc, rep, what):
    """Exit 0, no problem, and every block in use owned by a file, held or quarantined."""
    dump = json.dumps(rep)
    assert rc == 0 and rep["problems"] == 0 and rep["counts"] == {} and rep["list"] == [], \
        "%s: fsck is not clean (exit %d): %s" % (what, rc, dump)
    assert rep["repaired"] == 0, "%s: %s" % (what, dump)
    assert (rep["blocks_owned"] + rep["blocks_held"] + rep["blocks_quarantined"]
            == rep["blocks_in_use"]), "%s: blocks do not add up: %s" % (what, dump)


def clean_fsck(c, what, orphans=0, attempts=60):
    """fsck until no orphan other than @orphans is open (last closes are asynchronous);
    every run on the way must be clean. Returns the last report."""
    for _ in range(attempts):
        rc, rep, _ = fsck(c)
        assert_clean(rc, rep, what)
        if rep["orphans_open"] == orphans:
            return rep
        time.sleep(0.5)
    raise AssertionError("%s: orphans_open stayed %d, not %d: %s"
                         % (what, rep["orphans_open"], orphans, json.dumps(rep)))


def tree_totals(root):
    """What the mount shows: ({ino: st} of files, dirs, symlinks) over the whole tree."""
    files, dirs, links = {}, {}, {}
    dirs[os.stat(root).st_ino] = os.stat(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            if stat.S_ISDIR(st.st_mode):
                dirs[st.st_ino] = st
            elif stat.S_ISLNK(st.st_mode):
                links[st.st_ino] = st
            else:
                files[st.st_ino] = st
    return files, dirs, links


def ms_log(c):
    """The metaserver's log: local-cluster's, then a restarted one's (Cluster.restart)."""
    out = ""
    for path in [c.dir / "log" / "metaserver.log", c.logs / ("restart-%d.log" % c.port)]:
        if path.exists():
            out += path.read_text(errors="replace")
    return out


def fsck_runs_logged(c):
    return len(re.findall(r"fsck: started", ms_log(c)))


def stop_child(p, stop_file, what, timeout=180):
    """Ask a workload child to stop (stop file) and wait for it; its exit status."""
    stop_file.write_text("stop")
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=30)
        pytest.fail("%s did not stop within %d s" % (what, timeout))


def read_progress(path):
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


# A workload in a child process, so a mount that waits for a killed server never
# blocks pytest itself. Errors are counted, not fatal: a server is killed under it.
WORKLOAD = r"""
import os, random, sys, time
root, mode, stop, progress = sys.argv[1:5]
rnd = random.Random(int(sys.argv[5]))
done = errors = 0
blob = os.urandom(4 << 20)
def tick():
    global done
    done += 1
    with open(progress + ".tmp", "w") as f:
        f.write(str(done))
    os.replace(progress + ".tmp", progress)
def names():
    return sorted(n for n in os.listdir(root) if n.startswith("r"))
if mode == "write":
    i = 0
    while not os.path.exists(stop):
        i += 1
        p = os.path.join(root, "w%d" % (i % 24))
        try:
            op = i % 9
            if op == 7:
                os.truncate(p, rnd.randrange(0, 3 << 20))
            elif op == 8:
                os.unlink(p)
            elif op == 5:
                fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    os.unlink(p)
                    os.pwrite(fd, blob[:rnd.randrange(1, 2 << 20)], rnd.randrange(0, 1 << 20))
                    os.fsync(fd)
                finally:
                    os.close(fd)
            else:
                size = rnd.randrange(1, 4 << 20)
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    off = 0
                    while off < size:
                        n = min(256 << 10, size - off)
                        os.pwrite(fd, blob[off:off + n], off)
                        off += n
                    if i % 2:
                        os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError:
            errors += 1
            time.sleep(0.05)
        tick()
else:
    # remove: halve, then unlink, every file there is
    for n in names():
        p = os.path.join(root, n)
        for step in ("truncate", "unlink"):
            for attempt in range(100):
                try:
                    if step == "truncate":
                        os.truncate(p, os.stat(p).st_size // 2 // 4096 * 4096 + 123)
                    else:
                        os.unlink(p)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    errors += 1
                    time.sleep(0.2)
            tick()
print("done %d errors %d" % (done, errors))
"""


def start_workload(c, root, mode, seed=1):
    stop_file = c.dir / ("stop-" + mode)
    progress = c.dir / ("progress-" + mode)
    stop_file.unlink(missing_ok=True)
    progress.unlink(missing_ok=True)
    p = subprocess.Popen([sys.executable, "-c", WORKLOAD, str(root), mode, str(stop_file),
                          str(progress), str(seed)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    return p, stop_file, progress


def kill_metaserver_and_restart(c):
    saved = c.kill9(c.port)
    c.restart(saved)
    c.wait_servers_up()


# ------------------------------------------------------------------ 1 a mixed workload
@fuse_only("fallocate modes are rdfs-fuse's so far")
def test_mixed_workload_is_clean_and_counts_open_orphans(cluster, workdir, other_mount):
    c, d = cluster, workdir
    rnd = random.Random(7)
    expect = {}

    # files of every kind of size
    for i, size in enumerate([0, 1, 4095, 4096, 4097, 65541, MiB - 1, MiB, MiB + 1,
                              3 * MiB + 123, 9 * MiB + 7]):
        data = os.urandom(size)
        write_file(d / ("s%d" % i), data)
        expect["s%d" % i] = data

    # overwrite in the middle (across a MiB boundary) and past the end
    with open(d / "s9", "r+b") as f:
        f.seek(MiB - 100)
        f.write(b"\xAB" * (200 * 1024))
        f.seek(4 * MiB)
        f.write(b"\xCD" * 5000)
        os.fsync(f.fileno())
    # overwrite the whole file with less (O_TRUNC)
    write_file(d / "s10", b"short" * 2000)
    # truncate down (unaligned), then up (sparse), then write into the new part
    os.truncate(d / "s9", 1234567)
    os.truncate(d / "s9", 7 * MiB)
    with open(d / "s9", "r+b") as f:
        f.seek(6 * MiB + 10)
        f.write(os.urandom(8192))
        os.fsync(f.fileno())
    # truncate to 0 and up again, and down to a block boundary
    os.truncate(d / "s8", 0)
    os.truncate(d / "s8", 2 * MiB)
    os.truncate(d / "s7", 3 * BLK)
    # a sparse file: one byte far out
    fd = os.open(d / "sparse", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"z", 64 * MiB + 1)
        os.fsync(fd)
    finally:
        os.close(fd)

    # fallocate: plain (extends), KEEP_SIZE past the end, PUNCH_HOLE, ZERO_RANGE
    fd = os.open(d / "falloc", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, 2 * MiB)
        assert os.fstat(fd).st_size == 2 * MiB
        fallocate(fd, FALLOC_FL_KEEP_SIZE, 2 * MiB, MiB)
        assert os.fstat(fd).st_size == 2 * MiB
        os.pwrite(fd, os.urandom(300000), 100000)
        os.fsync(fd)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 50000, 200000)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MiB, MiB)   # aligned
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * MiB - 4096, 2 * MiB)
        fallocate(fd, FALLOC_FL_ZERO_RANGE, 4096, 3 * 4096 + 17)
        os.fsync(fd)
    finally:
        os.close(fd)
    fd = os.open(d / "s5", os.O_RDWR)      # 64 KiB + 5: punch all of it
    try:
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1 << 20)
    finally:
        os.close(fd)

    # hard links: three names, then the first goes; one more and it goes too
    write_file(d / "h1", os.urandom(MiB + 3))
    os.mkdir(d / "hd")
    os.link(d / "h1", d / "h2")
    os.link(d / "h1", d / "hd" / "h3")
    os.unlink(d / "h1")
    os.link(d / "h2", d / "h4")
    os.unlink(d / "h4")
    assert os.stat(d / "h2").st_nlink == 2

    # rename over an existing file (its blocks go), over a file with another link
    # (it keeps them), and a directory rename
    write_file(d / "rsrc", os.urandom(2 * MiB))
    write_file(d / "rdst", os.urandom(3 * MiB))
    os.rename(d / "rsrc", d / "rdst")
    write_file(d / "lsrc", os.urandom(MiB))
    os.rename(d / "lsrc", d / "hd" / "h3")        # h2 (same inode as h3 was) stays
    assert os.stat(d / "h2").st_nlink == 1

    # mkdir/rmdir, files in directories that go again
    os.makedirs(d / "a" / "b" / "c")
    write_file(d / "a" / "b" / "c" / "tmp", os.urandom(500000))
    os.unlink(d / "a" / "b" / "c" / "tmp")
    os.rmdir(d / "a" / "b" / "c")
    os.rmdir(d / "a" / "b")
    os.makedirs(d / "x" / "y")
    os.rename(d / "x", d / "x2")
    os.symlink("s3", d / "sym")

    # open unlinked files: one unlinked and written on, one renamed over while open
    orphan = os.open(d / "orphan", os.O_RDWR | os.O_CREAT, 0o644)
    victim = os.open(d / "victim", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(orphan, os.urandom(300 * 1024))
        os.fsync(orphan)
        os.unlink(d / "orphan")
        os.pwrite(orphan, os.urandom(700 * 1024), 2 * MiB)    # it grows after the unlink
        os.fsync(orphan)
        os.write(victim, os.urandom(123456))
        os.fsync(victim)
        write_file(d / "newer", b"n" * 10000)
        os.rename(d / "newer", d / "victim")
        # and one that is closed at once: nothing may stay of it
        fd = os.open(d / "gone", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, os.urandom(MiB))
        os.unlink(d / "gone")
        os.close(fd)
        time.sleep(1.2)        # attribute caches (1 s) of the mount expire
        orphan_blocks = os.fstat(orphan).st_blocks + os.fstat(victim).st_blocks

        rep = clean_fsck(c, "with two open unlinked files", orphans=2)
        # the totals agree with what a mount without caches shows
        files, dirs, links = tree_totals(other_mount)
        st_blocks = sum(st.st_blocks for st in files.values()) + orphan_blocks
        want = dict(files=len(files) + 2, dirs=len(dirs), inodes=len(files) + 2 + len(dirs)
                    + len(links), blocks_owned=st_blocks // 8)
        got = {k: rep[k] for k in want}
        assert got == want, "fsck's totals %s, the mount's %s: %s" % (got, want, json.dumps(rep))
        assert rep["blocks_owned"] == rep["blocks_in_use"], json.dumps(rep)
        assert rep["blocks_held"] == 0 and rep["blocks_quarantined"] == 0, json.dumps(rep)
    finally:
        os.close(orphan)
        os.close(victim)
    after = clean_fsck(c, "after the last close of the open unlinked files", orphans=0)
    assert after["orphans_open"] == 0
    assert after["files"] == rep["files"] - 2, json.dumps(after)
    assert after["blocks_owned"] == rep["blocks_owned"] - orphan_blocks // 8, json.dumps(after)
    assert after["blocks_owned"] == after["blocks_in_use"], json.dumps(after)
    # the data is what was written
    assert (d / "s3").read_bytes() == expect["s3"]
    assert (d / "sym").resolve().name == "s3"


# ------------------------------------------------------------------ 2 a busy file system
def test_fsck_during_a_concurrent_writer_is_clean(cluster, workdir):
    c, d = cluster, workdir
    stop = threading.Event()
    errors, ops = [], [0]

    def writer(seed):
        rnd = random.Random(seed)
        blob = os.urandom(3 * MiB)
        i = 0
        try:
            while not stop.is_set():
                i += 1
                p = d / ("t%d-%d" % (seed, i % 16))
                op = rnd.randrange(8)
                if op <= 2:
                    size = rnd.randrange(0, 3 * MiB)
                    with open(p, "wb") as f:
                        f.write(blob[:size])
                        if op == 0:
                            os.fsync(f.fileno())
                elif op == 3 and p.exists():
                    os.truncate(p, rnd.randrange(0, 2 * MiB))
                elif op == 4 and p.exists():
                    os.unlink(p)
                elif op == 5:
                    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                    try:
                        os.pwrite(fd, blob[:MiB], 0)
                        os.unlink(p)
                        os.pwrite(fd, blob[:rnd.randrange(1, MiB)], MiB)
                    finally:
                        os.close(fd)
                elif op == 6 and p.exists():
                    q = d / ("t%d-%d" % (seed, rnd.randrange(16)))
                    os.rename(p, q)
                elif op == 7:
                    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                    try:
                        os.pwrite(fd, blob[:2 * MiB], 0)
                        os.fsync(fd)
                        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  rnd.randrange(0, MiB), MiB)
                    finally:
                        os.close(fd)
                ops[0] += 1
        except Exception as e:      # the test fails with it below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    reports = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline or len(reports) < 5:
            rc, rep, _ = fsck(c)
            assert_clean(rc, rep, "fsck run %d during the writer" % (len(reports) + 1))
            reports.append(rep)
            if errors:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors, "the writer failed: %s" % errors
    assert not any(t.is_alive() for t in threads), "the writer did not stop"
    assert ops[0] > 50, "the writer did only %d operations" % ops[0]
    # the runs saw different states: the workload really ran under them
    assert len({(r["extents"], r["blocks_owned"]) for r in reports}) > 1, reports
    print("%d fsck runs during %d operations" % (len(reports), ops[0]))
    clean_fsck(c, "after the writer")


# ------------------------------------------------------------------ 3 crashes
def test_metaserver_kill9_during_writes_leaves_fsck_clean(fresh_cluster):
    c = fresh_cluster
    root = c.mnt / "w"
    root.mkdir()
    p, stop_file, progress = start_workload(c, root, "write")
    try:
        wait_until(lambda: read_progress(progress) >= 30 or p.poll() is not None,
                   "the writer to get going")
        assert p.poll() is None, "the writer ended early: %s" % (p.communicate(),)
        kill_metaserver_and_restart(c)
        # it goes on after the restart
        at = read_progress(progress)
        wait_until(lambda: read_progress(progress) >= at + 10 or p.poll() is not None,
                   "the writer to go on after the restart")
        rc, rep, _ = fsck(c)
        assert_clean(rc, rep, "during the writer, after the restart")
    finally:
        status = stop_child(p, stop_file, "the writer")
    out, err = p.communicate()
    assert status == 0, "the writer: %s %s" % (out, err)
    rep = clean_fsck(c, "after a metaserver kill -9 during writes")
    assert rep["blocks_owned"] == rep["blocks_in_use"] and rep["blocks_held"] == 0, \
        json.dumps(rep)
    assert rep["files"] > 0 and rep["blocks_owned"] > 0, json.dumps(rep)
    print("writer:", out.strip(), "fsck:", json.dumps(rep))


def test_metaserver_kill9_during_unlinks_and_truncates_leaves_fsck_clean(fresh_cluster):
    c = fresh_cluster
    root = c.mnt / "r"
    root.mkdir()
    blob = os.urandom(MiB)
    n = 240
    for i in range(n):
        with open(root / ("r%04d" % i), "wb") as f:
            f.write(blob[:(64 << 10) * (1 + i % 8) + i])
    rc, rep, _ = fsck(c)
    assert_clean(rc, rep, "after the files were made")
    assert rep["files"] == n, json.dumps(rep)
    p, stop_file, progress = start_workload(c, root, "remove")
    try:
        wait_until(lambda: read_progress(progress) >= n // 3 or p.poll() is not None,
                   "the removals to get going", interval=0.05, attempts=1200)
        assert p.poll() is None and read_progress(progress) < 2 * n, \
            "the removals ended before the kill: make them longer"
        kill_metaserver_and_restart(c)
        status = p.wait(timeout=300)
    finally:
        if p.poll() is None:
            stop_child(p, stop_file, "the removals")
    out, err = p.communicate()
    assert status == 0, "the removals: %s %s" % (out, err)
    assert list(root.iterdir()) == []
    rep = clean_fsck(c, "after a metaserver kill -9 during unlinks and truncates")
    assert rep["files"] == 0 and rep["extents"] == 0, json.dumps(rep)
    assert rep["blocks_owned"] == rep["blocks_in_use"] == 0, json.dumps(rep)
    print("removals:", out.strip(), "fsck:", json.dumps(rep))


REMOVER = r"""
import os, sys
progress = sys.argv[1]
for i, p in enumerate(sys.argv[2:]):
    os.unlink(p)
    with open(progress, "w") as f:
        f.write(str(i + 1))
"""


def test_ioserver_kill9_during_removals_holds_its_blocks_until_it_returns(fresh_cluster):
    """Blocks freed on an I/O server that a fence could not reach are held for its
    next registration: fsck counts them as held, not leaked, and after the server's
    restart they are free and fsck is clean.

    The server is stopped (SIGSTOP) before the removals start, so the fence of the
    first removal is certainly under way when it is killed: a plain kill -9 closes
    its registration at once, and the blocks of every later removal are freed
    without a fence (a server that is down gets a new epoch before it serves)."""
    c = fresh_cluster
    ports = ioserver_ports(c)                   # {server id: port}
    victim_port = c.ioserver_port(0)
    victim = next(sid for sid, port in ports.items() if port == victim_port)
    paths = [c.mnt / ("f%d" % i) for i in range(6)]
    on_victim = []
    for p in paths:
        write_file(p, os.urandom(4 * MiB))
    ms = connect(c.port, client_secret(c))
    try:
        for p in paths:
            status, lay = layout(ms, ino_of(ms, c, p), 4 * MiB, ROOT)
            assert status == 0
            on_victim.append(sum(-(-e["length"] // BLK) for e in lay["extents"]
                                 if e["server"] == victim))
    finally:
        ms.close()
    assert on_victim[0] > 0, "the first file has no block on I/O server %d" % victim
    rc, rep, _ = fsck(c)
    assert_clean(rc, rep, "before the crash")

    pid = listener_pid(victim_port)
    os.kill(pid, signal.SIGSTOP)
    progress = c.dir / "progress-unlink"
    rm = subprocess.Popen([sys.executable, "-c", REMOVER, str(progress)] + [str(p) for p in paths],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)                   # the first removal waits for its fence
        saved = c.kill9(victim_port)    # SIGKILL reaches a stopped process too
        out, err = rm.communicate(timeout=120)
    finally:
        if rm.poll() is None:
            rm.kill()
            rm.wait(timeout=30)
        if listener_pid(victim_port) == pid:
            os.kill(pid, signal.SIGKILL)
    assert rm.returncode == 0, "the removals failed: %s %s" % (out, err)
    assert not any(p.exists() for p in paths)

    rc, rep, _ = fsck(c)
    dump = json.dumps(rep)
    assert rc == 0 and rep["problems"] == 0 and "leaked" not in rep["counts"], \
        "I/O server down, its blocks held: fsck is not clean (exit %d): %s" % (rc, dump)
    assert on_victim[0] <= rep["blocks_held"] <= sum(on_victim), \
        "held %d, the first file had %d blocks there, all %d: %s" % (
            rep["blocks_held"], on_victim[0], sum(on_victim), dump)
    assert rep["blocks_owned"] + rep["blocks_held"] == rep["blocks_in_use"], dump
    assert rep["files"] == 0 and rep["blocks_owned"] == 0, dump

    c.restart(saved)
    c.wait_servers_up()
    rep = clean_fsck(c, "after the I/O server came back")
    assert rep["blocks_held"] == 0, json.dumps(rep)
    assert rep["blocks_owned"] == rep["blocks_in_use"] == 0, json.dumps(rep)
    # and the space is usable again on both servers
    write_file(c.mnt / "after", os.urandom(8 * MiB))
    clean_fsck(c, "after new writes")


# ------------------------------------------------------------------ 4 faults, and who may repair them
class LevelDB:
    """Just enough of LevelDB's C API (the library the metaserver uses) to edit a
    stopped metaserver's database."""

    def __init__(self, path):
        name = ctypes.util.find_library("leveldb")
        if not name:
            pytest.skip("no LevelDB library to edit the metaserver's database with")
        self.lib = ctypes.CDLL(name)
        L, vp, sz = self.lib, ctypes.c_void_p, ctypes.c_size_t
        for name, res, args in [
                ("leveldb_options_create", vp, []), ("leveldb_options_destroy", None, [vp]),
                ("leveldb_open", vp, [vp, ctypes.c_char_p, vp]),
                ("leveldb_close", None, [vp]),
                ("leveldb_writeoptions_create", vp, []),
                ("leveldb_writeoptions_set_sync", None, [vp, ctypes.c_ubyte]),
                ("leveldb_readoptions_create", vp, []),
                ("leveldb_put", None, [vp, vp, ctypes.c_char_p, sz, ctypes.c_char_p, sz, vp]),
                ("leveldb_get", vp, [vp, vp, ctypes.c_char_p, sz, ctypes.POINTER(sz), vp]),
                ("leveldb_delete", None, [vp, vp, ctypes.c_char_p, sz, vp]),
                ("leveldb_free", None, [vp])]:
            getattr(L, name).restype = res
            getattr(L, name).argtypes = args
        self.opts = L.leveldb_options_create()
        self.wo = L.leveldb_writeoptions_create()
        L.leveldb_writeoptions_set_sync(self.wo, 1)
        self.ro = L.leveldb_readoptions_create()
        e = ctypes.c_char_p()
        self.db = L.leveldb_open(self.opts, str(path).encode(), ctypes.byref(e))
        assert not e.value, "leveldb_open %s: %s" % (path, e.value)

    def get(self, key):
        e, n = ctypes.c_char_p(), ctypes.c_size_t()
        v = self.lib.leveldb_get(self.db, self.ro, key, len(key), ctypes.byref(n), ctypes.byref(e))
        assert not e.value, e.value
        if not v:
            return None
        out = ctypes.string_at(v, n.value)
        self.lib.leveldb_free(v)
        return out

    def put(self, key, val):
        e = ctypes.c_char_p()
        self.lib.leveldb_put(self.db, self.wo, key, len(key), val, len(val), ctypes.byref(e))
        assert not e.value, e.value

    def delete(self, key):
        e = ctypes.c_char_p()
        self.lib.leveldb_delete(self.db, self.wo, key, len(key), ctypes.byref(e))
        assert not e.value, e.value

    def close(self):
        self.lib.leveldb_close(self.db)


def be64(v):
    return struct.pack(">Q", v)


def bump_usage(db, typ, ident, blocks=0, inodes=0):
    """Add to the quota usage record of user (0) or group (1) @ident: blocks at
    offset 1, inodes at 9 of its value (metaserver/ms_keys.h)."""
    key = b"Q" + bytes([typ]) + struct.pack(">I", ident)
    rec = bytearray(db.get(key))
    for off, add in ((1, blocks), (9, inodes)):
        struct.pack_into("<Q", rec, off, (struct.unpack_from("<Q", rec, off)[0] + add) % (1 << 64))
    db.put(key, bytes(rec))


def fsck_wire(conn, body=b""):
    """FSCK on @conn: (status, {field: [values]} of the FsckReply)."""
    status, rbody = w.call(conn, OP_FSCK, body, timeout=120)
    return status, (w.decode(rbody) if status == 0 else None)


def test_injected_faults_are_found_and_only_the_server_key_repairs_them(fresh_cluster):
    c = fresh_cluster
    keep, freed = c.mnt / "keep", c.mnt / "freed"
    write_file(keep, os.urandom(MiB))
    write_file(freed, os.urandom(MiB))
    ms = connect(c.port, client_secret(c))
    try:
        keep_ino = ino_of(ms, c, keep)
        status, lay = layout(ms, ino_of(ms, c, freed), MiB, ROOT)
        assert status == 0
    finally:
        ms.close()
    ext = lay["extents"][0]
    os.unlink(freed)        # its blocks are free again, below the high-water mark
    assert_clean(*fsck(c)[:2], "before the faults")

    # with the metaserver down: a layout record of an inode that does not exist,
    # on the freed blocks; a block count 8 too high on "keep" (its owner's usage
    # with it, as the batch of a wrong count would have); and group 0's usage
    # record 3 inodes off
    saved = c.kill9(c.port)
    db = LevelDB(c.dir / "meta")
    try:
        ghost = 0x7fff0000
        rec = struct.pack("<IIIQB", 0, 8, ext["server"], ext["block"], 0)
        db.put(b"L" + be64(ghost) + be64(0), rec)
        ikey = b"I" + be64(keep_ino)
        inode = bytearray(db.get(ikey))
        blocks = struct.unpack_from("<Q", inode, 37)[0]
        struct.pack_into("<Q", inode, 37, blocks + 8)
        db.put(ikey, bytes(inode))
        bump_usage(db, 0, 0, blocks=8)
        bump_usage(db, 1, 0, blocks=8, inodes=3)
    finally:
        db.close()
    c.restart(saved)
    c.wait_servers_up()

    rc, rep, _ = fsck(c)
    want = {"layout-without-inode": 1, "block-count": 1, "quota-inodes": 1}
    assert rc == 4 and rep["counts"] == want and rep["problems"] == 3 and rep["repaired"] == 0, \
        json.dumps(rep)
    kinds = {(p["kind"], p["ino"]) for p in rep["list"]}
    assert kinds == {("layout-without-inode", ghost), ("block-count", keep_ino),
                     ("quota-inodes", 0)}, json.dumps(rep)
    # a client asks for the repair: refused, and nothing is touched
    runs = fsck_runs_logged(c)
    for claim in ("client", "ioserver", "metaserver"):
        conn = connect(c.port, client_secret(c), claim)
        try:
            assert fsck_wire(conn, w.field_varint(1, 1))[0] == EPERM, claim
        finally:
            conn.close()
    rc, again, _ = fsck(c)
    assert rc == 4 and again["counts"] == want and again["repaired"] == 0, json.dumps(again)
    assert again["blocks_quarantined"] == 0
    wait_until(lambda: fsck_runs_logged(c) == runs + 1, "the metaserver's log of the fsck")
    assert fsck_runs_logged(c) == runs + 1, "a client's FSCK started a check"

    # the server key repairs them all
    rc, fixed, _ = fsck(c, "--repair")
    assert rc == 0 and fixed["problems"] == 3 and fixed["repaired"] == 3, json.dumps(fixed)
    assert all(p["repaired"] for p in fixed["list"]), json.dumps(fixed)
    rep = clean_fsck(c, "after the repair")
    assert rep["blocks_owned"] == rep["blocks_in_use"], json.dumps(rep)
    assert os.stat(keep).st_size == MiB


def test_doubly_owned_blocks_are_found_and_left_alone(fresh_cluster):
    """A layout record copied from one file to another (written into the stopped
    metaserver's database): both files now own the same blocks. fsck reports the
    second owner with the run (exit 4), --repair does not touch it (which file's
    data is it?), and once the record is put back fsck is clean again."""
    c = fresh_cluster
    a, b = c.mnt / "a", c.mnt / "b"
    data = os.urandom(64 << 10)
    write_file(a, data)
    write_file(b, b"")
    ms = connect(c.port, client_secret(c))
    try:
        a_ino, b_ino = ino_of(ms, c, a), ino_of(ms, c, b)
        status, lay = layout(ms, a_ino, len(data), ROOT)
        assert status == 0
    finally:
        ms.close()
    assert len(lay["extents"]) == 1, lay
    ext = lay["extents"][0]
    nblocks = len(data) // BLK
    assert_clean(*fsck(c)[:2], "before the fault")

    saved = c.kill9(c.port)
    db = LevelDB(c.dir / "meta")
    try:
        rec = db.get(b"L" + be64(a_ino) + be64(0))
        assert rec is not None and len(rec) == 21, rec
        # offset in the chunk, count, server, volume block
        assert struct.unpack_from("<IIIQ", rec) == (0, nblocks, ext["server"], ext["block"]), rec
        ikey = b"I" + be64(b_ino)
        b_inode = db.get(ikey)
        inode = bytearray(b_inode)
        assert struct.unpack_from("<QQ", inode, 29) == (0, 0)          # size, blocks
        struct.pack_into("<QQ", inode, 29, len(data), nblocks)
        db.put(b"L" + be64(b_ino) + be64(0), rec)
        db.put(ikey, bytes(inode))
        # b's owner (root) is charged for them, as a real change would: only the
        # double ownership is wrong
        bump_usage(db, 0, 0, blocks=nblocks)
        bump_usage(db, 1, 0, blocks=nblocks)
    finally:
        db.close()
    c.restart(saved)
    c.wait_servers_up()

    want = [{"kind": "doubly-owned", "ino": b_ino, "other_ino": 0, "server": ext["server"],
             "block": ext["block"], "count": nblocks, "repaired": False}]
    for args in ((), ("--repair",)):
        rc, rep, _ = fsck(c, *args)
        dump = json.dumps(rep)
        assert rc == 4 and rep["counts"] == {"doubly-owned": 1}, dump
        assert rep["problems"] == 1 and rep["repaired"] == 0 and rep["list"] == want, dump
        assert rep["blocks_owned"] == rep["blocks_in_use"] + nblocks, dump
    # both names read the one run of blocks: b shows a's bytes
    wait_until(lambda: os.stat(b).st_size == len(data), "b's new size past the attribute cache")
    assert b.read_bytes() == data and a.read_bytes() == data

    # put b back as it was: clean again (what the fixture checks at its end)
    saved = c.kill9(c.port)
    db = LevelDB(c.dir / "meta")
    try:
        db.delete(b"L" + be64(b_ino) + be64(0))
        db.put(b"I" + be64(b_ino), b_inode)
        bump_usage(db, 0, 0, blocks=-nblocks)
        bump_usage(db, 1, 0, blocks=-nblocks)
    finally:
        db.close()
    c.restart(saved)
    c.wait_servers_up()
    rep = clean_fsck(c, "after the record was put back")
    assert rep["blocks_owned"] == rep["blocks_in_use"] == nblocks, json.dumps(rep)


def test_fsck_needs_the_server_key(cluster):
    c = cluster
    runs = fsck_runs_logged(c)
    bodies = [b"", w.field_varint(1, 1), w.field_varint(1, 1) + w.field_varint(2, 10)]
    for claim in ("client", "ioserver"):
        for body in bodies:
            conn = connect(c.port, client_secret(c), claim)
            try:
                status, _ = fsck_wire(conn, body)
                assert status == EPERM, "FSCK %r claiming %s: status %d" % (body, claim, status)
                # an error reply, not a dropped connection: the same one goes on
                status, _ = w.call(conn, w.OP_GETATTR, w.field_bytes(1, ROOT)
                                   + w.field_varint(2, w.ROOT_INO))
                assert status == 0, "GETATTR after a refused FSCK: %d" % status
            finally:
                conn.close()
    # claiming "server" with the cluster secret does not even get through the handshake
    conn = w.Conn(c.port)
    try:
        res = w.authenticate(conn, client_secret(c), "server")
        assert res == "closed" or res[0] == "error", res
    finally:
        conn.close()
    # the server keeps serving: a request on another connection works
    conn = connect(c.port, client_secret(c))
    try:
        status, _ = w.call(conn, w.OP_GETATTR, w.field_bytes(1, ROOT) + w.field_varint(2, w.ROOT_INO))
        assert status == 0, "GETATTR after the refused FSCKs: %d" % status
    finally:
        conn.close()
    # and the server key may: the same request, answered with a report
    conn = connect(c.port, server_key(c), "server")
    try:
        status, r = fsck_wire(conn)
        assert status == 0, "FSCK with the server key: %d" % status
        assert r.get(1, [0])[0] >= 1 and r.get(10, [0])[0] == 0, r   # inodes, problems
    finally:
        conn.close()
    wait_until(lambda: fsck_runs_logged(c) >= runs + 1, "the metaserver's log of the fsck")
    assert fsck_runs_logged(c) == runs + 1, "a refused FSCK started a check"

    # the tool with a wrong capability key fails (exit 1); the right one, copied, works
    tmp = c.dir / "wrongkey"
    tmp.mkdir(exist_ok=True)
    wrong, right = tmp / "cap.key", tmp / "right.key"
    for path, content in ((wrong, os.urandom(32).hex() + "\n"),
                          (right, (c.dir / "cap.key").read_text())):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, content.encode())
        os.close(fd)
    conf = c.conf.read_text()
    for key, want in ((wrong, 1), (right, 0)):
        path = tmp / ("%s.conf" % key.stem)
        path.write_text(re.sub(r"(?m)^cap_key_file = .*$", "cap_key_file = %s" % key, conf))
        p = run([BIN / "rdfs", "--config", path, "fsck"], check=False, timeout=120)
        assert p.returncode == want, "fsck with cap_key_file %s: exit %d\n%s%s" % (
            key.name, p.returncode, p.stdout, p.stderr)
    p = c.rdfs("--cap-key-file", wrong, "fsck", check=False)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    shutil.rmtree(tmp)


# ------------------------------------------------------------------ 5 the command line
def test_fsck_command_line(cluster):
    c = cluster
    p = c.rdfs("fsck", "--help")
    assert p.returncode == 0 and "--repair" in p.stdout and "usage: rdfs fsck" in p.stdout, p.stdout
    for args in (["extra-arg"], ["--max-problems", "x"], ["--max-problems", "100001"],
                 ["--max-problems="], ["--wait", "0"], ["--wait", "x"], ["--bogus"],
                 ["--json", "extra-arg"]):
        p = c.rdfs("fsck", *args, check=False)
        assert p.returncode == 2, "rdfs fsck %s: exit %d\n%s%s" % (" ".join(args), p.returncode,
                                                                   p.stdout, p.stderr)
        assert p.stdout == "" or "{" not in p.stdout, "it ran the check: %s" % p.stdout
    # the table form: clean, and exit 0
    p = c.rdfs("fsck")
    assert p.returncode == 0 and p.stdout.rstrip().endswith("clean"), p.stdout
    # --max-problems 0 still counts
    rc, rep, _ = fsck(c, "--max-problems", "0")
    assert rc == 0 and rep["list"] == [], json.dumps(rep)
