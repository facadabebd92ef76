# SPDX-License-Identifier: MIT
"""The file systems bench/compare measures, each set up on this machine with
its data under the scratch directory and torn down afterwards.

A target's setup() either returns with target.path a directory to benchmark
in, or raises SetupError saying why it cannot run here. Everything setup()
does that must be undone is pushed on the target's undo stack the moment it
is done, so teardown() undoes exactly what happened, also after a failure or
an interrupt half way through setup().
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


class SetupError(Exception):
    """A target cannot be prepared here; the message says why."""


def log_line(logf, text):
    if logf:
        logf.write(text + "\n")
        logf.flush()


def sh(cmd, logf=None, timeout=120, check=True, **kw):
    """Run @cmd (a list), logging it and its output; raise SetupError on failure."""
    cmd = [str(c) for c in cmd]
    log_line(logf, "$ " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    except FileNotFoundError:
        raise SetupError("%s is not installed (deploy/install-deps --bench)" % cmd[0])
    except subprocess.TimeoutExpired:
        raise SetupError("%s did not finish within %d s" % (" ".join(cmd), timeout))
    log_line(logf, p.stdout.rstrip())
    if check and p.returncode != 0:
        tail = " | ".join(p.stdout.strip().splitlines()[-3:])
        raise SetupError("%s failed (exit %d): %s" % (os.path.basename(cmd[0]), p.returncode, tail))
    return p


def is_mount(path):
    path = os.path.realpath(str(path))
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == path for line in f)
    except OSError:
        return os.path.ismount(path)


def unmount(path, logf=None):
    """Unmount a FUSE or kernel mount; lazily if it is busy. Never raises."""
    for cmd in (["fusermount3", "-u", path], ["umount", path], ["umount", "-l", path],
                ["fusermount3", "-u", "-z", path]):
        if not is_mount(path):
            return
        try:
            sh(cmd, logf, timeout=60, check=False)
        except SetupError:
            pass


def pids_with_arg(fragment):
    """PIDs whose command line mentions @fragment (one of our scratch paths)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().decode(errors="replace")
        except OSError:
            continue
        if fragment in args:
            out.append(int(pid))
    return out


def kill_pids(pids, logf=None):
    """SIGTERM, then SIGKILL what is left after a few seconds."""
    pids = [p for p in pids if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for p in pids:
            try:
                os.kill(p, sig)
                alive.append(p)
                log_line(logf, "kill -%d %d" % (sig, p))
            except ProcessLookupError:
                pass
        if not alive:
            return
        for _ in range(50):
            alive = [p for p in alive if os.path.exists("/proc/%d" % p) and not _zombie(p)]
            if not alive:
                return
            time.sleep(0.1)
        pids = alive


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def port_free(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_for(pred, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.25)
    raise SetupError("gave up after %d s waiting for %s" % (seconds, what))


class Target:
    name = "?"
    description = ""

    def __init__(self, scratch, logf, opts):
        self.root = Path(scratch) / self.name
        self.logf = logf
        self.opts = opts
        self.path = None            # directory to benchmark in, once set up
        self.reason = None          # why the target is not measured
        self.undo = []              # (what, function), undone last first
        self.cache_extra = ""       # caches --drop-cache does not reach
        self.api = []               # rdfs-bench options choosing the file interface
        self.drop = ["--drop-cache"]

    def file(self, name):
        """@name in the benchmark directory, as rdfs-bench's -o/-d wants it."""
        return str(self.path / name)

    def push(self, what, fn):
        self.undo.append((what, fn))

    def setup(self):
        raise NotImplementedError

    def teardown(self):
        """Undo everything setup() did, last first; log but never raise."""
        while self.undo:
            what, fn = self.undo.pop()
            try:
                log_line(self.logf, "[%s] teardown: %s" % (self.name, what))
                fn()
            except Exception as e:      # keep tearing down the rest
                log_line(self.logf, "[%s] teardown of %s failed: %s" % (self.name, what, e))
        if self.root.exists() and not self.opts.keep_scratch:
            shutil.rmtree(self.root, ignore_errors=True)

    def fresh_root(self):
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.push("remove %s" % self.root, lambda: None)


class LocalTarget(Target):
    name = "local"
    description = "a directory on the local disk (same file system as the scratch dir)"

    def setup(self):
        self.fresh_root()
        self.path = self.root / "data"
        self.path.mkdir()
        p = sh(["df", "--output=source,fstype", str(self.path)], self.logf, check=False)
        lines = p.stdout.strip().splitlines()
        if len(lines) >= 2:
            self.description = "local directory on %s" % " ".join(lines[-1].split())


class RdfsFuseTarget(Target):
    name = "rdfs-fuse"
    description = "rdfs: 1 metaserver + 2 I/O servers (deploy/local-cluster), rdfs-fuse mount"

    transport = "tcp"

    def setup(self):
        lc = self.opts.repo / "deploy" / "local-cluster"
        for prog in ("rdfs-metaserver", "rdfs-ioserver", "rdfs-fuse"):
            if not (self.opts.bin / prog).exists():
                raise SetupError("%s not built in %s (make all)" % (prog, self.opts.bin))
        base = self.opts.port_base
        while not all(port_free("127.0.0.1", p) for p in (base, base + 100, base + 101)):
            base += 4
            if base > self.opts.port_base + 200:
                raise SetupError("no free port base for local-cluster near %d" % self.opts.port_base)
        self.fresh_root()
        mnt = self.root / "mnt"
        self.push("local-cluster down", lambda: (
            sh([lc, "down", "--dir", self.root], self.logf, timeout=120, check=False),
            unmount(str(mnt), self.logf)))
        sh([lc, "up", "--dir", self.root, "--ioservers", self.opts.ioservers, "--port-base", base,
            "--mount", mnt, "--bin", self.opts.bin, "--volume-size", self.opts.volume_size,
            "--transport", self.transport],
           self.logf, timeout=300)
        if not is_mount(mnt):
            raise SetupError("local-cluster up returned but %s is not mounted" % mnt)
        self.path = mnt / "bench"
        self.path.mkdir(exist_ok=True)
        self.description = ("rdfs: metaserver + %d I/O servers on %s://127.0.0.1:%d "
                            "(local-cluster), rdfs-fuse" % (self.opts.ioservers, self.transport,
                                                            base))


class RdfsFuseTlsTarget(RdfsFuseTarget):
    """The same cluster with every server listening only on tls:// (TLS 1.3,
    AES-128-GCM): beside rdfs-fuse, what TLS costs."""
    name = "rdfs-fuse-tls"
    transport = "tls"


class RdfsFuseCopies2Target(RdfsFuseTarget):
    """The same cluster, the benchmark directory with two copies of every chunk
    (rdfs.copies = 2): every write goes to both I/O servers (client fan-out),
    reads take one copy. Beside rdfs-fuse, what a second copy costs."""
    name = "rdfs-fuse-copies2"

    def setup(self):
        super().setup()
        os.setxattr(str(self.path), "rdfs.copies", b"2")
        self.description += ", 2 copies of every chunk"


class RdfsLibTarget(RdfsFuseTarget):
    """The same cluster, but rdfs-bench -a RDFS: lib/client straight to the
    servers. The mount stays, only for making and removing directories."""
    name = "rdfs-lib"

    def setup(self):
        super().setup()
        self.api = ["-a", "RDFS", "--config", str(self.root / "rdfs.conf")]
        self.drop = []
        self.description = self.description.replace("rdfs-fuse", "rdfs-bench -a RDFS (no FUSE)")

    def file(self, name):
        return "/bench/" + name


MFS_ADDR = "198.18.0.1"


class MooseFSTarget(Target):
    """MooseFS 3: master + one chunkserver in a private network namespace
    (the chunkserver refuses a master in 127.0.0.0/8), mfsmount started in the
    namespace too; the mount itself is in our mount namespace, so visible."""
    name = "moosefs"
    description = "MooseFS: master + 1 chunkserver on %s in a private netns, mfsmount" % MFS_ADDR
    goal = 1
    netns_prefix = "rdfsbench-mfs-"

    def chunkservers(self):
        return 1

    def setup(self):
        for prog in ("mfsmaster", "mfschunkserver", "mfsmount", "ip", "nsenter"):
            if not shutil.which(prog):
                raise SetupError("%s is not installed (deploy/install-deps --bench)" % prog)
        empty = Path("/var/lib/mfs/metadata.mfs.empty")
        if not empty.exists():
            raise SetupError("%s missing (moosefs-master not installed?)" % empty)
        n_cs = self.chunkservers()
        self.fresh_root()
        r = self.root
        for d in ["master", "mnt"] + ["cs%d" % i for i in range(n_cs)] \
                + ["chunks%d" % i for i in range(n_cs)]:
            (r / d).mkdir()
        (r / "mfsexports.cfg").write_text("* / rw,alldirs,maproot=0\n")
        (r / "mfsmaster.cfg").write_text(
            "# Made by bench/compare; removed with the scratch dir.\n"
            "WORKING_USER = root\nWORKING_GROUP = root\nNICE_LEVEL = 0\nLOCK_MEMORY = 0\n"
            "DATA_PATH = %s\nEXPORTS_FILENAME = %s\n"
            "MATOML_LISTEN_HOST = %s\nMATOCS_LISTEN_HOST = %s\nMATOCL_LISTEN_HOST = %s\n"
            % (r / "master", r / "mfsexports.cfg", MFS_ADDR, MFS_ADDR, MFS_ADDR))
        # Chunkserver i on 198.18.0.(2+i) (the first on the master's address
        # when there is only one, as before): each its own address, its
        # default port, its own chunk directory on the same disk.
        cs_addrs = [MFS_ADDR] if n_cs == 1 else [cs_addr(i) for i in range(n_cs)]
        for i, addr in enumerate(cs_addrs):
            (r / ("mfshdd%d.cfg" % i)).write_text("%s\n" % (r / ("chunks%d" % i)))
            (r / ("mfschunkserver%d.cfg" % i)).write_text(
                "# Made by bench/compare; removed with the scratch dir.\n"
                "WORKING_USER = root\nWORKING_GROUP = root\nNICE_LEVEL = 0\nLOCK_MEMORY = 0\n"
                "DATA_PATH = %s\nHDD_CONF_FILENAME = %s\nMASTER_HOST = %s\nBIND_HOST = %s\n"
                "CSSERV_LISTEN_HOST = %s\nHDD_LEAVE_SPACE_DEFAULT = 1GiB\n"
                % (r / ("cs%d" % i), r / ("mfshdd%d.cfg" % i), MFS_ADDR, addr, addr))
        shutil.copy(empty, r / "master" / "metadata.mfs")

        ns = "%s%d" % (self.netns_prefix, os.getpid())
        nspath = "/run/netns/" + ns
        nsenter = ["nsenter", "--net=" + nspath]
        self.nsenter = nsenter      # for the MooseFS tools of whoever uses the target
        self.push("remove netns " + ns, lambda: (
            kill_pids(self._netns_pids(ns), self.logf),
            sh(["ip", "netns", "del", ns], self.logf, check=False)))
        sh(["ip", "netns", "add", ns], self.logf)
        sh(["ip", "-n", ns, "link", "set", "lo", "up"], self.logf)
        for addr in sorted(set([MFS_ADDR] + cs_addrs)):
            sh(["ip", "-n", ns, "addr", "add", addr + "/32", "dev", "lo"], self.logf)

        self.push("stop mfsmaster", lambda: self._stop(nsenter, "mfsmaster", "mfsmaster.cfg"))
        sh(nsenter + ["mfsmaster", "-c", r / "mfsmaster.cfg", "start"], self.logf, timeout=60)
        for i in range(n_cs):
            cfg = "mfschunkserver%d.cfg" % i
            self.push("stop chunkserver %d" % i,
                      lambda cfg=cfg: self._stop(nsenter, "mfschunkserver", cfg))
            sh(nsenter + ["mfschunkserver", "-c", r / cfg, "start"], self.logf, timeout=60)

        mnt = r / "mnt"
        self.push("unmount " + str(mnt), lambda: unmount(str(mnt), self.logf))
        sh(nsenter + ["mfsmount", mnt, "-H", MFS_ADDR, "-o", "mfsmaster=" + MFS_ADDR],
           self.logf, timeout=60)
        if not is_mount(mnt):
            raise SetupError("mfsmount returned but %s is not mounted" % mnt)
        # Writes fail until the chunkserver has registered its disk with the master.
        wait_for(lambda: os.statvfs(mnt).f_blocks > 0, 60, "the chunkserver to register")
        if n_cs > 1:
            # Else the first chunks get one copy and the second is made in the
            # background, off the clock.
            wait_for(lambda: self._chunkservers_up(nsenter) >= n_cs, 60,
                     "%d chunkservers to register" % n_cs)
        self.path = mnt / "bench"
        self.path.mkdir(exist_ok=True)
        # No trash: MooseFS keeps removed files for a day by default, and the
        # matrix removes a lot.
        sh(nsenter + ["mfssetgoal", "-r", self.goal, self.path], self.logf, timeout=60)
        sh(nsenter + ["mfssettrashtime", "-r", "0", self.path], self.logf, timeout=60)
        self.cache_extra = "; mfsmount's own data cache left at its default"
        self.description += ", goal %d, trash time 0" % self.goal

    def _chunkservers_up(self, nsenter):
        """Chunkservers the master lists as connected (mfscli -SCS), 0 if it cannot say."""
        try:
            p = sh(nsenter + ["mfscli", "-H", MFS_ADDR, "-SCS", "-s", "|"], self.logf,
                   timeout=30, check=False)
        except SetupError:
            return 0
        return len(set(re.findall(r"198\.18\.0\.\d+\|942\d", p.stdout)))

    def _stop(self, nsenter, prog, cfg):
        sh(nsenter + [prog, "-c", self.root / cfg, "stop"], self.logf, timeout=60, check=False)
        kill_pids(pids_with_arg(str(self.root / cfg)), self.logf)

    def _netns_pids(self, ns):
        try:
            p = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, timeout=30)
            return [int(x) for x in p.stdout.split()]
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return []


class MooseFSGoal2Target(MooseFSTarget):
    """MooseFS with goal 2 on the benchmark directory and as many chunkservers
    as rdfs has I/O servers (--ioservers, 2 by default), each on an address of
    its own in the namespace: beside rdfs-fuse-copies2, two copies each way.
    mfsmount writes to the first chunkserver of a chunk, which forwards to the
    next (chaining); rdfs-fuse sends to both (client fan-out)."""
    name = "moosefs-goal2"
    description = "MooseFS: master on %s + chunkservers in a private netns, mfsmount" % MFS_ADDR
    goal = 2
    netns_prefix = "rdfsbench-mfs-goal2-"

    def chunkservers(self):
        return max(2, self.opts.ioservers)

    def setup(self):
        self.description = "MooseFS: master on %s + %d chunkservers on %s..%s in a private " \
            "netns, mfsmount" % (MFS_ADDR, self.chunkservers(), cs_addr(0),
                                 cs_addr(self.chunkservers() - 1))
        super().setup()


def cs_addr(i):
    """The address of chunkserver i of a multi-chunkserver MooseFS target."""
    return "198.18.0.%d" % (2 + i)


GLUSTER_ADDR = "127.0.0.2"
GLUSTER_STATE = ("/var/lib/glusterd", "/var/run/gluster", "/var/log/glusterfs")
GLUSTER_SOCK = "/run/glusterd.socket"


class GlusterFSTarget(Target):
    """GlusterFS: glusterd bound to 127.0.0.2 (the CLI refuses 127.0.0.1 and
    localhost as brick host) with its working directory in the scratch dir,
    one single-brick volume, a FUSE mount. glusterd and the brick still leave
    sockets, logs and state in /var/run/gluster, /var/log/glusterfs and
    /var/lib/glusterd: whatever appeared there during the run is removed."""
    name = "glusterfs"
    description = "GlusterFS: glusterd on %s, 1-brick volume, FUSE mount" % GLUSTER_ADDR
    volume = "rdfsbench"

    def setup(self):
        for prog in ("glusterd", "gluster", "glusterfs"):
            if not shutil.which(prog):
                raise SetupError("%s is not installed (deploy/install-deps --bench)" % prog)
        if os.path.exists(GLUSTER_SOCK) or not port_free(GLUSTER_ADDR, 24007):
            raise SetupError("a glusterd is already running on this machine (%s or port 24007 "
                             "in use); not touching it" % GLUSTER_SOCK)
        self.fresh_root()
        r = self.root
        for d in ("lib", "brick", "mnt", "log"):
            (r / d).mkdir()
        before = self._state_files()
        self.push("remove glusterd's files outside the scratch dir",
                  lambda: self._remove_new_files(before))
        (r / "glusterd.vol").write_text(
            "# Made by bench/compare; removed with the scratch dir.\n"
            "volume management\n"
            "    type mgmt/glusterd\n"
            "    option working-directory %s\n"
            "    option transport-type socket\n"
            "    option transport.socket.bind-address %s\n"
            "    option transport.socket.listen-port 24007\n"
            "    option transport.socket.read-fail-log off\n"
            "    option ping-timeout 0\n"
            "    option event-threads 1\n"
            "end-volume\n" % (r / "lib", GLUSTER_ADDR))
        self.push("stop glusterd and bricks", self._kill_daemons)
        sh(["glusterd", "-f", r / "glusterd.vol", "-p", r / "glusterd.pid",
            "-l", r / "log" / "glusterd.log"], self.logf, timeout=60)
        wait_for(lambda: os.path.exists(GLUSTER_SOCK), 30, "glusterd's socket")
        gl = ["gluster", "--mode=script"]
        brick = "%s:%s" % (GLUSTER_ADDR, r / "brick")
        # "force": the brick is on the root file system, which gluster warns about.
        self.push("delete volume", lambda: (
            sh(gl + ["volume", "stop", self.volume, "force"], self.logf, check=False),
            sh(gl + ["volume", "delete", self.volume], self.logf, check=False)))
        sh(gl + ["volume", "create", self.volume, brick, "force"], self.logf, timeout=60)
        sh(gl + ["volume", "start", self.volume], self.logf, timeout=60)
        mnt = r / "mnt"
        self.push("unmount " + str(mnt), lambda: unmount(str(mnt), self.logf))
        sh(["mount", "-t", "glusterfs", "-o", "log-file=%s" % (r / "log" / "mount.log"),
            "%s:/%s" % (GLUSTER_ADDR, self.volume), mnt], self.logf, timeout=60)
        if not is_mount(mnt):
            raise SetupError("mount -t glusterfs returned but %s is not mounted" % mnt)
        self.path = mnt / "bench"
        self.path.mkdir(exist_ok=True)
        self.cache_extra = "; the volume's client-side caching translators at their defaults"

    def _kill_daemons(self):
        pidfile = self.root / "glusterd.pid"
        pids = []
        try:
            pids.append(int(pidfile.read_text().strip()))
        except (OSError, ValueError):
            pass
        # The brick (glusterfsd) and the mount's client name our scratch paths.
        pids += pids_with_arg(str(self.root))
        kill_pids(sorted(set(pids)), self.logf)

    @staticmethod
    def _state_files():
        seen = set()
        for top in GLUSTER_STATE:
            for dirpath, dirnames, filenames in os.walk(top):
                seen.add(dirpath)
                seen.update(os.path.join(dirpath, n) for n in dirnames + filenames)
        if os.path.exists(GLUSTER_SOCK):
            seen.add(GLUSTER_SOCK)
        return seen

    def _remove_new_files(self, before):
        new = self._state_files() - before
        if os.path.exists(GLUSTER_SOCK) and GLUSTER_SOCK not in before:
            new.add(GLUSTER_SOCK)
        for p in sorted(new, key=len, reverse=True):
            try:
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    os.unlink(p)
            except OSError:
                pass


TARGETS = {t.name: t for t in (LocalTarget, RdfsFuseTarget, RdfsFuseTlsTarget,
                                RdfsFuseCopies2Target, MooseFSTarget, MooseFSGoal2Target,
                                GlusterFSTarget, RdfsLibTarget)}
DEFAULT_TARGETS = ["local", "rdfs-fuse", "rdfs-fuse-tls", "rdfs-fuse-copies2", "moosefs",
                   "moosefs-goal2", "glusterfs"]


def _ancestors():
    """Our own process and those that started us (their command lines may name the scratch)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def cleanup_stale(scratch, repo, logf):
    """Undo what an earlier run killed with SIGKILL left behind under @scratch:
    mounts, its local-cluster, MooseFS/GlusterFS daemons naming our paths, and
    network namespaces of dead runs. Returns what was cleaned, for the log."""
    done = []
    scratch = os.path.realpath(str(scratch))
    with open("/proc/self/mounts") as f:
        stale = [line.split()[1] for line in f if line.split()[1].startswith(scratch + "/")]
    for m in sorted(stale, key=len, reverse=True):
        unmount(m, logf)
        done.append("unmounted " + m)
    for name in (t.name for t in TARGETS.values() if issubclass(t, RdfsFuseTarget)):
        lc_dir = Path(scratch) / name
        if (lc_dir / "state.json").exists():
            sh([repo / "deploy" / "local-cluster", "down", "--dir", lc_dir], logf, timeout=120,
               check=False)
            done.append("stopped the local-cluster in " + str(lc_dir))
    pids = [p for p in pids_with_arg(scratch + "/") if p not in _ancestors()]
    if pids:
        kill_pids(pids, logf)
        done.append("killed %d process(es) using %s" % (len(pids), scratch))
    try:
        names = os.listdir("/run/netns")
    except OSError:
        names = []
    for ns in names:
        if ns.startswith("rdfsbench-mfs-"):
            try:
                alive = os.path.exists("/proc/%d" % int(ns.rsplit("-", 1)[1]))
            except ValueError:
                continue
            if not alive:
                sh(["ip", "netns", "del", ns], logf, check=False)
                done.append("removed network namespace " + ns)
    return done
