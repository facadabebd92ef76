# SPDX-License-Identifier: MIT
"""ratelimit.py - the rate-limited link of bench/sweep/run: a network namespace
joined to ours by a veth pair, the namespace's end shaped to a given rate with
tbf, and a relay that lets a server in the namespace reach a server that
listens on 127.0.0.1 only (the metaserver: the I/O server registers through it).

gmblock's overlap pays off where the disk and the network take about as long
per request; over loopback the network is several times the disk. Putting the
I/O server behind this link, shaped to the disk's own O_DIRECT read rate,
makes the two comparable without touching either. The nominal rate is not
what a request/reply stream gets across it (tbf's one-packet bucket and
timer, TCP, the round trip per request all take their share), so
bench/sweep/run calibrates: it measures the link with the sweep's own net
pattern and moves the tbf rate (set_rate) until that matches the disk.

Why tbf: one flow, one rate, one direction (the replies leave the namespace
through its veth end); tbf is the classless shaper for exactly that. htb
would add a class tree to share a link between flows, which is not the
question here. Its burst is kept to one GSO packet (BURST): tokens gather
while the link idles, and a burst as big as a request would let the
read-then-send baseline put a whole reply on the wire at loopback speed
after each disk read, hiding the very cost overlap saves.

Everything made here is named after our pid, and removed by close() on every
way out; remove_stale() removes what a run killed by SIGKILL left behind.
"""

import os
import shutil
import socket
import subprocess
import threading

NS_PREFIX = "rdfs-sweep-"
# veth's MTU as loopback's, so one TCP segment is one packet on both paths
MTU = 65535
# tbf's bucket: one MTU-sized packet and its headers, no more (see above)
BURST = 80 * 1024
# bytes queued in tbf before it drops: above tcp_limit_output_bytes (4 MiB
# here), so TCP's own small-queue limit, not a drop, is what holds the sender
LIMIT = 16 << 20


class LinkError(Exception):
    pass


def _ip(*argv, check=True):
    r = subprocess.run(["ip"] + list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    if check and r.returncode != 0:
        raise LinkError(f"ip {' '.join(argv)}: {r.stdout.strip()}")
    return r.stdout


def available():
    """None if this process can build the link, else why not (tried for real:
    a container may run us as root without the right to make namespaces)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, tc)"
    for prog in ("ip", "tc"):
        if not shutil.which(prog, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            return f"needs {prog} (iproute2)"
    probe = Link(1 << 30, tag="probe")
    try:
        probe.open()
    except (LinkError, OSError, subprocess.TimeoutExpired) as e:
        return f"cannot be built here: {e}"
    finally:
        probe.close()
    return None


def remove_stale():
    """Namespaces of earlier runs whose process is gone (killed by SIGKILL)."""
    done = []
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return done
    for ns in names:
        if not ns.startswith(NS_PREFIX):
            continue
        try:
            pid = int(ns[len(NS_PREFIX):].removeprefix("probe"))
        except ValueError:
            continue
        if not os.path.exists(f"/proc/{pid}"):
            for p in _ip("netns", "pids", ns, check=False).split():
                try:
                    os.kill(int(p), 9)
                except (OSError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)
            done.append(ns)
    return done


class Relay:
    """Accepts on (addr, port) and relays each connection to 127.0.0.1:port."""

    def __init__(self, addr, port):
        self.port = port
        self.lock = threading.Lock()
        self.socks = []
        self.closed = False
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((addr, port))
        self.ls.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _keep(self, s):
        with self.lock:
            if self.closed:
                s.close()
                return False
            self.socks.append(s)
            return True

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            if not (self._keep(c) and self._keep(u)):
                continue
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                b = src.recv(1 << 16)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass

    def close(self):
        with self.lock:
            self.closed = True
            socks, self.socks = self.socks, []
        for s in [self.ls] + socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class Link:
    """Namespace NS_PREFIX<pid>; veth: our end host_addr, its end ns_addr; the
    namespace end's egress (the replies) shaped to @rate_bytes per second."""

    def __init__(self, rate_bytes, tag=""):
        pid = os.getpid()
        self.ns = f"{NS_PREFIX}{tag}{pid}"
        self.host_if = f"rsw{tag[:1]}{pid}h"[:15]
        self.ns_if = f"rsw{tag[:1]}{pid}n"[:15]
        net = 198 << 24 | 19 << 16 | (pid % 254 + 1) << 8     # 198.19.0.0/16: benchmarks
        self.host_addr = socket.inet_ntoa((net | 1).to_bytes(4, "big"))
        self.ns_addr = socket.inet_ntoa((net | 2).to_bytes(4, "big"))
        self.rate_bytes = int(rate_bytes)
        self.relays = []
        self.made = False

    def open(self):
        ns, h, n = self.ns, self.host_if, self.ns_if
        self.made = True
        _ip("netns", "add", ns)
        _ip("link", "add", h, "mtu", str(MTU), "type", "veth", "peer", "name", n, "mtu",
            str(MTU), "netns", ns)
        _ip("addr", "add", f"{self.host_addr}/24", "dev", h)
        _ip("link", "set", h, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "addr", "add", f"{self.ns_addr}/24", "dev", n)
        _ip("-n", ns, "link", "set", n, "up")
        self.set_rate(self.rate_bytes)

    def set_rate(self, rate_bytes):
        """tbf on the namespace end at @rate_bytes per second; on an open link
        the qdisc is replaced in place (the calibration's next step)."""
        tc = ["tc", "-n", self.ns, "qdisc", "replace", "dev", self.ns_if, "root", "tbf",
              "rate", f"{int(rate_bytes) * 8}bit", "burst", str(BURST), "limit", str(LIMIT)]
        r = subprocess.run(tc, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        if r.returncode != 0:
            raise LinkError(f"{' '.join(tc)}: {r.stdout.strip()}")
        self.rate_bytes = int(rate_bytes)

    def relay(self, port):
        """127.0.0.1:@port of ours, reachable from the namespace at host_addr:@port."""
        self.relays.append(Relay(self.host_addr, port))

    def exec_argv(self):
        return ["ip", "netns", "exec", self.ns]

    def qdisc_stats(self):
        r = subprocess.run(["tc", "-s", "-n", self.ns, "qdisc", "show", "dev", self.ns_if],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        return " ".join(r.stdout.split())

    def close(self):
        """Idempotent; the namespace's processes must be gone already (deleting
        the namespace takes the veth pair with it)."""
        for r in self.relays:
            r.close()
        self.relays = []
        if self.made:
            self.made = False
            for p in _ip("netns", "pids", self.ns, check=False).split():
                try:
                    os.kill(int(p), 9)
                except (OSError, ValueError):
                    pass
            _ip("link", "del", self.host_if, check=False)
            _ip("netns", "del", self.ns, check=False)
