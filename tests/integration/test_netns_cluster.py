# SPDX-License-Identifier: MIT
"""The data checks on many hosts: a cluster whose hosts are network namespaces
(deploy/netns-cluster through netns.py), 1 metaserver, 4 I/O-server hosts and
2 client hosts, each rdfs-fuse on its own host. Nothing here may lean on
loopback or on one host: every byte crosses the bridge between two addresses.

What these tests prove, every file checked byte for byte:
  - `netns-cluster status --json` names each host once, with its role, its own
    address in 10.77.0.0/24 and its namespace; servers listen on their host's
    address (`rdfs status`), clients' mounts are mounted;
  - what client0 wrote and closed, client1 reads on open (close-to-open), and
    the other way round;
  - a file striped over 4 (setstripe -c 4) has chunks on all 4 I/O servers
    (`rdfs layout`) and reads back whole from the other client;
  - both clients writing a file each at the same time: both files right, read
    from the other client;
  - a rename and an unlink on one client are what the other sees;
  - degrade --delay: the delay runs (netdelay and its NFQUEUE rule where the
    kernel has no netem), traffic flows both ways through it, a ping takes at
    least the delay, and heal removes it all. Timing is bench/netns-throughput's.
"""
import json
import os
import re
import subprocess
import threading

import pytest

import netns
from conftest import BIN, MiB, REPO, assert_bytes_equal, drop_cache
from test_layout import parse_layout

N_IO = 4
NETNS_CLUSTER = REPO / "deploy" / "netns-cluster"

pytestmark = netns.module_marks()


@pytest.fixture(scope="module")
def nc():
    # no attribute or entry caching: what one client did, the other sees at once
    yield from netns.module_cluster("netns4", n_io=N_IO, n_clients=2,
                                    fuse_opts=["attr_timeout=0", "entry_timeout=0"])


def mnt(nc, client):
    return nc.hosts[client].mount


def write_file(path, data, chunk=MiB):
    with open(path, "wb") as f:
        for off in range(0, len(data), chunk):
            f.write(data[off:off + chunk])
        os.fsync(f.fileno())


def read_fresh(path):
    drop_cache(path)
    with open(path, "rb") as f:
        return f.read()


def servers(nc):
    """{name: (id, url)} of the I/O servers `rdfs status` lists."""
    out = nc.rdfs("status").stdout
    return {m.group(2): (int(m.group(1)), m.group(3)) for m in
            re.finditer(r"^\s*(\d+)\s+(\S+)\s+(\S+://\S+)\s+(?:up|down)\b", out, re.M)}


def test_status_json_names_every_host_with_its_role_and_address(nc):
    p = subprocess.run([str(NETNS_CLUSTER), "status", "--dir", str(nc.dir), "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 0, "status exited %d: %s" % (p.returncode, p.stderr)
    hosts = json.loads(p.stdout)["hosts"]
    roles = sorted(h["role"] for h in hosts)
    assert roles == ["client"] * 2 + ["ioserver"] * N_IO + ["metaserver"], roles
    for key in ("name", "address", "netns"):
        vals = [h[key] for h in hosts]
        assert len(set(vals)) == len(vals), "%s not unique: %s" % (key, vals)
    namespaces = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True,
                                check=True).stdout.split()
    for h in hosts:
        assert re.fullmatch(r"10\.77\.0\.\d+", h["address"]), h
        assert h["netns"] in namespaces, h
        assert h["pids"], h
        if h["role"] == "client":
            assert h["mount"] and os.path.ismount(h["mount"]), h
        else:
            assert h["mount"] is None, h
        # every host serves metrics, a client host through its rdfs-fuse
        assert h["metrics_url"] == "http://%s:9100/metrics" % h["address"], h
    # each I/O server registered with its own host's address, none with loopback
    listed = servers(nc)
    assert sorted(listed) == sorted(h["name"] for h in hosts if h["role"] == "ioserver")
    by_name = {h["name"]: h for h in hosts}
    for name, (_, url) in listed.items():
        assert url == "tcp://%s:7100" % by_name[name]["address"], (name, url)


def test_close_to_open_between_client_hosts(nc):
    a, b = mnt(nc, "client0"), mnt(nc, "client1")
    data = os.urandom(8 * MiB + 12345)
    write_file(a / "cto", data)
    assert_bytes_equal(data, read_fresh(b / "cto"), "client1 reads what client0 wrote")
    # and back: client1 rewrites the middle, client0 opens after the close
    patch = os.urandom(3 * MiB + 7)
    with open(b / "cto", "r+b") as f:
        f.seek(2 * MiB + 1)
        f.write(patch)
    want = data[:2 * MiB + 1] + patch + data[2 * MiB + 1 + len(patch):]
    assert_bytes_equal(want, read_fresh(a / "cto"), "client0 reads client1's rewrite")


def test_file_striped_over_all_four_servers(nc):
    nc.rdfs("setstripe", "-c", str(N_IO), "-S", "1M", "/striped")
    data = os.urandom(16 * MiB + 999)
    write_file(mnt(nc, "client0") / "striped", data)
    out = nc.rdfs("layout", "/striped").stdout
    rows = parse_layout(out)
    on = {r["server"] for r in rows if r["state"] == "written"}
    assert on == {i for i, _ in servers(nc).values()}, "chunks on %s:\n%s" % (on, out)
    assert sum(r["length"] for r in rows if r["state"] == "written") >= len(data), out
    assert_bytes_equal(data, read_fresh(mnt(nc, "client1") / "striped"),
                       "client1 reads the file striped over 4")


def test_concurrent_writers_on_both_clients(nc):
    files = {c: (mnt(nc, c) / ("conc-" + c), os.urandom(24 * MiB + 4096 * n + 5))
             for n, c in enumerate(("client0", "client1"))}
    errors = []

    def writer(path, data):
        try:
            write_file(path, data, chunk=256 * 1024)
        except OSError as e:
            errors.append("%s: %s" % (path, e))

    threads = [threading.Thread(target=writer, args=v) for v in files.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a writer hangs"
    assert not errors, errors
    for writer_host, reader_host in (("client0", "client1"), ("client1", "client0")):
        path, data = files[writer_host]
        assert_bytes_equal(data, read_fresh(mnt(nc, reader_host) / path.name),
                           "%s reads what %s wrote" % (reader_host, writer_host))


def test_rename_and_unlink_seen_from_the_other_client(nc):
    a, b = mnt(nc, "client0"), mnt(nc, "client1")
    (a / "ren").mkdir()
    data = os.urandom(MiB + 3)
    write_file(a / "ren" / "old", data)
    assert_bytes_equal(data, read_fresh(b / "ren" / "old"), "client1 before the rename")
    os.rename(a / "ren" / "old", a / "ren" / "new")
    assert not (b / "ren" / "old").exists(), "client1 still sees the old name"
    assert sorted(os.listdir(b / "ren")) == ["new"]
    assert_bytes_equal(data, read_fresh(b / "ren" / "new"), "client1 after the rename")
    os.unlink(b / "ren" / "new")
    assert not (a / "ren" / "new").exists(), "client0 still sees the unlinked file"
    assert os.listdir(a / "ren") == []
    os.rmdir(a / "ren")
    assert not (b / "ren").exists()


def _queue_packets(pid):
    """The id sequence of netdelay's NFQUEUE queue (packets it was given so far)."""
    with open("/proc/%d/net/netfilter/nfnetlink_queue" % pid) as f:
        for line in f:
            col = line.split()
            if col[0] == str(netns._engine.NETDELAY_QUEUE):
                return int(col[7])
    raise AssertionError("queue %d is not bound in netdelay's namespace" %
                         netns._engine.NETDELAY_QUEUE)


def _ping_min_ms(nc, src, dst):
    p = nc.run_in(src, ["ping", "-n", "-q", "-c", "5", "-i", "0.2", nc.hosts[dst].address])
    return float(re.search(r"= ([\d.]+)/", p.stdout).group(1))


def test_delay_runs_and_traffic_flows_both_ways(nc):
    delay_ms = 2
    nc.degrade("client0", delay_ms=delay_ms)
    try:
        h = nc.hosts["client0"]
        if "netdelay" in h.faults:
            pid = nc.delay_pid("client0")
            assert pid and netns._engine._alive(pid, "netdelay"), "netdelay does not run"
            rule = ["iptables", "-w", "-C"] + netns._engine.NETDELAY_RULE
            assert nc.run_in("client0", rule, check=False).returncode == 0, "no NFQUEUE rule"
            before = _queue_packets(pid)
        else:
            assert "qdisc" in h.faults, h.faults
            qd = nc.run_in("client0", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
            assert "netem" in qd, qd
        a, b = mnt(nc, "client0"), mnt(nc, "client1")
        up = os.urandom(4 * MiB + 1)
        write_file(a / "delayed-up", up)
        assert_bytes_equal(up, read_fresh(b / "delayed-up"), "client1, client0 delayed")
        down = os.urandom(4 * MiB + 2)
        write_file(b / "delayed-down", down)
        assert_bytes_equal(down, read_fresh(a / "delayed-down"), "client0 delayed reads")
        if "netdelay" in h.faults:
            assert _queue_packets(pid) > before, "no packet went through netdelay"
        # a lower bound only: a delay is never shorter (a busy machine makes it longer)
        if subprocess.run(["which", "ping"], stdout=subprocess.DEVNULL).returncode == 0:
            rtt = _ping_min_ms(nc, "client0", "io0")
            assert rtt >= delay_ms * 0.9, "ping client0 -> io0 took %.3f ms" % rtt
    finally:
        nc.heal("client0")
    assert nc.delay_pid("client0") is None
    rule = ["iptables", "-w", "-C"] + netns._engine.NETDELAY_RULE
    assert nc.run_in("client0", rule, check=False).returncode != 0, "the rule outlived heal"
    data = os.urandom(MiB)
    write_file(mnt(nc, "client0") / "healed", data)
    assert_bytes_equal(data, read_fresh(mnt(nc, "client1") / "healed"), "after the heal")


def test_netdelay_refuses_bad_arguments():
    for argv in ([], ["--queue", "1"], ["--queue", "x", "--delay", "1"],
                 ["--queue", "1", "--delay", "-1"], ["--queue", "1", "--delay", "1", "extra"]):
        p = subprocess.run([str(BIN / "netdelay")] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=10)
        assert p.returncode == 2, (argv, p.returncode, p.stderr)
