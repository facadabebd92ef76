# SPDX-License-Identifier: MIT
"""Fixtures for the integration tests: real clusters from deploy/local-cluster.

- `cluster`: one cluster (1 metaserver, 2 I/O servers, a FUSE mount) for the
  whole session, shared by the tests that do not disturb each other; each test
  works in its own directory (`workdir`).
- `fresh_cluster`: a cluster of its own for a test that kills or attacks
  servers. Torn down when the test ends, pass or fail.

Each cluster gets its own port base P from 7200-7299 (metaserver P, I/O server
i on P+100+i), so every port stays inside 7200-7599 and none is shared; under
pytest-xdist (`-n 2 --dist loadfile`, as make test-integration runs it) each
worker takes its bases from a slice of that range of its own.

RDFS_TEST_TRANSPORT=rdma (default tcp) starts every cluster with
`local-cluster up --transport rdma` (at RDFS_TEST_RDMA_ADDR if set, else the
address local-cluster finds), so the mounts, the tools and the I/O servers'
data go over RDMA; extra mounts (mount_second) use the rdma:// URL too. The
servers keep their tcp listeners, so the tests that speak the wire protocol
themselves (rdfswire.py, Cluster.url) are unchanged.

RDFS_TEST_TRANSPORT=tls starts every cluster with `--transport tls`: the
servers listen only on tls:// (TCP inside TLS 1.3), so the mounts, the tools,
the I/O servers' registration and COPY between I/O servers all run inside
TLS. Tests that speak the plain wire protocol themselves cannot reach such a
cluster: they are marked `plain_wire` and skipped then. `make test` runs a
data subset this way (test-integration-tls).

RDFS_TEST_CLIENT=lkm (default fuse) mounts the kernel client instead of
rdfs-fuse (`local-cluster up --client lkm`; root, a kernel that loads
RDFS_LKM_DIR/rdfs.ko, default RDFS_BIN/../lkm: the qemu guest), extra mounts
(mount_second) too, so the same tests run against the kernel mount. Tests of
what only rdfs-fuse has (its options, its process) are marked with
`fuse_only(reason)` and skipped then, saying why. RDFS_TEST_OTHER_CLIENT
(default: RDFS_TEST_CLIENT) picks the client of the extra mounts alone, e.g.
fuse with RDFS_TEST_CLIENT=lkm: a FUSE and a kernel mount of one cluster.
"""
import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# RDFS_BIN: programs from another build dir (make BUILD=...), as local-cluster --bin.
BIN = Path(os.environ["RDFS_BIN"]).resolve() if os.environ.get("RDFS_BIN") else REPO / "build" / "bin"
LOCAL_CLUSTER = REPO / "deploy" / "local-cluster"

TRANSPORT = os.environ.get("RDFS_TEST_TRANSPORT") or "tcp"
if TRANSPORT not in ("tcp", "tls", "rdma"):
    raise RuntimeError("RDFS_TEST_TRANSPORT=%s: expected tcp, tls or rdma" % TRANSPORT)
# The options every `local-cluster up` of the tests takes for the transport.
LC_TRANSPORT_OPTS = []
if TRANSPORT == "tls":
    LC_TRANSPORT_OPTS = ["--transport", "tls"]
if TRANSPORT == "rdma":
    LC_TRANSPORT_OPTS = ["--transport", "rdma"]
    if os.environ.get("RDFS_TEST_RDMA_ADDR"):
        LC_TRANSPORT_OPTS += ["--rdma-addr", os.environ["RDFS_TEST_RDMA_ADDR"]]

CLIENT = os.environ.get("RDFS_TEST_CLIENT") or "fuse"
if CLIENT not in ("fuse", "lkm"):
    raise RuntimeError("RDFS_TEST_CLIENT=%s: expected fuse or lkm" % CLIENT)
LKM_DIR = Path(os.environ["RDFS_LKM_DIR"]).resolve() if os.environ.get("RDFS_LKM_DIR") \
    else BIN.parent / "lkm"
OTHER_CLIENT = os.environ.get("RDFS_TEST_OTHER_CLIENT") or CLIENT
if OTHER_CLIENT not in ("fuse", "lkm"):
    raise RuntimeError("RDFS_TEST_OTHER_CLIENT=%s: expected fuse or lkm" % OTHER_CLIENT)
LC_CLIENT_OPTS = []
if CLIENT == "lkm":
    # with --transport rdma, local-cluster mounts with transport=rdma itself
    LC_CLIENT_OPTS = ["--client", "lkm", "--lkm-dir", LKM_DIR]


def fallocate(fd, mode, off, length):
    """fallocate(2), which Python's os module lacks (only posix_fallocate, mode 0)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def fuse_only(reason):
    """Mark a test of something only rdfs-fuse has: skipped on the kernel client."""
    return pytest.mark.skipif(CLIENT != "fuse", reason="rdfs-fuse only: " + reason)


def plain_wire(reason):
    """Mark a test that speaks the plain wire protocol (rdfswire.py) to the
    cluster's ports itself: skipped when the cluster speaks only TLS."""
    return pytest.mark.skipif(TRANSPORT == "tls", reason="speaks plain frames: " + reason)


def lkm_xfail(reason):
    """A known gap of the kernel client (the reason says which and where it is fixed):
    xfail (strict) on the kernel mount, unchanged on rdfs-fuse."""
    return pytest.mark.xfail(CLIENT == "lkm", reason="kernel client: " + reason, strict=True)


PORT_BASE_FIRST = 7200
PORT_BASE_LAST = 7299
PORT_BASE_STEP = 4          # room for up to 4 I/O servers per cluster
IOSERVER_OFFSET = 100


def _worker_share(first, last, step):
    """Under pytest-xdist (make test-integration runs two workers) each worker
    takes bases from a slice of the range of its own: a base found free by one
    worker is never taken by the other between its check and its bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count < 2:
        return first, last
    nbases = (last - first) // step + 1
    per = nbases // count
    i = int(worker[2:])
    lo = first + i * per * step
    return lo, lo + (per - 1) * step


PORT_BASE_FIRST, PORT_BASE_LAST = _worker_share(PORT_BASE_FIRST, PORT_BASE_LAST,
                                                PORT_BASE_STEP)

_next_base = [PORT_BASE_FIRST]
_live = []      # clusters up and not yet stopped: the exit handler's list


def _stop_leftovers():
    """pytest skips fixture teardown when killed by SIGTERM or exits early:
    stop whatever is still running so no mount or server outlives the run."""
    for c in list(_live):
        c.down()


def _sigterm(signum, frame):
    # Unwind like Ctrl-C, so pytest's teardown and then atexit run.
    raise KeyboardInterrupt("SIGTERM")


atexit.register(_stop_leftovers)
signal.signal(signal.SIGTERM, _sigterm)

MiB = 1 << 20


def run(cmd, timeout=120, check=True, **kw):
    """Run @cmd, capture its output; on failure raise with everything it printed."""
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("command failed (exit %d): %s\n--- stdout\n%s\n--- stderr\n%s"
                             % (p.returncode, " ".join(map(str, cmd)), p.stdout, p.stderr))
    return p


def _port_free(port):
    """Nobody listens on @port: a connection of a cluster gone in TIME_WAIT there
    does not count, since the servers bind with SO_REUSEADDR too (without it
    a worker starting clusters every few seconds ran out of bases)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def allocate_port_base(n_io):
    """The next base whose metaserver and I/O server ports are all free."""
    # Round robin over the range: more clusters than bases run in one session,
    # and a base is taken again once its cluster is gone and its ports are free.
    nbases = (PORT_BASE_LAST - PORT_BASE_FIRST) // PORT_BASE_STEP + 1
    for _ in range(nbases):
        base = _next_base[0]
        _next_base[0] += PORT_BASE_STEP
        if _next_base[0] > PORT_BASE_LAST:
            _next_base[0] = PORT_BASE_FIRST
        ports = [base] + [base + IOSERVER_OFFSET + i for i in range(n_io)]
        if all(_port_free(p) for p in ports):
            return base
    raise RuntimeError("no free port base left in %d-%d" % (PORT_BASE_FIRST, PORT_BASE_LAST))


def listener_pid(port):
    """PID of the process listening on TCP @port, or None (from /proc, no tools)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % parts[9])
    if not inodes:
        return None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                try:
                    if os.readlink("/proc/%s/fd/%s" % (pid, fd)) in inodes:
                        return int(pid)
                except OSError:
                    pass
        except OSError:
            pass
    return None


def wait_until(pred, what, attempts=120, interval=0.5):
    """Poll @pred a bounded number of times; fail naming @what if it never holds."""
    for _ in range(attempts):
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("gave up waiting for " + what)


def drop_cache(path):
    """Make the next read of @path go to the file system, not the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def first_difference(a, b):
    if a == b:
        return None
    n = min(len(a), len(b))
    # Compare in blocks first so a 100 MiB check stays quick.
    step = 1 << 16
    for off in range(0, n, step):
        if a[off:off + step] != b[off:off + step]:
            for i in range(off, min(off + step, n)):
                if a[i] != b[i]:
                    return i
    return n if len(a) != len(b) else None


def assert_bytes_equal(expected, got, what="data"):
    d = first_difference(expected, got)
    assert d is None, ("%s differs: expected %d bytes, got %d; first difference at offset %d"
                       % (what, len(expected), len(got), d))


class Cluster:
    """A cluster started with deploy/local-cluster, plus what tests do to it."""

    def __init__(self, root, n_io=2, transport=None):
        self.dir = Path(root)
        self.n_io = n_io
        self.transport = transport or TRANSPORT
        self.port = allocate_port_base(n_io)
        self.mnt = self.dir / "mnt"
        self.extra_mounts = []
        self.restarted = []         # Popen of servers a test started again by hand
        self.restarted_ports = []
        self.logs = self.dir / "test-logs"

    # -------------------------------------------------------------- facts
    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("tls" if self.transport == "tls" else "tcp", self.port)

    @property
    def mount_spec(self):
        """The metaserver as rdfs-fuse is given it: HOST:PORT, or the rdma:// URL."""
        if self.transport == "rdma":
            with open(self.dir / "state.json") as f:
                addr = json.load(f)["rdma_addr"]
            return "rdma://%s:%d" % (addr, self.port)
        if self.transport == "tls":
            return "tls://127.0.0.1:%d" % self.port
        return "127.0.0.1:%d" % self.port

    @property
    def secret(self):
        return self.dir / "secret"

    @property
    def conf(self):
        return self.dir / "rdfs.conf"

    def ioserver_port(self, i):
        return self.port + IOSERVER_OFFSET + i

    def ports(self):
        return [self.port] + [self.ioserver_port(i) for i in range(self.n_io)]

    # -------------------------------------------------------------- life
    def up(self):
        if self not in _live:
            _live.append(self)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        run([LOCAL_CLUSTER, "up", "--dir", self.dir, "--ioservers", self.n_io,
             "--mount", self.mnt, "--port-base", self.port, "--bin", BIN]
            + (LC_TRANSPORT_OPTS if self.transport == TRANSPORT else ["--transport", self.transport])
            + LC_CLIENT_OPTS,
            timeout=180)
        assert os.path.ismount(self.mnt), "local-cluster up returned but %s is not a mount" % self.mnt
        if self.transport == "rdma":
            # Proof the data goes over RDMA: clients get the I/O servers' rdma:// URLs.
            out = self.rdfs("status").stdout
            assert out.count("rdma://") > self.n_io, "not an RDMA cluster:\n" + out

    def down(self):
        """Stop everything; never leave a mount or a process behind, even if `down` fails."""
        errors = []
        if self in _live:
            _live.remove(self)
        for m in reversed(self.extra_mounts):
            try:
                self.unmount(m)
            except AssertionError as e:
                errors.append(str(e))
        # mounts a test made in the cluster's directory and did not take down
        for m in mounts_under(self.dir):
            if m != os.path.abspath(str(self.mnt)):
                errors.append("a test left %s mounted" % m)
                subprocess.run(_unmount_argv(m, lazy=True), timeout=60)
        try:
            run([LOCAL_CLUSTER, "down", "--dir", self.dir], timeout=120)
        except Exception as e:          # keep cleaning up, report afterwards
            errors.append(str(e))
        if is_mounted(self.mnt):
            errors.append("local-cluster down left %s mounted" % self.mnt)
            _lazy_unmount(self.mnt)
        for p in self.restarted:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        for port in self.restarted_ports:
            pid = listener_pid(port)
            if pid:             # a restarted server that daemonized itself
                os.kill(pid, 9)
        for port in self.ports():
            pid = listener_pid(port)
            if pid:
                errors.append("port %d still served by pid %d after down" % (port, pid))
                os.kill(pid, 9)
        return errors

    def status(self):
        return run([LOCAL_CLUSTER, "status", "--dir", self.dir], check=False, timeout=60)

    # -------------------------------------------------------------- tools
    def rdfs(self, *args, check=True, timeout=120):
        return run([BIN / "rdfs", "--config", self.conf] + list(args), check=check, timeout=timeout)

    def servers_up(self):
        """How many I/O servers `rdfs status` reports up (0 if it fails)."""
        p = self.rdfs("status", check=False, timeout=60)
        m = re.search(r"(\d+) up", p.stdout)
        return int(m.group(1)) if p.returncode == 0 and m else 0

    def wait_servers_up(self):
        """After a restart: bounded wait until every I/O server has registered again."""
        wait_until(lambda: self.servers_up() == self.n_io,
                   "%d I/O servers to be up in `rdfs status`" % self.n_io)

    def mount_second(self, path, opts="attr_timeout=0,entry_timeout=0", env=None):
        """Start another client on @path, unmounted at teardown: rdfs-fuse, or with
        RDFS_TEST_OTHER_CLIENT (default RDFS_TEST_CLIENT) lkm the kernel client's
        helper, which mounts and daemonizes. @env: more environment for it."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        o = "secret_file=%s" % self.secret + ("," + opts if opts else "")
        if OTHER_CLIENT == "lkm":
            if self.transport == "rdma":
                o += ",transport=rdma"
            run([LKM_DIR / "rdfs-lkm-helper", "-o", o, "127.0.0.1:%d" % self.port, path],
                timeout=120, env=dict(os.environ, **(env or {})))
        else:
            run([BIN / "rdfs-fuse", "-o", o, self.mount_spec, path], timeout=120,
                env=dict(os.environ, **(env or {})))
        self.extra_mounts.append(path)
        wait_until(lambda: os.path.ismount(path), "second mount at %s" % path)
        return path

    def unmount(self, path):
        """Unmount @path (lazily if it stays busy); fails if it cannot."""
        if is_mounted(path):
            subprocess.run(_unmount_argv(path), timeout=60)
        if is_mounted(path):
            _lazy_unmount(path)
        if path in self.extra_mounts:
            self.extra_mounts.remove(path)
        assert not is_mounted(path), "cannot unmount %s" % path

    # -------------------------------------------------------------- crashes
    def kill9(self, port):
        """SIGKILL the server listening on @port; returns how to start it again."""
        pid = listener_pid(port)
        assert pid, "no process listens on port %d" % port
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        cwd = os.readlink("/proc/%d/cwd" % pid)
        os.kill(pid, 9)
        wait_until(lambda: listener_pid(port) is None, "pid %d to die" % pid)
        return dict(argv=argv, cwd=cwd, port=port)

    def restart(self, saved, env=None):
        """Start a killed server again with the same arguments (and @env added to its
        environment), and wait until it listens."""
        log = open(self.logs / ("restart-%d.log" % saved["port"]), "ab")
        p = subprocess.Popen(saved["argv"], cwd=saved["cwd"], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                             env=dict(os.environ, **(env or {})))
        self.restarted.append(p)
        self.restarted_ports.append(saved["port"])
        wait_until(lambda: listener_pid(saved["port"]) is not None or p.poll() is not None,
                   "restarted server to listen on %d" % saved["port"])
        assert p.poll() is None or listener_pid(saved["port"]), \
            "restarted %s exited with %s" % (saved["argv"], p.returncode)
        return p


def is_mounted(path):
    """Whether something is mounted on @path, from /proc/mounts: os.path.ismount
    says no for a FUSE mount whose daemon died (its stat fails with ENOTCONN),
    which is exactly the mount a cleanup must not skip."""
    want = os.path.abspath(str(path))
    with open("/proc/mounts") as f:
        return any(line.split()[1] == want for line in f)


def mounts_under(root):
    """Mount points inside directory @root, deepest first."""
    prefix = os.path.abspath(str(root)) + "/"
    with open("/proc/mounts") as f:
        found = [line.split()[1] for line in f if line.split()[1].startswith(prefix)]
    return sorted(set(found), key=len, reverse=True)


def _unmount_argv(path, lazy=False):
    """umount for a kernel mount, fusermount3 for rdfs-fuse's (as a user would)."""
    kernel = any(line.split()[1:3] == [str(path), "rdfs"] for line in open("/proc/mounts"))
    if kernel:
        return ["umount"] + (["-l"] if lazy else []) + [str(path)]
    return ["fusermount3", "-u"] + (["-z"] if lazy else []) + [str(path)]


def _lazy_unmount(path):
    subprocess.run(_unmount_argv(path, lazy=True), timeout=60)


def _cluster_root(kind):
    """A scratch directory every user can traverse (pytest's own tmp is 0700,
    which would turn every permission test into EACCES at the mount's parent)."""
    root = Path(tempfile.mkdtemp(prefix="rdfs-it-%s-" % kind))
    os.chmod(root, 0o755)
    return root


def _start(kind, n_io, transport=None):
    c = Cluster(_cluster_root(kind), n_io, transport)
    try:
        c.up()
    except BaseException:
        c.down()
        _remove(c)
        raise
    return c


def _remove(c):
    """Delete the cluster's directory unless RDFS_TEST_KEEP=1 (for post-mortems)."""
    if os.environ.get("RDFS_TEST_KEEP") == "1" or mounts_under(c.dir):
        print("rdfs tests: keeping", c.dir, file=sys.stderr)
        return
    shutil.rmtree(c.dir, ignore_errors=True)


def _stop(c):
    errors = c.down()
    _remove(c)
    assert not errors, "; ".join(errors)


@pytest.fixture(scope="session")
def cluster():
    c = _start("shared", 2)
    yield c
    try:
        fsck_clean(c)
    finally:
        _stop(c)


def fsck_clean(c):
    """`rdfs fsck` finds nothing wrong with @c (every block in use owned by a file,
    no leaked orphan, no wrong count): what every crash, fence and fault test must
    leave behind. Skipped when the test left the metaserver down."""
    if listener_pid(c.port) is None:
        return
    p = c.rdfs("fsck", "--json", check=False, timeout=600)
    assert p.returncode == 0, "rdfs fsck after the test (exit %d):\n%s%s" % (
        p.returncode, p.stdout, p.stderr)


@pytest.fixture
def fresh_cluster():
    c = _start("fresh", 2)
    yield c
    try:
        fsck_clean(c)
    finally:
        _stop(c)


@pytest.fixture(scope="session")
def other_mount(cluster):
    """A second rdfs-fuse mount of the shared cluster, without attribute or entry
    caches: another client, so what it reads came from the servers."""
    path = cluster.dir / "mnt2"
    cluster.mount_second(path)
    yield path
    cluster.unmount(path)


@pytest.fixture
def workdir(cluster, request):
    """A directory of the shared mount that only this test uses."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:200]
    d = cluster.mnt / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    return d


@pytest.fixture
def rdfs_bin():
    return BIN
