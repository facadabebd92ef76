# SPDX-License-Identifier: MIT
"""netns.py - a cluster whose hosts are network namespaces, for fault injection.

Every host (the metaserver, each I/O server, each rdfs-fuse client) runs in a
network namespace of its own, with its own address (10.77.0.0/24) on a veth
whose other end is a port of one bridge. Only the network is split: the mount
namespace is shared (processes are started with `nsenter --net`, not
`ip netns exec`, which would hide the FUSE mounts from the test), so the test
reads and writes each client's mount directly while that client's traffic
goes over its own link. The programs and config files are those of
deploy/local-cluster: rdfs.conf ([cluster], [metaserver], [fuse]) and one
ioserver-N.conf per I/O server, in the cluster's directory.

Faults, per host, on the bridge port of its link (so both directions):
  partition(h)        every frame to or from h is dropped (nftables, bridge
                      family, in the root namespace): TCP sees silence, no
                      reset, exactly as across a broken switch
  cut(h, other)       only the frames between h and other are dropped (a
                      partial partition: h still reaches the rest)
  degrade(h, ...)     random loss (nftables numgen) and delay (tc netem where
                      the kernel has it; else a tbf rate limit, whose queue
                      delays bulk traffic)
  heal(h)             all of it removed
  stop(h) / cont(h)   SIGSTOP / SIGCONT of the host's process

down() removes everything up() made (processes, mounts, the nftables table,
namespaces, veths, the bridge) even after a failure, and returns what it could
not remove; an atexit handler runs it for clusters a killed test left behind.
"""
import atexit
import os
import re
import signal
import subprocess
import time
from pathlib import Path

SUBNET = "10.77.0"
MS_PORT = 7000
IO_PORT = 7100
STOP_GRACE = 10.0

_live = []
_seq = [0]


def _sh(argv, check=True, timeout=60):
    p = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s%s" % (" ".join(map(str, argv)), p.returncode,
                                                           p.stdout, p.stderr))
    return p


def unavailable():
    """Why network namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, a bridge)"
    for tool in ("ip", "nsenter", "nft", "tc"):
        if subprocess.run(["which", tool], stdout=subprocess.DEVNULL).returncode != 0:
            return "%s is not installed (deploy/install-deps)" % tool
    name = "rdfsprobe%d" % os.getpid()
    p = subprocess.run(["ip", "netns", "add", name], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return "cannot create a network namespace: " + p.stdout.strip()
    subprocess.run(["ip", "netns", "del", name])
    return None


def _mounted(path):
    want = os.path.abspath(str(path))
    with open("/proc/mounts") as f:
        return any(line.split()[1] == want for line in f)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return not st[st.rfind(")") + 2:].startswith(("Z", "X"))


class Host:
    def __init__(self, name, role, index, prefix):
        self.name = name
        self.role = role                 # metaserver, ioserver, client
        self.netns = "%s-%s" % (prefix, name)
        self.veth = "%sv%d" % (prefix, index)      # the bridge's end (root namespace)
        self.address = "%s.%d" % (SUBNET, index)
        self.proc = None                # the host's server or first client
        self.mount = None
        self.procs = []                 # every process started on it
        self.mounts = []                # every mount its clients made
        self.faults = set()

    def info(self):
        return dict(name=self.name, netns=self.netns, address=self.address, role=self.role,
                    metrics_url=None, mount=str(self.mount) if self.mount else None)


class NetnsCluster:
    """1 metaserver, @n_io I/O servers, @n_clients rdfs-fuse clients, each a host."""

    def __init__(self, root, bin_dir, n_io=3, n_clients=2, metaserver_conf=None,
                 fuse_opts=None):
        _seq[0] += 1
        self.dir = Path(root)
        self.bin = Path(bin_dir)
        # interface names have at most 15 characters
        self.prefix = "rn%d%s" % (os.getpid() % 100000, chr(ord("a") + _seq[0] % 26))
        self.bridge = self.prefix + "br"
        self.nft_table = self.prefix
        self.metaserver_conf = metaserver_conf or {}
        self.fuse_opts = fuse_opts or []
        self.hosts = {"ms": Host("ms", "metaserver", 1, self.prefix)}
        for i in range(n_io):
            self.hosts["io%d" % i] = Host("io%d" % i, "ioserver", 11 + i, self.prefix)
        for i in range(n_clients):
            self.hosts["client%d" % i] = Host("client%d" % i, "client", 21 + i, self.prefix)
        self.made = []          # what up() created, for down()

    # ------------------------------------------------------------ facts
    @property
    def ms(self):
        return self.hosts["ms"]

    @property
    def ioservers(self):
        return [h for h in self.hosts.values() if h.role == "ioserver"]

    @property
    def clients(self):
        return [h for h in self.hosts.values() if h.role == "client"]

    @property
    def conf(self):
        return self.dir / "rdfs.conf"

    def status_json(self):
        return {"hosts": [h.info() for h in self.hosts.values()]}

    def log(self, name):
        return self.dir / "log" / ("%s.log" % name)

    # ------------------------------------------------------------ network
    def _net_up(self):
        _sh(["ip", "link", "add", self.bridge, "type", "bridge"])
        self.made.append(("link", self.bridge))
        _sh(["ip", "link", "set", self.bridge, "up"])
        _sh(["nft", "add", "table", "bridge", self.nft_table])
        self.made.append(("nft", self.nft_table))
        _sh(["nft", "add", "chain", "bridge", self.nft_table, "faults",
             "{ type filter hook forward priority 0; policy accept; }"])
        for h in self.hosts.values():
            _sh(["ip", "netns", "add", h.netns])
            self.made.append(("netns", h.netns))
            inner = h.veth + "i"
            _sh(["ip", "link", "add", h.veth, "type", "veth", "peer", "name", inner])
            self.made.append(("link", h.veth))
            _sh(["ip", "link", "set", h.veth, "master", self.bridge, "up"])
            _sh(["ip", "link", "set", inner, "netns", h.netns])
            ns = ["ip", "-n", h.netns]
            _sh(ns + ["link", "set", inner, "name", "eth0"])
            _sh(ns + ["addr", "add", h.address + "/24", "dev", "eth0"])
            _sh(ns + ["link", "set", "eth0", "up"])
            _sh(ns + ["link", "set", "lo", "up"])

    def _in(self, h, argv):
        return ["nsenter", "--net=/run/netns/" + h.netns, "--"] + [str(a) for a in argv]

    def run_in(self, name, argv, check=True, timeout=120):
        return _sh(self._in(self.hosts[name], argv), check=check, timeout=timeout)

    # ------------------------------------------------------------ config
    def _write_conf(self):
        for sub in ("log", "vol", "meta"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for name in ("secret", "cap.key"):
            p = self.dir / name
            if not p.exists():
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(os.urandom(32).hex() + "\n")
        cluster = ("[cluster]\nmetaserver = tcp://%s:%d\nsecret_file = %s\ncap_key_file = %s\n"
                   "log_level = info\n" % (self.ms.address, MS_PORT, self.dir / "secret",
                                           self.dir / "cap.key"))
        ms = "".join("%s = %s\n" % kv for kv in self.metaserver_conf.items())
        with open(self.conf, "w") as f:
            f.write("# Made by tests/integration/netns.py, as deploy/local-cluster does.\n"
                    + cluster + "\n[metaserver]\nlisten = tcp://%s:%d\ndb = %s\n%s\n"
                    "[fuse]\nattr_timeout = 1\nentry_timeout = 1\n"
                    % (self.ms.address, MS_PORT, self.dir / "meta", ms))
        for h in self.ioservers:
            with open(self.dir / ("ioserver-%s.conf" % h.name[2:]), "w") as f:
                f.write(cluster + "\n[ioserver]\nlisten = tcp://%s:%d\nvolume = %s\n"
                        "create_size = 4G\nname = %s\n"
                        % (h.address, IO_PORT, self.dir / "vol" / h.name, h.name))

    # ------------------------------------------------------------ processes
    def _start(self, h, argv):
        with open(self.log(h.name), "ab") as log:
            log.write(("---- %s\n" % " ".join(map(str, argv))).encode())
            log.flush()
            p = subprocess.Popen(self._in(h, argv), stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=log, start_new_session=True, close_fds=True)
        h.procs.append(p)
        if h.proc is None:
            h.proc = p
        return p

    def rdfs(self, *args, check=True, timeout=120):
        """The rdfs tool, run on the metaserver's host."""
        return self.run_in("ms", [self.bin / "rdfs", "--config", self.conf] + list(args),
                           check=check, timeout=timeout)

    def server_states(self):
        """{I/O server name: 'up' or 'down'} from `rdfs status` (SERVER_LIST)."""
        p = self.rdfs("status", check=False, timeout=30)
        if p.returncode != 0:
            return {}
        return {m.group(1): m.group(2) for m in
                re.finditer(r"^\s*\d+\s+(\S+)\s+\S+://\S+\s+(up|down)\b", p.stdout, re.M)}

    def wait(self, pred, what, bound_s=90.0):
        """Poll @pred until it holds; fail after @bound_s (a bound on a hang)."""
        deadline = time.monotonic() + bound_s
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError("gave up waiting for " + what)
            time.sleep(0.25)

    def wait_all_up(self, bound_s=90.0):
        names = {h.name for h in self.ioservers}
        self.wait(lambda: {n for n, s in self.server_states().items() if s == "up"} >= names,
                  "every I/O server to be up in `rdfs status`", bound_s)

    def mount(self, client, path, opts=()):
        """Another rdfs-fuse on host @client (its first one: up()), with @opts last."""
        h = self.hosts[client]
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        o = ",".join(["config=%s" % self.conf] + self.fuse_opts + list(opts))
        if h.mount is None:
            h.mount = path
        h.mounts.append(path)
        p = self._start(h, [self.bin / "rdfs-fuse", "-f", "-o", o,
                            "%s:%d" % (self.ms.address, MS_PORT), path])
        self.wait(lambda: p.poll() is not None or (_mounted(path) and os.path.ismount(path)),
                  "%s to mount %s" % (client, path), 30)
        if p.poll() is not None:
            raise RuntimeError("rdfs-fuse of %s exited %s" % (client, p.returncode))
        return path

    def up(self):
        _live.append(self)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._net_up()
            self._write_conf()
            p = self._start(self.ms, [self.bin / "rdfs-metaserver", "--config", self.conf])
            self.wait(lambda: p.poll() is not None or
                      self.rdfs("status", check=False, timeout=10).returncode == 0,
                      "the metaserver to answer", 30)
            if p.poll() is not None:
                raise RuntimeError("rdfs-metaserver exited %s" % p.returncode)
            for h in self.ioservers:
                self._start(h, [self.bin / "rdfs-ioserver", "--config",
                                self.dir / ("ioserver-%s.conf" % h.name[2:])])
            self.wait_all_up()
            for h in self.clients:
                self.mount(h.name, self.dir / ("mnt-" + h.name))
        except BaseException:
            errors = self.down()
            if errors:
                raise RuntimeError("netns cluster start failed; cleanup: " + "; ".join(errors))
            raise
        return self

    # ------------------------------------------------------------ faults
    def _nft_rules(self, h):
        """The handles of our rules naming @h's port."""
        p = _sh(["nft", "-a", "list", "chain", "bridge", self.nft_table, "faults"], check=False)
        return [m.group(1) for line in p.stdout.splitlines() if '"%s"' % h.veth in line
                for m in [re.search(r"# handle (\d+)", line)] if m]

    def partition(self, name):
        """Cut @name off: every frame to or from it is dropped at the bridge."""
        h = self.hosts[name]
        for d in ("iifname", "oifname"):
            _sh(["nft", "add", "rule", "bridge", self.nft_table, "faults", d, h.veth, "drop"])
        h.faults.add("partition")

    def cut(self, name, other):
        """Drop every frame between @name and @other, both ways; heal(@name) ends it."""
        a, b = self.hosts[name], self.hosts[other]
        for x, y in ((a, b), (b, a)):
            _sh(["nft", "add", "rule", "bridge", self.nft_table, "faults", "iifname", x.veth,
                 "oifname", y.veth, "drop"])
        a.faults.add("cut")
        b.faults.add("cut")

    def degrade(self, name, delay_ms=0, loss_pct=0):
        """Random loss of @loss_pct % each way and @delay_ms of delay on @name's link."""
        h = self.hosts[name]
        if loss_pct:
            for d in ("iifname", "oifname"):
                _sh(["nft", "add", "rule", "bridge", self.nft_table, "faults", d, h.veth,
                     "numgen", "random", "mod", "100", "<", str(int(loss_pct)), "drop"])
        if delay_ms:
            ends = [(None, h.veth), (h.netns, "eth0")]
            for ns, dev in ends:
                pre = ["ip", "netns", "exec", ns] if ns else []
                p = _sh(pre + ["tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay",
                               "%dms" % delay_ms], check=False)
                if p.returncode != 0:
                    # no sch_netem in this kernel: a slow link, whose queue delays bulk data
                    _sh(pre + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                               "200mbit", "burst", "64kb", "latency", "%dms" % (delay_ms * 4)])
            h.faults.add("qdisc")
        h.faults.add("degrade")

    def heal(self, name):
        h = self.hosts[name]
        errors = []
        for handle in self._nft_rules(h):
            p = _sh(["nft", "delete", "rule", "bridge", self.nft_table, "faults", "handle", handle],
                    check=False)
            if p.returncode != 0:
                errors.append(p.stderr.strip())
        if "qdisc" in h.faults:
            _sh(["tc", "qdisc", "del", "dev", h.veth, "root"], check=False)
            _sh(["ip", "netns", "exec", h.netns, "tc", "qdisc", "del", "dev", "eth0", "root"],
                check=False)
        h.faults.clear()
        if errors:
            raise RuntimeError("heal %s: %s" % (name, "; ".join(errors)))

    def stop(self, name):
        os.kill(self.hosts[name].proc.pid, signal.SIGSTOP)
        self.hosts[name].faults.add("stopped")

    def cont(self, name):
        os.kill(self.hosts[name].proc.pid, signal.SIGCONT)
        self.hosts[name].faults.discard("stopped")

    # ------------------------------------------------------------ teardown
    def down(self):
        """Remove everything; return what could not be removed (empty: all gone)."""
        errors = []
        if self in _live:
            _live.remove(self)
        for h in self.hosts.values():
            if h.proc and "stopped" in h.faults:
                os.kill(h.proc.pid, signal.SIGCONT)
        for h in self.clients:
            for m in h.mounts:
                if not _mounted(m):
                    continue
                subprocess.run(["fusermount3", "-u", str(m)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60)
                if _mounted(m):
                    subprocess.run(["fusermount3", "-u", "-z", str(m)], timeout=60)
                if _mounted(m):
                    errors.append("cannot unmount %s" % m)
        # clients first (they flush to the servers), the metaserver last
        order = self.clients + self.ioservers + [self.ms]
        for group in (self.clients, self.ioservers, [self.ms]):
            procs = [p for h in group for p in h.procs if p.poll() is None]
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=STOP_GRACE)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=30)
        for h in order:
            for p in h.procs:
                if _alive(p.pid):
                    errors.append("%s (pid %d) is still running" % (h.name, p.pid))
        for kind, name in reversed(self.made):
            if kind == "netns":
                p = _sh(["ip", "netns", "del", name], check=False)
            elif kind == "link":
                if _sh(["ip", "link", "show", name], check=False).returncode != 0:
                    continue        # a veth goes with its namespace's end
                p = _sh(["ip", "link", "del", name], check=False)
            else:
                p = _sh(["nft", "delete", "table", "bridge", name], check=False)
            if p.returncode != 0:
                errors.append("cannot remove %s %s: %s" % (kind, name, p.stderr.strip()))
        self.made = []
        left = _sh(["ip", "netns", "list"], check=False).stdout
        if self.prefix + "-" in left:
            errors.append("namespaces left: " + left.strip())
        if _sh(["ip", "link", "show", self.bridge], check=False).returncode == 0:
            errors.append("bridge %s left" % self.bridge)
        return errors


def _down_leftovers():
    for c in list(_live):
        c.down()


atexit.register(_down_leftovers)
