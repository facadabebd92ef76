# SPDX-License-Identifier: MIT
"""tls://: a cluster whose servers listen only inside TLS 1.3 (issue 12).

Its own cluster (`local-cluster up --transport tls`), whatever
RDFS_TEST_TRANSPORT says: data through the mount byte for byte, and at the
protocol level, with `openssl s_client` as an independent TLS client:
- the PSK is what DESIGN.md says (HMAC-SHA256(key, "rdfs-tls-psk-v1"), the
  identity the rdfs claim), and inside the TLS stream the server speaks rdfs;
- a wrong key, a claim the key does not prove (the cluster secret naming
  "server", a node key naming another generation) and a plain-TCP peer are
  refused before a byte of rdfs is sent, and the servers go on serving;
- a tool given tcp:// for a tls:// cluster fails and says why.
`make test` also runs the data tests of the suite over TLS (test-integration-tls).
"""
import hashlib
import hmac
import os
import select
import socket
import subprocess
import time

import pytest

import rdfswire as w
from conftest import (BIN, MiB, _start, _stop, assert_bytes_equal, drop_cache, fsck_clean,
                      fuse_only, run)
from test_trust import node_add

pytestmark = fuse_only("openssl s_client and rdfs-fuse here; the kernel client over tls:// "
                       "is tests/vm/suite.d/lkm-tls")

SUITE = "TLS_AES_128_GCM_SHA256"


@pytest.fixture(scope="module")
def tls_cluster():
    c = _start("tls", 2, transport="tls")
    yield c
    try:
        fsck_clean(c)
    finally:
        _stop(c)


def tls_psk(key):
    """The TLS pre-shared key of an rdfs key, as lib/auth.h's auth_tls_psk() makes it."""
    return hmac.new(key, b"rdfs-tls-psk-v1", hashlib.sha256).digest()


def s_client(port, identity, psk):
    """Run `openssl s_client` with an external PSK against 127.0.0.1:@port and
    return (what it decrypted: the server's first frame, or b"" when the
    handshake failed or nothing came within 20 s; s_client's stderr). Its
    stdin stays open until then: at EOF it would hang up first."""
    p = subprocess.Popen(
        ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-tls1_3",
         "-ciphersuites", SUITE, "-psk_identity", identity, "-psk", psk.hex(), "-quiet",
         "-no_ign_eof"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = b""
    deadline = time.monotonic() + 20
    while len(got) < w.HDR_LEN and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stdout], [], [], 0.5)
        if ready:
            b = os.read(p.stdout.fileno(), 4096)
            if not b:
                break
            got += b
        elif p.poll() is not None:
            break
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    err = p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    return got, err.decode(errors="replace")


def is_challenge(data):
    """Whether @data starts with an rdfs frame: the AuthChallenge a server opens with."""
    if len(data) < w.HDR_LEN:
        return False
    magic, version = w.HDR.unpack(data[:w.HDR_LEN])[:2]
    return magic == w.MAGIC and version == w.VERSION


def metaserver_log(c):
    return (c.dir / "log" / "metaserver.log").read_text(errors="replace")


def test_status_lists_tls_ioservers_and_data_is_byte_for_byte(tls_cluster):
    c = tls_cluster
    out = c.rdfs("status").stdout
    assert out.count("tls://127.0.0.1:") >= c.n_io and "tcp://" not in out, out
    big = os.urandom(48 * MiB + 12345)
    small = os.urandom(3901)
    (c.mnt / "big").write_bytes(big)
    (c.mnt / "small").write_bytes(small)
    drop_cache(c.mnt / "big")
    drop_cache(c.mnt / "small")
    assert_bytes_equal(big, (c.mnt / "big").read_bytes(), "48 MiB file over TLS")
    assert_bytes_equal(small, (c.mnt / "small").read_bytes(), "3901-byte file over TLS")


def test_copy_between_ioservers_runs_inside_tls(tls_cluster):
    """copy_file_range: the I/O servers fetch from each other over tls:// too."""
    c = tls_cluster
    data = os.urandom(12 * MiB)
    (c.mnt / "copy-src").write_bytes(data)
    with open(c.mnt / "copy-src", "rb") as s, open(c.mnt / "copy-dst", "wb") as d:
        left = len(data)
        while left:
            n = os.copy_file_range(s.fileno(), d.fileno(), left)
            assert n > 0
            left -= n
    drop_cache(c.mnt / "copy-dst")
    assert_bytes_equal(data, (c.mnt / "copy-dst").read_bytes(), "copy over TLS")


def test_independent_tls_client_with_the_documented_psk_gets_rdfs(tls_cluster):
    """openssl s_client, keyed as DESIGN.md says, completes the handshake with the
    metaserver and every I/O server, and what it decrypts is an rdfs AuthChallenge."""
    c = tls_cluster
    psk = tls_psk(w.load_secret(c.secret))
    for port in c.ports():
        data, err = s_client(port, "client", psk)
        assert is_challenge(data), "port %d: no rdfs frame inside TLS: %r\n%s" % (
            port, data[:64], err)


@pytest.mark.parametrize("case", ["wrong key", "secret claims server",
                                  "server key claims client"])
def test_a_key_that_does_not_prove_the_identity_is_refused(tls_cluster, case):
    c = tls_cluster
    secret = w.load_secret(c.secret)
    server = w.server_key(w.load_secret(c.dir / "cap.key"))
    identity, key = {
        "wrong key": ("client", b"not the cluster secret, 40 bytes long...."),
        "secret claims server": ("server", secret),
        "server key claims client": ("client", server),
    }[case]
    for port in c.ports():
        data, err = s_client(port, identity, tls_psk(key))
        assert data == b"", "port %d answered %r to %s" % (port, data[:64], case)
        assert "alert" in err or "error" in err, err
    assert "refused in the TLS handshake" in metaserver_log(c)
    # and everyone else is still served
    data, _ = s_client(c.port, "client", tls_psk(secret))
    assert is_challenge(data)


def test_node_key_proves_only_its_own_generation(tls_cluster):
    c = tls_cluster
    path, claim, key = node_add(c, "tlsnode")
    data, err = s_client(c.port, claim, tls_psk(key))
    assert is_challenge(data), err
    data, err = s_client(c.port, "node:tlsnode:2", tls_psk(key))
    assert data == b"", "generation 2 accepted with generation 1's key: %r" % data[:64]
    c.rdfs("node", "revoke", "tlsnode")


def test_plain_peer_gets_nothing_in_clear_and_servers_go_on(tls_cluster):
    """A peer that speaks plain rdfs to a tls:// port never sees a plaintext byte:
    it is closed (at most after a TLS alert), and the mount keeps working."""
    c = tls_cluster
    for port in c.ports():
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(w.HDR.pack(w.MAGIC, w.VERSION, 0, 1, 0, 1, 0, 0))
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        assert not is_challenge(got), "port %d sent rdfs in clear: %r" % (port, got[:64])
        assert got == b"" or got[0] == 0x15, \
            "port %d: expected nothing or a TLS alert record, got %r" % (port, got[:16])
    data = os.urandom(MiB)
    (c.mnt / "after-plain").write_bytes(data)
    drop_cache(c.mnt / "after-plain")
    assert (c.mnt / "after-plain").read_bytes() == data


def test_tcp_url_for_a_tls_cluster_fails_and_says_why(tls_cluster, tmp_path):
    c = tls_cluster
    conf = tmp_path / "plain.conf"
    conf.write_text("[cluster]\nmetaserver = tcp://127.0.0.1:%d\nsecret_file = %s\n"
                    % (c.port, c.secret))
    p = run([BIN / "rdfs", "--config", conf, "status"], check=False, timeout=120)
    assert p.returncode != 0
    assert "closed before its challenge" in p.stderr and "tls:// only" in p.stderr, p.stderr


def test_wrong_secret_is_refused_by_the_tool_in_the_handshake(tls_cluster, tmp_path):
    c = tls_cluster
    bad = tmp_path / "bad-secret"
    bad.write_bytes(b"x" * 40)
    os.chmod(bad, 0o600)
    conf = tmp_path / "bad.conf"
    conf.write_text("[cluster]\nmetaserver = %s\nsecret_file = %s\n" % (c.url, bad))
    p = run([BIN / "rdfs", "--config", conf, "status"], check=False, timeout=120)
    assert p.returncode != 0
    assert "TLS handshake failed: the server refused our key" in p.stderr, p.stderr
