#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rdfs_fsx: a model-based random file-operation tester in the spirit of fsx.

It works on one file and keeps an in-memory model (a bytearray) of what the
file must contain. Each of --ops random operations, chosen by a
random.Random(--seed), is done on the file and on the model, and whatever the
file system can show is compared with the model:

  read        pread at a random offset and length (past EOF too: short reads)
  write       pwrite of random bytes (holes when it starts past EOF)
  mapread     MAP_SHARED mapping of a range within the size, compared
  mapwrite    MAP_SHARED mapping of a range within the size, random bytes
              stored through it, then msync (and a pread of the range) or not
  truncate    ftruncate up (zero fill) or down
  falloc      fallocate mode 0 (extends the size with zeros past EOF)
  falloc_keep fallocate FALLOC_FL_KEEP_SIZE (no visible change)
  punch_hole  fallocate FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE (zeros, same size)
  zero_range  fallocate FALLOC_FL_ZERO_RANGE (zeros; extends the size past EOF)
  copy_range  copy_file_range within the file, ranges that do not overlap;
              copies min(len, size - src) bytes
  fsync       fsync or fdatasync
  reopen      close and open O_RDWR again; fstat size against the model. With
              --second PATH2 (the same file through another mount of the same
              cluster) PATH2 is then opened read-only and all of it compared
              (close-to-open consistency)
  verify      pread of the whole file, compared
  dread       with --direct: pread through a second descriptor opened O_DIRECT,
              any offset and length (the client bounces what is unaligned)
  dwrite      with --direct: pwrite of random bytes through that descriptor
              (cached pages of the range must not hide them afterwards)

After every operation that may change the size, fstat's st_size must equal
the model's length.

Space: every --space-every operations, after every reopen and at the end
(also after the last close), the file's allocated space, st_blocks * 512,
must not exceed a bound that no sequence of operations breaks unless blocks
leak:

  (the largest extent the file ever had, rounded up to --chunk-size,
   + --alloc-ahead) * --copies

where the largest extent is the largest size the model ever had, or the end
of a FALLOC_FL_KEEP_SIZE range if further (those blocks stay past the end).
--alloc-ahead is how far past a write at the end of the file a client may
allocate: rdfs's allocate-ahead window, RDFS_PREALLOC_MAX in
lib/client/client_internal.h (64 MiB; the kernel client's write layouts ask 16 MiB).
st_blocks comes from statx(AT_STATX_FORCE_SYNC), so a FUSE mount asks its
server rather than its attribute cache (plain fstat where there is no
statx); the bound only grows, so a stale st_blocks could only hide a leak
for a moment, never fail a good run. With --df (only when nothing else
changes the file system's used space during the run) the same bound applies
to how much the file system's used space (statvfs) grew since the open,
which also catches blocks leaked outside the file's own count (freed blocks
held back). --no-space-check turns both off.

A fallocate mode or copy_file_range that fails with EOPNOTSUPP (or EXDEV for
copy_file_range) leaves the model unchanged and is not tried again in the run;
the summary names it. The file stays within --max-size bytes. At the end the
whole file is compared once more (also through --second).

Offsets favour the places where file systems split I/O: page (4 KiB), 128 KiB
and 1 MiB (an rdfs chunk) boundaries and the end of the file; lengths are
log-uniform from 1 byte to --max-len.

The run depends on the seed alone (and on which modes the file system
supports): `rdfs_fsx.py --seed N --ops M PATH` repeats a failing run. On the
first mismatch (or an unexpected error from a system call) it prints the last
50 operations, the first differing offset, the expected and the actual bytes
around it, the seed and the number of operations done, writes the whole
operation log to --log if given, and exits 1. Success: exit 0 and one summary
line (operations per kind, disabled modes).

Soak: the same with many more operations, e.g.
    rdfs_fsx.py --seed 12345 --ops 200000 /mnt/rdfs/fsx.soak
or the integration tests with every run scaled up:
    RDFS_FSX_OPS=200000 python3 -m pytest tests/integration/test_fsx.py

Importable: run(path, seed=..., ops=..., ...) returns a Result or raises
Failure (whose .report is the text printed above).
"""
import argparse
import ctypes
import ctypes.util
import errno
import math
import mmap
import os
import random
import sys
import time
import zlib

KiB = 1 << 10
MiB = 1 << 20
PAGE = mmap.PAGESIZE
# Where I/O gets split: pages, FUSE's usual max_write (128 KiB), rdfs chunks (1 MiB).
BOUNDARIES = (PAGE, 128 * KiB, MiB)

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

# op kind -> fallocate mode
FALLOC_MODES = {
    "falloc": 0,
    "falloc_keep": FALLOC_FL_KEEP_SIZE,
    "punch_hole": FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
    "zero_range": FALLOC_FL_ZERO_RANGE,
}
MMAP_KINDS = ("mapread", "mapwrite")

# Relative weights of the operations.
WEIGHTS = {
    "read": 20,
    "write": 20,
    "mapread": 7,
    "mapwrite": 7,
    "truncate": 6,
    "falloc": 3,
    "falloc_keep": 2,
    "punch_hole": 3,
    "zero_range": 3,
    "copy_range": 5,
    "fsync": 3,
    "reopen": 3,
    "verify": 2,
}
# With --direct: through a descriptor opened O_DIRECT.
DIRECT_WEIGHTS = {
    "dread": 8,
    "dwrite": 8,
}
KINDS = tuple(WEIGHTS) + tuple(DIRECT_WEIGHTS)
# Not possible on an empty file (nothing to map or copy from).
NEED_DATA = ("mapread", "mapwrite", "copy_range")
# Operations after which st_size is compared with the model.
SIZE_CHANGING = ("write", "dwrite", "truncate", "falloc", "falloc_keep", "punch_hole", "zero_range",
                 "copy_range")

LOG_TAIL = 50
DEFAULT_MAX_SIZE = 256 * KiB
DEFAULT_OPS = 10000
# The space bound (see the docstring): rdfs's chunk, and RDFS_PREALLOC_MAX in
# lib/client/client_internal.h, the most a client allocates past a write at the end.
DEFAULT_CHUNK = MiB
DEFAULT_ALLOC_AHEAD = 64 * MiB
DEFAULT_SPACE_EVERY = 100

_fallocate = None
_statx = None
AT_EMPTY_PATH = 0x1000
AT_STATX_FORCE_SYNC = 0x2000
STATX_BLOCKS = 0x400


def fallocate(fd, mode, offset, length):
    """fallocate(2) through libc; raises OSError on failure."""
    global _fallocate
    if _fallocate is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        f = getattr(libc, "fallocate64", None) or libc.fallocate
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        f.restype = ctypes.c_int
        _fallocate = f
    if _fallocate(fd, mode, offset, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "fallocate(mode=%#x, %d, %d): %s" % (mode, offset, length,
                                                              os.strerror(e)))


def allocated_blocks(fd=None, path=None):
    """st_blocks of @fd (or @path), fresh from the file system where it can tell:
    statx(AT_STATX_FORCE_SYNC) makes FUSE and network file systems ask their
    server instead of answering from an attribute cache. os.stat's otherwise."""
    global _statx
    if _statx is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            f = libc.statx
            f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                          ctypes.c_char_p]
            f.restype = ctypes.c_int
            _statx = f
        except AttributeError:
            _statx = False
    if _statx:
        buf = ctypes.create_string_buffer(256)         # struct statx
        if fd is not None:
            ret = _statx(fd, b"", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_BLOCKS, buf)
        else:
            ret = _statx(-100, os.fsencode(path), AT_STATX_FORCE_SYNC, STATX_BLOCKS, buf)
        if ret == 0:
            mask = int.from_bytes(buf.raw[0:4], "little")
            if mask & STATX_BLOCKS:
                return int.from_bytes(buf.raw[48:56], "little")    # stx_blocks
        elif ctypes.get_errno() not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            e = ctypes.get_errno()
            raise OSError(e, "statx: %s" % os.strerror(e))
    return (os.fstat(fd) if fd is not None else os.stat(path)).st_blocks


class Failure(Exception):
    """A mismatch or an unexpected error; .report is the full text for a person."""

    def __init__(self, report):
        super().__init__(report)
        self.report = report


class Result:
    def __init__(self, seed, ops, counts, disabled, size, seconds, space=None):
        self.seed = seed
        self.ops = ops
        self.counts = counts            # kind -> operations done
        self.disabled = disabled        # kind -> (op index, errno name)
        self.size = size                # final file size
        self.seconds = seconds
        self.space = space              # the space checks' peaks, or None when off

    def summary(self):
        kinds = " ".join("%s=%d" % (k, self.counts[k]) for k in KINDS if self.counts.get(k))
        dis = ", ".join("%s (%s at op %d)" % (k, name, i)
                        for k, (i, name) in sorted(self.disabled.items())) or "none"
        rate = self.ops / self.seconds if self.seconds > 0 else 0.0
        if self.space:
            sp = self.space
            space = ("space: %d checks, at most %d KiB allocated of a %d KiB bound%s"
                     % (sp["checks"], sp["peak"] // KiB, sp["bound"] // KiB,
                        "" if sp["df_peak"] is None
                        else ", used space grew %d KiB at most" % (sp["df_peak"] // KiB)))
        else:
            space = "space: not checked"
        return ("rdfs_fsx: OK seed %d: %d ops in %.1f s (%.0f ops/s), final size %d; %s; "
                "per kind: %s; disabled: %s"
                % (self.seed, self.ops, self.seconds, rate, self.size, space, kinds, dis))


def _hexdump(data, base, mark=None):
    lines = []
    for i in range(0, len(data), 16):
        row = data[i:i + 16]
        hx = " ".join(("[%02x]" if mark == base + i + j else " %02x ") % b
                      for j, b in enumerate(row))
        lines.append("    %08x %s" % (base + i, hx))
    return "\n".join(lines) if lines else "    (no bytes)"


def first_difference(a, b):
    """First offset where @a and @b differ (min length if one is a prefix), or None."""
    if a == b:
        return None
    n = min(len(a), len(b))
    step = 1 << 12
    for off in range(0, n, step):
        if a[off:off + step] != b[off:off + step]:
            for i in range(off, min(off + step, n)):
                if a[i] != b[i]:
                    return i
    return n


class Fsx:
    def __init__(self, path, seed=1, ops=DEFAULT_OPS, max_size=DEFAULT_MAX_SIZE, max_len=None,
                 second=None, log=None, use_mmap=True, use_fallocate=True, out=sys.stdout,
                 space_check=True, space_every=DEFAULT_SPACE_EVERY, chunk_size=DEFAULT_CHUNK,
                 alloc_ahead=DEFAULT_ALLOC_AHEAD, copies=1, df=False, use_direct=False):
        if max_size < 4 * PAGE:
            raise ValueError("--max-size must be at least %d" % (4 * PAGE))
        self.path = str(path)
        self.seed = seed
        self.nops = ops
        self.max_size = max_size
        self.max_len = max_len or max(PAGE, min(MiB, max_size // 4))
        self.second = str(second) if second else None
        self.log_path = log
        self.out = out
        self.rng = random.Random(seed)
        self.model = bytearray()
        self.fd = -1
        self.dfd = -1                   # O_DIRECT, with use_direct
        self.use_direct = use_direct
        self.log = []                   # (index, kind, offset, length, details)
        self.index = 0                  # the operation being done
        self.counts = {k: 0 for k in KINDS}
        self.disabled = {}              # kind -> (op index, errno name)
        self.use_mmap = use_mmap
        self.use_fallocate = use_fallocate
        self.space_check = space_check
        self.space_every = max(1, space_every)
        self.chunk_size = chunk_size
        self.alloc_ahead = alloc_ahead
        self.copies = copies
        self.df = df
        self.high = 0                   # the largest extent the file ever had
        self.df_base = None             # the file system's used bytes at the open
        self.space = dict(checks=0, peak=0, bound=0, df_peak=None)
        self.enabled = dict(WEIGHTS)
        if not use_mmap:
            for k in MMAP_KINDS:
                del self.enabled[k]
        if not use_fallocate:
            for k in FALLOC_MODES:
                del self.enabled[k]
        if use_direct:
            self.enabled.update(DIRECT_WEIGHTS)

    # ------------------------------------------------------------ random choices
    def pick_len(self, limit):
        """1..@limit bytes, log-uniform, now and then a whole number of pages."""
        limit = max(1, limit)
        rng = self.rng
        if limit >= PAGE and rng.random() < 0.15:
            return PAGE * rng.randint(1, limit // PAGE)
        n = int(2 ** rng.uniform(0, math.log2(limit + 1)))
        return max(1, min(limit, n))

    def pick_offset(self, limit):
        """An offset in 0..@limit, often near a boundary or the end of the file."""
        rng = self.rng
        if limit <= 0:
            return 0
        r = rng.random()
        if r < 0.45:
            off = rng.randint(0, limit)
        elif r < 0.8:
            usable = [b for b in BOUNDARIES if b <= limit] or [PAGE]
            b = rng.choice(usable)
            off = b * rng.randint(0, limit // b) + rng.randint(-16, 16)
        else:
            off = len(self.model) + rng.randint(-2 * PAGE, 2 * PAGE)
        return max(0, min(limit, off))

    def random_bytes(self, n):
        return self.rng.randbytes(n)

    # ------------------------------------------------------------ the model
    def model_write(self, off, data):
        if not data:
            return          # a write of nothing does not extend the file
        end = off + len(data)
        if end > len(self.model):
            self.model.extend(bytes(end - len(self.model)))
        self.model[off:end] = data

    def model_resize(self, size):
        if size < len(self.model):
            del self.model[size:]
        else:
            self.model.extend(bytes(size - len(self.model)))

    # ------------------------------------------------------------ log and reports
    def record(self, kind, off, length, details=""):
        self.log.append((self.index, kind, off, length, details))

    def amend(self, details):
        """Add to the details of the operation logged last."""
        i, kind, off, length, d = self.log[-1]
        self.log[-1] = (i, kind, off, length, (d + " " + details).strip())

    @staticmethod
    def format_entry(e):
        i, kind, off, length, details = e
        return "%7d %-11s off=%-9d len=%-8d %s" % (i, kind, off, length, details)

    def write_log(self):
        if not self.log_path:
            return
        with open(self.log_path, "w") as f:
            f.write("# rdfs_fsx seed %d ops %d max_size %d max_len %d file %s\n"
                    % (self.seed, self.nops, self.max_size, self.max_len, self.path))
            for e in self.log:
                f.write(self.format_entry(e) + "\n")

    def fail(self, what, expected=None, got=None, base=0):
        where = ("op %d of %d" % (self.index, self.nops) if self.index <= self.nops
                 else "the final check after %d ops" % self.nops)
        lines = ["rdfs_fsx: FAILED at %s (seed %d): %s" % (where, self.seed, what)]
        if expected is not None:
            d = first_difference(expected, got)
            lines.append("expected %d bytes, got %d; first difference at file offset %d"
                         % (len(expected), len(got), base + d))
            lo = max(0, (d - 32) & ~15)
            hi = d + 48
            lines.append("  expected (file offsets):")
            lines.append(_hexdump(bytes(expected[lo:hi]), base + lo, base + d))
            lines.append("  got:")
            lines.append(_hexdump(bytes(got[lo:hi]), base + lo, base + d))
        lines.append("model size %d; file %s%s" % (len(self.model), self.path,
                                                   (" (second: %s)" % self.second)
                                                   if self.second else ""))
        lines.append("last %d operations:" % min(LOG_TAIL, len(self.log)))
        lines += [self.format_entry(e) for e in self.log[-LOG_TAIL:]]
        if self.log_path:
            try:
                self.write_log()
                lines.append("full log (%d ops) in %s" % (len(self.log), self.log_path))
            except OSError as e:
                lines.append("could not write the log to %s: %s" % (self.log_path, e))
        lines.append("reproduce: %s --seed %d --ops %d --max-size %d --max-len %d%s%s%s%s %s"
                     % (os.path.basename(__file__), self.seed, self.nops, self.max_size,
                        self.max_len, "" if self.use_mmap else " --no-mmap",
                        "" if self.use_fallocate else " --no-fallocate",
                        self.space_args(),
                        " --second " + self.second if self.second else "", self.path))
        raise Failure("\n".join(lines))

    def space_args(self):
        """The space options of this run, as the command line gives them."""
        if not self.space_check:
            return " --no-space-check"
        return (" --space-every %d --chunk-size %d --alloc-ahead %d --copies %d%s"
                % (self.space_every, self.chunk_size, self.alloc_ahead, self.copies,
                   " --df" if self.df else ""))

    # ------------------------------------------------------------ checks
    def check_bytes(self, what, expected, got, base):
        if expected != got:
            self.fail(what, expected, got, base)

    def check_size(self, what, fd=None):
        st = os.fstat(self.fd if fd is None else fd)
        if st.st_size != len(self.model):
            self.fail("%s: fstat st_size %d, model size %d" % (what, st.st_size, len(self.model)))

    def space_bound(self):
        """The most the file may have allocated now (see the docstring)."""
        c = self.chunk_size
        return ((self.high + c - 1) // c * c + self.alloc_ahead) * self.copies

    def df_used(self):
        st = os.statvfs(os.path.dirname(os.path.abspath(self.path)))
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def check_space(self, what, closed=False):
        """The file's allocated space (and with --df the file system's growth)
        within the bound; @closed: there is no fd, look at the path."""
        if not self.space_check:
            return
        blocks = allocated_blocks(path=self.path) if closed else allocated_blocks(self.fd)
        bound = self.space_bound()
        alloc = blocks * 512
        sp = self.space
        sp["checks"] += 1
        sp["peak"] = max(sp["peak"], alloc)
        sp["bound"] = bound
        how = ("the bound is (largest extent %d rounded up to the chunk, %d, + allocate-ahead "
               "%d) x %d copies = %d" % (self.high, self.chunk_size, self.alloc_ahead,
                                         self.copies, bound))
        if alloc > bound:
            self.fail("%s: the file has %d bytes allocated (st_blocks %d), more than it may: %s"
                      % (what, alloc, blocks, how))
        if self.df:
            grown = self.df_used() - self.df_base
            sp["df_peak"] = max(sp["df_peak"] or 0, grown)
            if grown > bound:
                self.fail("%s: the file system's used space grew by %d bytes since the open, "
                          "more than the file may hold (st_blocks says %d): blocks leaked "
                          "outside the file? %s" % (what, grown, alloc, how))

    def read_all(self, fd):
        """The whole file through pread until EOF."""
        chunks = []
        off = 0
        while True:
            b = os.pread(fd, MiB, off)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
            off += len(b)

    def pwrite_all(self, data, off, fd=None):
        fd = self.fd if fd is None else fd
        view = memoryview(data)
        done = 0
        while done < len(data):
            n = os.pwrite(fd, view[done:], off + done)
            if n <= 0:
                self.fail("pwrite returned %d after %d of %d bytes" % (n, done, len(data)))
            done += n

    def disable(self, kind, err):
        name = "EOPNOTSUPP" if err == errno.EOPNOTSUPP else errno.errorcode.get(err, str(err))
        del self.enabled[kind]
        self.disabled[kind] = (self.index, name)
        self.amend("-> %s: disabled for the rest of the run" % name)

    # ------------------------------------------------------------ operations
    def op_read(self, kind="read", fd=None, call="pread"):
        size = len(self.model)
        off = self.pick_offset(max(size + self.max_len, PAGE))
        n = self.pick_len(self.max_len)
        self.record(kind, off, n)
        got = os.pread(self.fd if fd is None else fd, n, off)
        self.amend("got %d" % len(got))
        self.check_bytes("%s(%d, %d)" % (call, off, n), self.model[off:off + n], got, off)

    def op_write(self, kind="write", fd=None):
        off = self.pick_offset(self.max_size - 1)
        n = self.pick_len(min(self.max_len, self.max_size - off))
        data = self.random_bytes(n)
        self.record(kind, off, n, "crc %08x%s" % (zlib.crc32(data),
                                                 " (past EOF %d)" % len(self.model)
                                                 if off > len(self.model) else ""))
        self.pwrite_all(data, off, fd)
        self.model_write(off, data)

    def op_dread(self):
        self.op_read("dread", self.dfd, "O_DIRECT pread")

    def op_dwrite(self):
        self.op_write("dwrite", self.dfd)

    def open_direct(self):
        if self.use_direct:
            self.dfd = os.open(self.path, os.O_RDWR | os.O_DIRECT)

    def map_range(self):
        size = len(self.model)
        off = self.pick_offset(size - 1)
        n = self.pick_len(min(self.max_len, size - off))
        start = off - off % mmap.ALLOCATIONGRANULARITY
        return off, n, start

    def op_mapread(self):
        off, n, start = self.map_range()
        self.record("mapread", off, n, "map %d+%d" % (start, off + n - start))
        with mmap.mmap(self.fd, off + n - start, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ,
                       offset=start) as m:
            got = m[off - start:off - start + n]
        self.check_bytes("mmap read of %d+%d" % (off, n), self.model[off:off + n], got, off)

    def op_mapwrite(self):
        off, n, start = self.map_range()
        data = self.random_bytes(n)
        sync = self.rng.random() < 0.5
        self.record("mapwrite", off, n, "map %d+%d crc %08x%s"
                    % (start, off + n - start, zlib.crc32(data), " msync" if sync else ""))
        with mmap.mmap(self.fd, off + n - start, flags=mmap.MAP_SHARED,
                       prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=start) as m:
            m[off - start:off - start + n] = data
            if sync:
                m.flush()
        self.model_write(off, data)
        if sync:
            got = os.pread(self.fd, n, off)
            self.check_bytes("pread after msync of mmap write %d+%d" % (off, n), data, got, off)

    def op_truncate(self):
        old = len(self.model)
        new = self.pick_offset(self.max_size)
        self.record("truncate", new, 0, "%d -> %d (%s)"
                    % (old, new, "up" if new > old else "down" if new < old else "same"))
        os.ftruncate(self.fd, new)
        self.model_resize(new)

    def op_fallocate(self, kind):
        mode = FALLOC_MODES[kind]
        off = self.pick_offset(self.max_size - 1)
        n = self.pick_len(min(self.max_len, self.max_size - off))
        self.record(kind, off, n, "mode %#x size %d" % (mode, len(self.model)))
        try:
            fallocate(self.fd, mode, off, n)
        except OSError as e:
            if e.errno == errno.EOPNOTSUPP:
                self.disable(kind, e.errno)
                return
            raise
        size = len(self.model)
        end = off + n
        if kind == "falloc":
            if end > size:
                self.model_resize(end)
        elif kind == "punch_hole":
            if off < size:
                z = min(end, size) - off
                self.model[off:off + z] = bytes(z)
        elif kind == "zero_range":
            if end > size:
                self.model_resize(end)
            self.model[off:end] = bytes(n)
        elif kind == "falloc_keep":
            # nothing the model can see, but the blocks past the end stay allocated
            self.high = max(self.high, end)

    def op_copy_range(self):
        size = len(self.model)
        # Now and then from the end of the file: nothing to copy.
        src = size if self.rng.random() < 0.05 else self.rng.randint(0, size - 1)
        for _ in range(8):
            want = self.pick_len(self.max_len)
            if want > self.max_size // 2:
                continue
            dst = self.pick_offset(self.max_size - want)
            if dst + want <= src or dst >= src + want:
                break
        else:
            want = 1
            dst = src + 1 if src + 1 < self.max_size else src - 1
        expect = max(0, min(want, size - src))
        self.record("copy_range", dst, want, "src %d size %d expect %d" % (src, size, expect))
        done = 0
        while True:
            # After a short copy, ask for the rest only: the copy may have grown the file.
            count = expect - done if expect else want
            try:
                n = os.copy_file_range(self.fd, self.fd, count, src + done, dst + done)
            except OSError as e:
                if done == 0 and e.errno in (errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS):
                    self.disable("copy_range", e.errno)
                    return
                raise
            if n < 0 or n > count or (n == 0 and done < expect):
                self.fail("copy_file_range(%d -> %d, %d) returned %d after %d of %d bytes"
                          % (src + done, dst + done, count, n, done, expect))
            done += n
            if done == expect:
                break
        self.model_write(dst, bytes(self.model[src:src + expect]))

    def op_fsync(self):
        data = self.rng.random() < 0.3
        self.record("fsync", 0, 0, "fdatasync" if data else "fsync")
        (os.fdatasync if data else os.fsync)(self.fd)

    def op_reopen(self):
        self.record("reopen", 0, 0, "size %d" % len(self.model))
        os.close(self.fd)
        self.fd = -1
        if self.dfd >= 0:
            os.close(self.dfd)
            self.dfd = -1
        self.fd = os.open(self.path, os.O_RDWR)
        self.open_direct()
        self.check_size("fstat after reopen")
        self.check_space("space after close and reopen")
        if self.second:
            self.check_second("after reopen")

    def check_second(self, when):
        fd = os.open(self.second, os.O_RDONLY)
        try:
            self.check_size("fstat of the second mount's file %s" % when, fd)
            got = self.read_all(fd)
        finally:
            os.close(fd)
        self.check_bytes("whole file through the second mount %s" % when,
                         self.model, got, 0)

    def op_verify(self):
        self.record("verify", 0, len(self.model))
        self.check_bytes("whole-file read", self.model, self.read_all(self.fd), 0)

    # ------------------------------------------------------------ the run
    def choose(self):
        kinds = [k for k in KINDS if k in self.enabled
                 and (self.model or k not in NEED_DATA)]
        return self.rng.choices(kinds, weights=[self.enabled[k] for k in kinds])[0]

    def step(self):
        kind = self.choose()
        if kind in FALLOC_MODES:
            self.op_fallocate(kind)
        else:
            getattr(self, "op_" + kind)()
        if kind in self.disabled and self.disabled[kind][0] == self.index:
            pass            # not done; the model is unchanged
        else:
            self.counts[kind] += 1
        self.high = max(self.high, len(self.model))
        if kind in SIZE_CHANGING:
            self.check_size("fstat after %s" % kind)
        if self.index % self.space_every == 0 and kind != "reopen":
            self.check_space("space after op %d (%s)" % (self.index, kind))

    def run(self):
        t0 = time.monotonic()
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            self.open_direct()
            self.check_size("fstat after open with O_TRUNC")
            if self.space_check and self.df:
                self.df_base = self.df_used()       # the file holds nothing now
            for self.index in range(1, self.nops + 1):
                self.step()
            self.index = self.nops + 1
            self.record("final", 0, len(self.model), "whole-file check")
            self.check_size("final fstat")
            self.check_bytes("final whole-file read", self.model, self.read_all(self.fd), 0)
            self.check_space("final space")
            if self.dfd >= 0:
                os.close(self.dfd)
                self.dfd = -1
            os.close(self.fd)
            self.fd = -1
            self.check_space("space after the last close", closed=True)
            if self.second:
                self.check_second("at the end")
        except OSError as e:
            self.fail("unexpected error: %s" % e)
        finally:
            for fd in (self.fd, self.dfd):
                if fd >= 0:
                    os.close(fd)
            self.fd = self.dfd = -1
        self.write_log()
        return Result(self.seed, self.nops, dict(self.counts), dict(self.disabled),
                      len(self.model), time.monotonic() - t0,
                      dict(self.space) if self.space_check else None)


def run(path, **kw):
    """Run the tester on @path (keywords as Fsx takes them); Result, or raises Failure."""
    return Fsx(path, **kw).run()


def size_arg(s):
    """A byte count: 262144, 256k, 4m, 1g."""
    mult = {"k": KiB, "m": MiB, "g": 1 << 30}
    s = s.strip().lower()
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="rdfs_fsx.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Model-based random file-operation tester (fsx-like) for one file.",
        epilog="""\
operations: read write mapread mapwrite truncate falloc falloc_keep punch_hole
zero_range copy_range fsync reopen verify, and with --direct dread dwrite (see
the module docstring).
A fallocate mode or copy_file_range the file system does not support
(EOPNOTSUPP; also EXDEV or ENOSYS for copy_file_range) is disabled for the rest of the run
and named in the summary.

Exit status: 0 when every check passed (one summary line), 1 at the first
mismatch, space over the bound or unexpected error (report: last 50
operations, first differing offset, expected and actual bytes, seed,
operation count), 2 on bad usage.
The seed alone reproduces a run.

Soak (many more operations; rdfs-fuse does some 400-1000 ops/s on 2 cores):
  rdfs_fsx.py --seed 12345 --ops 200000 /mnt/rdfs/fsx.soak
  RDFS_FSX_OPS=200000 python3 -m pytest tests/integration/test_fsx.py
(the second: every run of the integration tests with 200000 operations).
""")
    p.add_argument("path", metavar="PATH", help="the file to test (created or truncated)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--ops", type=int, default=DEFAULT_OPS,
                   help="number of operations (default %d)" % DEFAULT_OPS)
    p.add_argument("--max-size", type=size_arg, default=DEFAULT_MAX_SIZE, metavar="BYTES",
                   help="largest file size (default %d; suffixes k, m, g)" % DEFAULT_MAX_SIZE)
    p.add_argument("--max-len", type=size_arg, default=None, metavar="BYTES",
                   help="largest length of one operation (default max-size/4, "
                        "at least a page, at most 1 MiB)")
    p.add_argument("--second", metavar="PATH2",
                   help="PATH's file as another mount (another client) shows it: "
                        "opened read-only and compared whole after every reopen "
                        "and at the end")
    p.add_argument("--log", metavar="FILE",
                   help="write the whole operation log here (on failure and on success)")
    p.add_argument("--no-mmap", action="store_true", help="no mapread/mapwrite")
    p.add_argument("--no-fallocate", action="store_true", help="no fallocate modes")
    p.add_argument("--direct", action="store_true",
                   help="also dread/dwrite: reads and writes through a second descriptor "
                        "opened O_DIRECT (any offset and length)")
    p.add_argument("--no-space-check", action="store_true",
                   help="do not check the file's allocated space against the bound")
    p.add_argument("--space-every", type=int, default=DEFAULT_SPACE_EVERY, metavar="N",
                   help="check the space every N operations (default %d; also after "
                        "every reopen and at the end)" % DEFAULT_SPACE_EVERY)
    p.add_argument("--chunk-size", type=size_arg, default=DEFAULT_CHUNK, metavar="BYTES",
                   help="the file's chunk size, which the bound rounds up to (default 1m: "
                        "rdfs's; `rdfs layout FILE` shows it)")
    p.add_argument("--alloc-ahead", type=size_arg, default=DEFAULT_ALLOC_AHEAD, metavar="BYTES",
                   help="the most a client allocates past a write at the end of the file "
                        "(default 64m: RDFS_PREALLOC_MAX of lib/client)")
    p.add_argument("--copies", type=int, default=1, metavar="N",
                   help="the file's copies (default 1; `rdfs getcopies`)")
    p.add_argument("--df", action="store_true",
                   help="also bound the growth of the file system's used space (statvfs) "
                        "since the open: only when nothing else writes to it")
    a = p.parse_args(argv)
    if a.ops < 0:
        p.error("--ops must be >= 0")
    if a.max_size < 4 * PAGE:
        p.error("--max-size must be at least %d" % (4 * PAGE))
    if a.max_len is not None and not 1 <= a.max_len <= a.max_size:
        p.error("--max-len must be between 1 and --max-size")
    if a.space_every < 1 or a.chunk_size < 1 or a.alloc_ahead < 0 or a.copies < 1:
        p.error("--space-every, --chunk-size and --copies must be positive, "
                "--alloc-ahead not negative")
    try:
        res = run(a.path, seed=a.seed, ops=a.ops, max_size=a.max_size, max_len=a.max_len,
                  second=a.second, log=a.log, use_mmap=not a.no_mmap,
                  use_fallocate=not a.no_fallocate, space_check=not a.no_space_check,
                  space_every=a.space_every, chunk_size=a.chunk_size,
                  alloc_ahead=a.alloc_ahead, copies=a.copies, df=a.df,
                  use_direct=a.direct)
    except Failure as f:
        print(f.report, flush=True)
        return 1
    print(res.summary(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
