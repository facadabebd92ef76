# SPDX-License-Identifier: MIT
"""Running one measurement: rdfs-bench (IOR or mdtest mode) with a progress
line showing the bytes moved so far, and the loopback TCP pump."""
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


class StepError(Exception):
    """A measurement did not produce a result; the message says why."""


def _children(pid):
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def _io_bytes(pid):
    """rchar + wchar of @pid and its descendants (the forked tasks)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open("/proc/%d/io" % p) as f:
                for line in f:
                    k, v = line.split(":")
                    if k in ("rchar", "wchar"):
                        total += int(v)
        except (OSError, ValueError):
            pass
        todo += _children(p)
    return total


class Progress:
    """One status line: rewritten in place on a terminal, else printed every few seconds."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.last_print = 0.0
        self.width = 0

    def update(self, text, force=False):
        now = time.monotonic()
        if self.tty:
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.width = len(text)
            self.stream.flush()
        elif force or now - self.last_print >= 5:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_print = now

    def done(self, text):
        if self.tty:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        self.stream.write(text + "\n")
        self.stream.flush()


def _kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_bench(cmd, label, progress, logf, timeout):
    """Run rdfs-bench @cmd (a list; '{json}' is replaced by a temporary file)
    showing MB/s so far; return its JSON document. Raises StepError."""
    fd, jpath = tempfile.mkstemp(prefix="rdfs-compare-", suffix=".json")
    os.close(fd)
    cmd = [jpath if c == "{json}" else str(c) for c in cmd]
    if logf:
        logf.write("$ " + " ".join(cmd) + "\n")
        logf.flush()
    t0 = time.monotonic()
    try:
        # Its own process group, so that killing it takes its forked tasks along
        # (a task left behind would keep a file open and the mount busy).
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            while True:
                try:
                    out, err = p.communicate(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    el = time.monotonic() - t0
                    if el > timeout:
                        _kill_group(p)
                        p.communicate()
                        raise StepError("%s: timed out after %d s" % (label, timeout))
                    mb = _io_bytes(p.pid) / 1e6
                    progress.update("  %-40s %8.1f MB/s so far  (%.0f s)" % (label, mb / el, el))
        except BaseException:
            _kill_group(p)
            p.wait()
            raise
        if logf:
            logf.write(out + err)
            logf.flush()
        try:
            with open(jpath) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            doc = None
        if p.returncode != 0 or doc is None:
            tail = " | ".join((err or out).strip().splitlines()[-3:])
            raise StepError("%s: rdfs-bench exit %d: %s" % (label, p.returncode, tail))
        return doc
    finally:
        try:
            os.unlink(jpath)
        except OSError:
            pass


def _sink(port_q, secs_total):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port_q.put(s.getsockname()[1])
    c, _ = s.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    total = 0
    t0 = None
    while True:
        n = c.recv_into(view)
        if n == 0:
            break
        if t0 is None:
            t0 = time.monotonic()
        total += n
    port_q.put((total, time.monotonic() - (t0 or time.monotonic())))
    c.close()
    s.close()


def loopback_tcp_mib_s(seconds):
    """One TCP stream over 127.0.0.1 between two processes, 1 MiB sends:
    the most a single loopback connection carries on this box (MiB/s)."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    rx = ctx.Process(target=_sink, args=(q, seconds))
    rx.start()
    try:
        port = q.get(timeout=30)
        s = socket.create_connection(("127.0.0.1", port))
        data = memoryview(bytes(1 << 20))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        total, secs = q.get(timeout=60)
        s.close()
    finally:
        rx.join(timeout=30)
        if rx.is_alive():
            rx.kill()
    if secs <= 0:
        raise StepError("loopback TCP pump measured no time")
    return total / (1 << 20) / secs
