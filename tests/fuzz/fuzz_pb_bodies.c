// SPDX-License-Identifier: MIT
/*
 * fuzz_pb_bodies.c - every protobuf body a server or client decodes from the
 * network, as the RPC layer takes it: pb_strings_check() (a string with a NUL
 * is refused before protobuf-c would cut it there) and then protobuf-c's
 * unpack and free. The oracle is ASan/UBSan (and pb_strings_check() answering
 * 0 or a negative errno). The first input byte picks the message type.
 */
#include <string.h>

#include "fuzz.h"
#include "pb_strings.h"
#include "rdfs.pb-c.h"

static const ProtobufCMessageDescriptor *const kinds[] = {
	&rdfs__auth_challenge__descriptor, &rdfs__auth_response__descriptor,
	&rdfs__auth_result__descriptor, &rdfs__error__descriptor,
	&rdfs__lookup_req__descriptor, &rdfs__getattr_req__descriptor,
	&rdfs__setattr_req__descriptor, &rdfs__mknod_req__descriptor,
	&rdfs__mkdir_req__descriptor, &rdfs__unlink_req__descriptor,
	&rdfs__rename_req__descriptor, &rdfs__link_req__descriptor,
	&rdfs__symlink_req__descriptor, &rdfs__readlink_req__descriptor,
	&rdfs__readdir_req__descriptor, &rdfs__statfs_req__descriptor,
	&rdfs__xattr_req__descriptor, &rdfs__open_req__descriptor,
	&rdfs__release_req__descriptor, &rdfs__layout_req__descriptor,
	&rdfs__commit_req__descriptor, &rdfs__punch_req__descriptor, &rdfs__stale_req__descriptor,
	&rdfs__drain_req__descriptor,
	&rdfs__register_req__descriptor, &rdfs__node_req__descriptor,
	&rdfs__fsck_req__descriptor, &rdfs__io_req__descriptor, &rdfs__fence_req__descriptor,
	&rdfs__copy_req__descriptor, &rdfs__capability__descriptor,
	/* replies a client decodes */
	&rdfs__attr_reply__descriptor, &rdfs__entry_reply__descriptor,
	&rdfs__readlink_reply__descriptor, &rdfs__readdir_reply__descriptor,
	&rdfs__statfs_reply__descriptor, &rdfs__xattr_reply__descriptor,
	&rdfs__open_reply__descriptor, &rdfs__layout_reply__descriptor,
	&rdfs__register_reply__descriptor, &rdfs__server_list_reply__descriptor,
	&rdfs__node_reply__descriptor, &rdfs__fsck_reply__descriptor,
	&rdfs__io_reply__descriptor, &rdfs__volume_info_reply__descriptor,
	/* last: a seed's first byte keeps meaning the message it was made for */
	&rdfs__rebalance_req__descriptor, &rdfs__dir_change_reply__descriptor,
	&rdfs__quota_req__descriptor, &rdfs__quota_set_req__descriptor,
	&rdfs__quota_list_req__descriptor, &rdfs__quota_reply__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m;
	int err;

	if (size < 1)
		return 0;
	d = kinds[data[0] % (sizeof(kinds) / sizeof(kinds[0]))];
	data++;
	size--;
	err = pb_strings_check(d, data, size);
	FUZZ_CHECK(err <= 0);
	m = protobuf_c_message_unpack(d, NULL, size, data);
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
