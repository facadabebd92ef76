# SPDX-License-Identifier: MIT
"""Speak rdfs's wire protocol from Python, for the raw-socket tests.

Only what those tests need: the 24-byte frame header of lib/frame.h, a minimal
protobuf encoder/decoder (varint and length-delimited fields), and the
HMAC-SHA256 challenge-response of rdfs.proto's AuthChallenge/AuthResponse/
AuthResult. Written from the headers, not from the C code, so it checks them.
"""
import hashlib
import hmac
import os
import socket
import struct

MAGIC = 0x53464452
VERSION = 1
HDR = struct.Struct("<IBBHiIII")
HDR_LEN = 24
FLAG_REPLY = 0x01
FLAG_MORE = 0x02
ROOT_INO = 1
CAP_READ = 1
CAP_WRITE = 2
MAX_BODY = 1 << 20
MAX_DATA = 16 << 20

OP_AUTH_CHALLENGE = 1
OP_AUTH_RESPONSE = 2
OP_AUTH_RESULT = 3
OP_PING = 4
OP_LOOKUP = 16
OP_GETATTR = 17
OP_SETATTR = 18
OP_MKNOD = 19
OP_MKDIR = 20
OP_UNLINK = 21
OP_RENAME = 23
OP_LINK = 24
OP_SYMLINK = 25
OP_READDIR = 27
OP_STATFS = 28
OP_GETXATTR = 29
OP_SETXATTR = 30
OP_LISTXATTR = 31
OP_REMOVEXATTR = 32
OP_OPEN = 33
OP_LAYOUT = 35
OP_REGISTER = 37
OP_SERVER_LIST = 38
OP_READ = 64
OP_WRITE = 65
OP_VOLUME_INFO = 67
METASERVER_OPS = list(range(16, 39))
IOSERVER_OPS = [64, 65, 66, 67]

assert HDR.size == HDR_LEN


def frame(opcode, body=b"", data=b"", tag=1, status=0, flags=0,
          magic=MAGIC, version=VERSION, body_len=None, data_len=None):
    """A frame; body_len/data_len may lie about the lengths."""
    hdr = HDR.pack(magic, version, flags, opcode, status, tag,
                   len(body) if body_len is None else body_len,
                   len(data) if data_len is None else data_len)
    return hdr + body + data


# ------------------------------------------------------------ protobuf, minimal
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint((num << 3) | 2) + varint(len(b)) + b


def cred(uid, gid, groups=()):
    """A Cred message (the caller's identity in every metaserver request)."""
    return (field_varint(1, uid) + field_varint(2, gid)
            + b"".join(field_varint(3, g) for g in groups))


def decode(buf):
    """Protobuf bytes -> {field number: [values]} (varints as int, others as bytes)."""
    out = {}
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            n, i = _read_varint(buf, i)
            v = bytes(buf[i:i + n])
            if len(v) != n:
                raise ValueError("truncated protobuf field")
            i += n
        elif wt == 1:
            v = bytes(buf[i:i + 8])
            i += 8
        elif wt == 5:
            v = bytes(buf[i:i + 4])
            i += 4
        else:
            raise ValueError("bad wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def _read_varint(buf, i):
    shift = v = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


# ------------------------------------------------------------ connection
class Conn:
    """One TCP connection that reads whole frames."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._tag = 0

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by peer after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_frame(self):
        """(header dict, body, data); raises ConnectionError if the peer closes."""
        magic, ver, flags, op, status, tag, blen, dlen = HDR.unpack(self._recv_exact(HDR_LEN))
        if magic != MAGIC:
            raise ValueError("bad magic 0x%08x from server" % magic)
        if blen > MAX_BODY or dlen > MAX_DATA:
            raise ValueError("server sent oversized frame")
        body = self._recv_exact(blen)
        data = self._recv_exact(dlen)
        return dict(magic=magic, version=ver, flags=flags, opcode=op, status=status,
                    tag=tag, body_len=blen, data_len=dlen), body, data

    def closed_or_error(self, timeout=10.0):
        """After a bad message: 'closed', or ('error', status) for an error reply.

        A success reply is ('ok', hdr); silence is a string saying so.
        """
        self.sock.settimeout(timeout)
        try:
            hdr, body, _ = self.recv_frame()
        except (ConnectionError, ConnectionResetError, BrokenPipeError):
            return "closed"
        except socket.timeout:
            return "no answer within %g s" % timeout
        if hdr["status"] < 0:
            return ("error", hdr["status"])
        return ("ok", hdr)

    def request(self, opcode, body=b"", data=b"", tag=None, timeout=30.0):
        """Send one request and wait for its whole reply: (status, body, data).

        The data of partial (FLAG_MORE) frames of the reply is joined; frames of
        other tags are skipped.
        """
        self._tag += 1
        tag = self._tag if tag is None else tag
        self.send(frame(opcode, body, data, tag=tag))
        self.sock.settimeout(timeout)
        got = b""
        while True:
            hdr, rbody, rdata = self.recv_frame()
            if hdr["tag"] != tag:
                continue
            got += rdata
            if not hdr["flags"] & FLAG_MORE:
                return hdr["status"], rbody, got


def call(conn, opcode, body=b"", data=b"", timeout=30.0):
    """One request on @conn: (status, reply body)."""
    status, rbody, _ = conn.request(opcode, body, data, timeout=timeout)
    return status, rbody


def load_secret(path):
    """The secret as auth_secret_load reads it: the file's bytes minus one trailing newline."""
    with open(path, "rb") as f:
        b = f.read()
    if b.endswith(b"\n"):
        b = b[:-1]
    return b


def server_key(cap_key):
    """The key servers prove themselves with (role "server"): HMAC-SHA256(cap.key, label)."""
    return hmac.new(cap_key, b"rdfs-server-key-v1", hashlib.sha256).digest()


def authenticate(conn, secret, role="client"):
    """Run the client side of the handshake.

    Returns "accepted" (the server took our proof and proved it knows the
    secret), "accepted, bad server proof", "closed", ("error", status), or a
    string saying what else went wrong.
    """
    hdr, body, _ = conn.recv_frame()
    if hdr["opcode"] != OP_AUTH_CHALLENGE:
        return "first frame is opcode %d, not AUTH_CHALLENGE" % hdr["opcode"]
    snonce = decode(body).get(1, [b""])[0]
    cnonce = os.urandom(32)
    mac = hmac.new(secret, b"rdfs-auth-client" + snonce + cnonce + role.encode(),
                   hashlib.sha256).digest()
    resp = field_bytes(1, mac) + field_bytes(2, cnonce) + field_bytes(3, role)
    conn.send(frame(OP_AUTH_RESPONSE, resp, tag=hdr["tag"]))
    try:
        hdr, body, _ = conn.recv_frame()
    except (ConnectionError, ConnectionResetError):
        return "closed"
    if hdr["status"] != 0:
        return ("error", hdr["status"])
    server_mac = decode(body).get(1, [b""])[0]
    want = hmac.new(secret, b"rdfs-auth-server" + cnonce + snonce, hashlib.sha256).digest()
    if not hmac.compare_digest(server_mac, want):
        return "accepted, bad server proof"
    return "accepted"
