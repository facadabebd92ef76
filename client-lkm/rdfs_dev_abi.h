/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * rdfs_dev_abi.h - the request/reply ABI of /dev/rdfs between the kernel
 * module and its user-space helper (rdfs-lkm-helper). Shared by both sides.
 *
 * The helper opens /dev/rdfs and passes "fd=N" in the mount data; the mount
 * then sends its namespace requests through that open file. The helper read(2)s
 * one request at a time (struct rdfs_dev_req + op payload; a read buffer of
 * RDFS_DEV_MAX_MSG bytes always suffices) and write(2)s one reply (struct
 * rdfs_dev_reply + op payload) naming the request's id. Any number of helper
 * threads may read and reply concurrently; replies may come in any order.
 * read(2) returns 0 once the file system is unmounted: the helper exits then.
 * When the helper closes the device (or dies), every request pending or
 * in progress fails with EIO and later ones fail at once.
 *
 * All fields are native-endian (both ends run on one host). Strings in
 * payloads are NUL-terminated; their lengths include the NUL.
 */
#ifndef RDFS_DEV_ABI_H
#define RDFS_DEV_ABI_H

#include <linux/types.h>

/*
 * 2: supplementary groups in rdfs_dev_req; 128 KiB messages (64 KiB xattr
 * values); 5: files with several copies (LAYOUT_FAILED, SEG_COPY, COPY_LOST);
 * 6: POSIX ACLs: the caller's umask in rdfs_dev_mknod;
 * 7: CREATE_OPEN (atomic_open: create and open in one call);
 * 8: IO_COMMIT (the module's unstable writes made durable);
 * 9: readdirplus (RDFS_DEV_READDIR_PLUS, entries with attributes)
 */
#define RDFS_DEV_ABI_VERSION	9
#define RDFS_DEV_NAME		"rdfs"
/* Largest message either way: header + payload. */
#define RDFS_DEV_MAX_MSG	(128u * 1024u)
/* Supplementary groups a request carries (lib/client's RDFS_MAX_GROUPS). */
#define RDFS_DEV_MAX_GROUPS	64

enum rdfs_dev_op {
	RDFS_DEV_INIT = 1,	/* -> rdfs_dev_init_reply; first request of a mount */
	RDFS_DEV_LOOKUP,	/* ino = parent; name -> rdfs_dev_attr */
	RDFS_DEV_GETATTR,	/* ino -> rdfs_dev_attr */
	RDFS_DEV_SETATTR,	/* ino, handle (0: none); rdfs_dev_setattr -> rdfs_dev_attr */
	RDFS_DEV_CREATE,	/* ino = parent; rdfs_dev_mknod + name -> rdfs_dev_attr */
	RDFS_DEV_MKNOD,		/* as CREATE, also for fifos/sockets/devices */
	RDFS_DEV_MKDIR,		/* ino = parent; rdfs_dev_mknod + name -> rdfs_dev_attr */
	RDFS_DEV_UNLINK,	/* ino = parent; name */
	RDFS_DEV_RMDIR,		/* ino = parent; name */
	RDFS_DEV_RENAME,	/* ino = parent; rdfs_dev_rename + name + newname */
	RDFS_DEV_LINK,		/* ino = target; rdfs_dev_rename(newparent) + newname -> rdfs_dev_attr */
	RDFS_DEV_SYMLINK,	/* ino = parent; name + target -> rdfs_dev_attr */
	RDFS_DEV_READLINK,	/* ino -> target (string) */
	RDFS_DEV_OPENDIR,	/* ino -> rdfs_dev_open_reply */
	RDFS_DEV_READDIR,	/* handle; rdfs_dev_readdir -> rdfs_dev_dirent... */
	RDFS_DEV_RELEASEDIR,	/* handle */
	RDFS_DEV_STATFS,	/* -> rdfs_dev_statfs */
	RDFS_DEV_OPEN,		/* ino; rdfs_dev_open -> rdfs_dev_open_reply */
	RDFS_DEV_RELEASE,	/* handle */
	RDFS_DEV_LAYOUT,	/* handle; rdfs_dev_layout_req -> rdfs_dev_layout_reply */
	RDFS_DEV_CONNECT,	/* rdfs_dev_connect -> reply.fd: an authenticated TCP socket */
	RDFS_DEV_COMMIT,	/* handle; rdfs_dev_commit: blocks written, new size */
	RDFS_DEV_FSYNC,		/* handle; commit + make the I/O servers' data durable */
	RDFS_DEV_GETXATTR,	/* ino; rdfs_dev_xattr + name -> value (size 0: needed size in reply.val) */
	RDFS_DEV_SETXATTR,	/* ino; rdfs_dev_xattr + name + value */
	RDFS_DEV_LISTXATTR,	/* ino; rdfs_dev_xattr -> names (NUL-separated) */
	RDFS_DEV_REMOVEXATTR,	/* ino; name */
	RDFS_DEV_FALLOCATE,	/* handle; rdfs_dev_fallocate -> rdfs_dev_attr */
	RDFS_DEV_SEEK,		/* handle; rdfs_dev_seek -> reply.val: SEEK_DATA/SEEK_HOLE's answer */
	RDFS_DEV_COPY_RANGE,	/* handle = source; rdfs_dev_copy -> reply.val copied, rdfs_dev_attr of dst */
	RDFS_DEV_COPY_LOST,	/* handle; rdfs_dev_copy_lost: a copy missed a write the others took */
	RDFS_DEV_CREATE_OPEN,	/* ino = parent; rdfs_dev_mknod (flags: open's) + name -> rdfs_dev_open_reply */
	RDFS_DEV_IO_COMMIT,	/* ino; rdfs_dev_io_commit -> rdfs_dev_io_commit_result[nservers] */
	RDFS_DEV_OP_MAX
};

/* Module -> helper. */
struct rdfs_dev_req {
	__u32 len;		/* header + payload */
	__u16 version;		/* RDFS_DEV_ABI_VERSION */
	__u16 op;		/* enum rdfs_dev_op */
	__u64 id;		/* echoed in the reply */
	__u64 ino;
	__u64 handle;		/* helper's open-file handle, 0 if none */
	__u32 uid;		/* caller's fsuid/fsgid: the metaserver checks them */
	__u32 gid;
	__u32 ngroups;		/* groups[0..ngroups): the caller's supplementary groups */
	__u32 pad;
	__u32 groups[RDFS_DEV_MAX_GROUPS];
};

/* Helper -> module. */
struct rdfs_dev_reply {
	__u32 len;		/* header + payload */
	__s32 error;		/* 0 or -errno */
	__u64 id;
	__s32 fd;		/* CONNECT: the socket, in the helper; else -1 */
	__u32 pad;
	__u64 val;		/* op-specific scalar (GETXATTR/LISTXATTR: size) */
};

struct rdfs_dev_attr {
	__u64 ino;
	__u64 size;
	__u64 blocks;		/* 512-byte units */
	__s64 atime_ns;
	__s64 mtime_ns;
	__s64 ctime_ns;
	__u32 mode;
	__u32 nlink;
	__u32 uid;
	__u32 gid;
	__u32 rdev;
	__u32 blksize;
};

struct rdfs_dev_init_reply {
	__u32 version;		/* helper's RDFS_DEV_ABI_VERSION */
	__u32 block_size;
	struct rdfs_dev_attr root;
};

struct rdfs_dev_setattr {
	__u32 valid;		/* RDFS_SET_* of lib/client/rdfs_client.h */
	__u32 mode;
	__u32 uid;
	__u32 gid;
	__u64 size;
	__s64 atime_ns;
	__s64 mtime_ns;
};

struct rdfs_dev_mknod {
	__u32 mode;
	__u32 rdev;
	__u32 flags;		/* CREATE: open(2) flags (O_EXCL honoured) */
	__u32 umask;		/* with ACLs (SB_POSIXACL): the caller's, mode unmasked */
};

struct rdfs_dev_rename {
	__u64 newparent;
	__u32 flags;		/* RENAME_NOREPLACE, RENAME_EXCHANGE */
	__u32 pad;
};

struct rdfs_dev_open {
	__u32 flags;		/* open(2) flags */
	__u32 pad;
};

struct rdfs_dev_open_reply {
	__u64 handle;
	struct rdfs_dev_attr attr;
};

/* rdfs_dev_readdir.flags: entries with their attributes, where the helper has them */
#define RDFS_DEV_READDIR_PLUS	1u

struct rdfs_dev_readdir {
	__u64 index;		/* first entry wanted (0 = the first after . and ..) */
	__u32 flags;		/* RDFS_DEV_READDIR_* */
	__u32 pad;
};

/* rdfs_dev_dirent.flags: a struct rdfs_dev_attr follows the name (RDFS_DEV_DIRENT_ATTR_OFF) */
#define RDFS_DEV_DIRENT_ATTR	1u

/*
 * Entries follow each other, each padded to 8 bytes; reply.val = 1 at the end.
 * The helper may send attributes without being asked (the page it holds has
 * them) and may leave them out when asked (an entry removed meanwhile).
 */
struct rdfs_dev_dirent {
	__u64 ino;
	__u16 reclen;		/* this entry, name, attributes and padding included */
	__u16 namelen;		/* without the NUL */
	__u16 type;		/* DT_* */
	__u16 flags;		/* RDFS_DEV_DIRENT_* */
	char name[];
};

/* Where an entry's attributes start: after its name and NUL, 8-aligned. */
#define RDFS_DEV_DIRENT_ATTR_OFF(namelen) \
	((sizeof(struct rdfs_dev_dirent) + (namelen) + 1 + 7) & ~(__u64)7)

struct rdfs_dev_statfs {
	__u64 blocks;
	__u64 bfree;
	__u64 files;
	__u64 ffree;
	__u32 bsize;
	__u32 namelen;
};

/*
 * RDFS_DEV_LAYOUT_REFRESH: an I/O server refused a capability of this file as
 * fenced (-ESTALE): the helper forgets what it has cached of the file's layout
 * and asks the metaserver again.
 */
#define RDFS_DEV_LAYOUT_REFRESH	1u
/*
 * RDFS_DEV_LAYOUT_FAILED: the last try of a read failed on I/O server
 * @failed_server (dead, unreachable, an I/O error): the helper passes that
 * server over for a while wherever another copy holds the blocks.
 */
#define RDFS_DEV_LAYOUT_FAILED	2u

struct rdfs_dev_layout_req {
	__u64 offset;		/* bytes, block-aligned */
	__u64 length;
	__u32 allocate;		/* allocate holes (writes) */
	__u32 flags;		/* RDFS_DEV_LAYOUT_* */
	__u32 failed_server;	/* with RDFS_DEV_LAYOUT_FAILED */
	__u32 pad;
};

#define RDFS_DEV_SEG_HOLE	1u
#define RDFS_DEV_SEG_UNWRITTEN	2u
/*
 * RDFS_DEV_SEG_COPY: another copy of the segment before it (same offset and
 * length, another server). Only write layouts (allocate) list every copy: a
 * write goes to each, and is done when every copy took it or the copies that
 * did not were reported with RDFS_DEV_COPY_LOST. Read layouts name one copy,
 * the one the helper picked.
 */
#define RDFS_DEV_SEG_COPY	4u

/*
 * One run of the file: bytes [offset, offset + length) are at volume block
 * @block of server @server_id, or a hole. The capability is the protobuf
 * encoding of rdfs.proto's Capability, at @cap_off in the reply payload (after
 * the segment array), sent to the I/O server verbatim as IoReq.cap.
 */
struct rdfs_dev_seg {
	__u64 offset;
	__u64 length;
	__u64 block;
	__u32 server_id;
	__u32 flags;		/* RDFS_DEV_SEG_* */
	__u32 cap_off;
	__u32 cap_len;
};

struct rdfs_dev_layout_reply {
	__u64 size;		/* the file's size as the helper knows it */
	__u32 nsegs;
	__u32 ttl_ms;		/* the module may reuse it this long (capabilities' lifetime) */
	struct rdfs_dev_seg segs[];
};

struct rdfs_dev_connect {
	__u32 server_id;
	__u32 pad;
};

struct rdfs_dev_commit {
	__u64 first_block;	/* file blocks [first_block, end_block) were written */
	__u64 end_block;
	__u64 size;		/* the file's size now */
	__s64 mtime_ns;
};

/* The module has written back and committed the file before each of these. */
struct rdfs_dev_fallocate {
	__u32 mode;		/* fallocate(2) mode */
	__u32 pad;
	__u64 offset;
	__u64 length;
};

struct rdfs_dev_seek {
	__u64 offset;
	__u32 whence;		/* SEEK_DATA or SEEK_HOLE */
	__u32 pad;
};

struct rdfs_dev_copy {
	__u64 dst_handle;	/* a writable open of the destination */
	__u64 off_in;
	__u64 off_out;
	__u64 length;
};

/*
 * A write of bytes [offset, offset + length) reached other copies but failed
 * on server @server_id's: the helper has the metaserver mark that copy of the
 * blocks stale (never served again; the rebuilder makes a new one). An error
 * (EIO: it was the last current copy) means the write failed.
 */
struct rdfs_dev_copy_lost {
	__u64 offset;
	__u64 length;
	__u32 server_id;
	__u32 pad;
};

/*
 * IO_COMMIT on each I/O server named (the module's unstable WRITEs to them
 * made durable); each result says how it went and the verifier the server
 * answered with: one unlike the WRITEs' says it restarted since, and the
 * module sends those writes again.
 */
struct rdfs_dev_io_commit {
	__u32 nservers;
	__u32 pad;
	__u32 server_id[];	/* nservers of them */
};

struct rdfs_dev_io_commit_result {
	__s32 error;		/* 0 or -errno (then verifier is 0) */
	__u32 pad;
	__u64 verifier;
};

struct rdfs_dev_xattr {
	__u32 size;		/* GET/LIST: buffer size (0: ask the size); SET: value length */
	__u32 flags;		/* SET: XATTR_CREATE, XATTR_REPLACE */
};

/*
 * RDFS_DEV_CONNECT to an I/O server that advertises rdma:// (a transport=rdma
 * mount): reply.fd is then not a TCP socket but the module's end of an AF_UNIX
 * SOCK_SEQPACKET pair whose other end one helper thread holds for this one
 * connection, the authenticator. The module sets up the rdma_cm connection and
 * runs the rpc handshake on its own queue pair; it asks the authenticator only
 * for the proofs, so the cluster secret never enters the kernel and each
 * authenticator answers exactly one challenge:
 *   helper -> module  struct rdfs_dev_rdma_peer: the address to connect to
 *   module -> helper  struct rdfs_dev_rdma_challenge: the server's nonce
 *   helper -> module  struct rdfs_dev_rdma_proof; then the helper closes its end
 * A helper older than this hands over no authenticator (the CONNECT fails), so
 * this needs no new ABI version: TCP mounts work with either.
 */
#define RDFS_DEV_RDMA_MAGIC	0x41524452u	/* "RDRA" */
#define RDFS_DEV_NONCE_LEN	32
#define RDFS_DEV_MAC_LEN	32

struct rdfs_dev_rdma_peer {
	__u32 magic;
	__u32 addr_len;		/* bytes of addr: a struct sockaddr_in or sockaddr_in6 */
	__u8 addr[128];
};

struct rdfs_dev_rdma_challenge {
	__u32 magic;
	__u32 pad;
	__u8 server_nonce[RDFS_DEV_NONCE_LEN];
};

struct rdfs_dev_rdma_proof {
	__u32 magic;
	__s32 error;		/* 0, or -errno: no proof (the other fields are zero) */
	__u8 client_nonce[RDFS_DEV_NONCE_LEN];
	__u8 client_mac[RDFS_DEV_MAC_LEN];	/* AuthResponse.mac */
	__u8 server_mac[RDFS_DEV_MAC_LEN];	/* what AuthResult.mac must be */
	char role[64];		/* AuthResponse.role (the claim), NUL-terminated */
};

#endif
