// SPDX-License-Identifier: GPL-2.0
/*
 * super.c - the rdfs file system type: mount options, the superblock and the
 * module's entry points.
 *
 * mount -t rdfs HOST:PORT /mnt -o fd=N,... where N is the helper's open
 * /dev/rdfs (mount.rdfs starts the helper, which mounts).
 */
#include <linux/backing-dev.h>
#include <linux/fs_context.h>
#include <linux/fs_parser.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/statfs.h>
#include <linux/workqueue.h>

#include "rdfs.h"

static struct kmem_cache *rdfs_inode_cachep;

static bool selftest;
module_param(selftest, bool, 0444);
MODULE_PARM_DESC(selftest, "check the I/O-server codec against the built-in vectors at load");

struct rdfs_stats rdfs_stats;

static int rdfs_stats_get(char *buf, const struct kernel_param *kp)
{
	struct rdfs_stats *s = &rdfs_stats;

	return sysfs_emit(buf, "copy_read_bytes %lld\ncopy_write_bytes %lld\n"
			  "rdma_read_bytes %lld\nrdma_write_bytes %lld\nmr_reg %lld\n"
			  "mr_inv %lld\nrdma_conns %lld\nrdma_reqs %lld\nread_failovers %lld\n"
			  "copies_lost %lld\nio_commits %lld\nunstable_resends %lld\n"
			  "write_behind_bytes %lld\ntcp_conns %lld\ntcp_reqs %lld\n"
			  "tcp_pipelined %lld\nlayout_calls %lld\nlayout_hits %lld\n"
			  "lookups %lld\nreaddir_plus_entries %lld\ndirect_bounced_bytes %lld\n",
			  atomic64_read(&s->copy_read_bytes), atomic64_read(&s->copy_write_bytes),
			  atomic64_read(&s->rdma_read_bytes), atomic64_read(&s->rdma_write_bytes),
			  atomic64_read(&s->mr_reg), atomic64_read(&s->mr_inv),
			  atomic64_read(&s->rdma_conns), atomic64_read(&s->rdma_reqs),
			  atomic64_read(&s->read_failovers), atomic64_read(&s->copies_lost),
			  atomic64_read(&s->io_commits), atomic64_read(&s->unstable_resends),
			  atomic64_read(&s->write_behind_bytes), atomic64_read(&s->tcp_conns),
			  atomic64_read(&s->tcp_reqs), atomic64_read(&s->tcp_pipelined),
			  atomic64_read(&s->layout_calls), atomic64_read(&s->layout_hits),
			  atomic64_read(&s->lookups), atomic64_read(&s->readdir_plus_entries),
			  atomic64_read(&s->direct_bounced_bytes));
}

static const struct kernel_param_ops rdfs_stats_ops = { .get = rdfs_stats_get };
module_param_cb(stats, &rdfs_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats,
		 "counters of the data path (read-only): bytes copied by the CPU, bytes moved by RDMA, per-request registrations and invalidations, RDMA connections and requests alive, reads failed over to another copy, copies a write missed, IO_COMMITs of unstable writes, runs of them sent again, bytes write-behind started, TCP connections and requests alive, TCP requests sent while another was in flight on their connection, layouts asked of the helper and reused, names looked up through the helper, names listings brought with attributes, O_DIRECT bytes copied through bounce pages (unaligned requests)");

struct rdfs_mount_opts {
	int fd;
	unsigned int attr_timeout;	/* seconds */
	unsigned int entry_timeout;
	unsigned int readahead_kb;
	bool transport_rdma;
	bool rdma_read;			/* rdma_mode=read (figure 3); default write (figure 2) */
	bool direct_io;
	bool noacl;
};

enum { OPT_FD, OPT_ATTR_TIMEOUT, OPT_ENTRY_TIMEOUT, OPT_READAHEAD, OPT_TRANSPORT,
	OPT_RDMA_MODE, OPT_DIRECT_IO, OPT_NOACL };

static const struct constant_table rdfs_transports[] = {
	{ "tcp", 0 },
	{ "rdma", 1 },
	{}
};

static const struct constant_table rdfs_rdma_modes[] = {
	{ "write", 0 },
	{ "read", 1 },
	{}
};

static const struct fs_parameter_spec rdfs_fs_params[] = {
	fsparam_s32("fd", OPT_FD),
	fsparam_u32("attr_timeout", OPT_ATTR_TIMEOUT),
	fsparam_u32("entry_timeout", OPT_ENTRY_TIMEOUT),
	fsparam_string("readahead", OPT_READAHEAD),
	fsparam_enum("transport", OPT_TRANSPORT, rdfs_transports),
	fsparam_enum("rdma_mode", OPT_RDMA_MODE, rdfs_rdma_modes),
	fsparam_flag("direct_io", OPT_DIRECT_IO),
	fsparam_flag("noacl", OPT_NOACL),
	{}
};

static int rdfs_parse_param(struct fs_context *fc, struct fs_parameter *param)
{
	struct rdfs_mount_opts *o = fc->fs_private;
	struct fs_parse_result res;
	unsigned long long v;
	char *end;
	int opt;

	opt = fs_parse(fc, rdfs_fs_params, param, &res);
	if (opt < 0)
		return opt;
	switch (opt) {
	case OPT_FD:
		o->fd = res.int_32;
		break;
	case OPT_ATTR_TIMEOUT:
		o->attr_timeout = res.uint_32;
		break;
	case OPT_ENTRY_TIMEOUT:
		o->entry_timeout = res.uint_32;
		break;
	case OPT_READAHEAD:
		v = memparse(param->string, &end);
		if (*end)
			return invalfc(fc, "bad readahead size %s", param->string);
		o->readahead_kb = v >> 10;
		break;
	case OPT_TRANSPORT:
		o->transport_rdma = res.uint_32;
		break;
	case OPT_DIRECT_IO:
		o->direct_io = true;
		break;
	case OPT_RDMA_MODE:
		o->rdma_read = res.uint_32;
		break;
	case OPT_NOACL:
		o->noacl = true;
		break;
	}
	return 0;
}

static struct inode *rdfs_alloc_inode(struct super_block *sb)
{
	struct rdfs_inode_info *ri = alloc_inode_sb(sb, rdfs_inode_cachep, GFP_KERNEL);

	if (!ri)
		return NULL;
	ri->attr_time = 0;
	spin_lock_init(&ri->lock);
	INIT_LIST_HEAD(&ri->wr_files);
	ri->dirty_first = U64_MAX;
	ri->dirty_end = 0;
	ri->unstable = NULL;
	mutex_init(&ri->commit_lock);
	atomic_set(&ri->wb_inflight, 0);
	init_waitqueue_head(&ri->wb_wait);
	ri->layout_read = NULL;
	ri->layout_write = NULL;
	ri->layout_write_next = 0;
	ri->layout_gen = 0;
	ri->flags = 0;
	return &ri->vfs_inode;
}

static void rdfs_free_inode(struct inode *inode)
{
	kmem_cache_free(rdfs_inode_cachep, RDFS_I(inode));
}

static void rdfs_evict_inode(struct inode *inode)
{
	truncate_inode_pages_final(&inode->i_data);
	rdfs_unstable_free(inode);
	rdfs_layout_forget(inode);
	clear_inode(inode);
}

static int rdfs_statfs(struct dentry *dentry, struct kstatfs *buf)
{
	struct rdfs_sb_info *sbi = RDFS_SB(dentry->d_sb);
	struct rdfs_dev_statfs st;
	struct rdfs_dev_call c;
	int err;

	rdfs_call_init(&c, RDFS_DEV_STATFS, 0, 0);
	c.out = &st;
	c.out_size = sizeof(st);
	err = rdfs_call(sbi->chan, &c);
	if (err)
		return err;
	if (c.out_len < sizeof(st))
		return -EIO;
	buf->f_type = dentry->d_sb->s_magic;
	buf->f_bsize = st.bsize;
	buf->f_frsize = st.bsize;
	buf->f_blocks = st.blocks;
	buf->f_bfree = st.bfree;
	buf->f_bavail = st.bfree;
	buf->f_files = st.files;
	buf->f_ffree = st.ffree;
	buf->f_namelen = st.namelen;
	return 0;
}

static int rdfs_show_options(struct seq_file *m, struct dentry *root)
{
	struct rdfs_sb_info *sbi = RDFS_SB(root->d_sb);

	seq_printf(m, ",transport=%s,attr_timeout=%u,entry_timeout=%u,readahead=%uk",
		   sbi->rdma ? "rdma" : "tcp", sbi->attr_timeout / HZ, sbi->entry_timeout / HZ,
		   sbi->readahead_kb);
	if (sbi->rdma)
		seq_printf(m, ",rdma_mode=%s", sbi->rdma_read ? "read" : "write");
	if (sbi->direct_io)
		seq_puts(m, ",direct_io");
	if (!(root->d_sb->s_flags & SB_POSIXACL))
		seq_puts(m, ",noacl");
	return 0;
}

static int rdfs_sync_fs(struct super_block *sb, int wait)
{
	/* the first call comes before writeback has waited: the second commits */
	return wait ? rdfs_unstable_sync_sb(sb) : 0;
}

static const struct super_operations rdfs_super_ops = {
	.alloc_inode	= rdfs_alloc_inode,
	.free_inode	= rdfs_free_inode,
	.evict_inode	= rdfs_evict_inode,
	.statfs		= rdfs_statfs,
	.sync_fs	= rdfs_sync_fs,
	.show_options	= rdfs_show_options,
};

#define RDFS_SUPER_MAGIC	0x53464452	/* "RDFS" */

static int rdfs_fill_super(struct super_block *sb, struct fs_context *fc)
{
	struct rdfs_mount_opts *o = fc->fs_private;
	struct rdfs_sb_info *sbi;
	struct rdfs_dev_init_reply init;
	struct rdfs_dev_call c;
	struct inode *root;
	int err, i;

	if (o->fd < 0)
		return invalfc(fc, "no fd=N option: mount with mount.rdfs");
	sbi = kzalloc(sizeof(*sbi), GFP_KERNEL);
	if (!sbi)
		return -ENOMEM;
	sb->s_fs_info = sbi;
	for (i = 0; i < RDFS_MAX_SERVERS; i++)
		mutex_init(&sbi->conns[i].lock);
	strscpy(sbi->source, fc->source ? fc->source : "", sizeof(sbi->source));
	sbi->attr_timeout = o->attr_timeout * HZ;
	sbi->entry_timeout = o->entry_timeout * HZ;
	sbi->readahead_kb = o->readahead_kb;
	sbi->direct_io = o->direct_io;
	if (o->transport_rdma) {
		err = rdfs_rdma_init(sbi, o->rdma_read);
		if (err)
			return invalfc(fc, "transport=rdma: %d", err);
		sbi->rdma_read = o->rdma_read;
	}
	sbi->chan = rdfs_chan_from_fd(o->fd);
	if (IS_ERR(sbi->chan)) {
		err = PTR_ERR(sbi->chan);
		sbi->chan = NULL;
		return invalfc(fc, "fd=%d is not a free /dev/rdfs: %d", o->fd, err);
	}

	rdfs_call_init(&c, RDFS_DEV_INIT, 0, 0);
	c.out = &init;
	c.out_size = sizeof(init);
	err = rdfs_call(sbi->chan, &c);
	if (err)
		return err;
	if (c.out_len < sizeof(init) || init.version != RDFS_DEV_ABI_VERSION)
		return invalfc(fc, "helper speaks ABI %u, module %u", init.version,
			       RDFS_DEV_ABI_VERSION);

	sb->s_magic = RDFS_SUPER_MAGIC;
	sb->s_op = &rdfs_super_ops;
	sb->s_d_op = &rdfs_dentry_ops;
	sb->s_xattr = rdfs_xattr_handlers;
	sb->s_blocksize = PAGE_SIZE;
	sb->s_blocksize_bits = PAGE_SHIFT;
	sb->s_maxbytes = MAX_LFS_FILESIZE;
	sb->s_time_gran = 1;
	sb->s_flags |= SB_NOATIME;
	/*
	 * POSIX ACLs (acl.c): generic_permission() checks them, the VFS leaves
	 * the umask to us (the metaserver applies it unless a default ACL
	 * replaces it) and the posix_acl xattr handlers answer. noacl: none of it.
	 */
	if (IS_ENABLED(CONFIG_FS_POSIX_ACL) && !o->noacl)
		sb->s_flags |= SB_POSIXACL;
	err = super_setup_bdi(sb);
	if (err)
		return err;
	if (sbi->readahead_kb)
		sb->s_bdi->ra_pages = sbi->readahead_kb >> (PAGE_SHIFT - 10);

	root = rdfs_iget(sb, &init.root);
	if (IS_ERR(root))
		return PTR_ERR(root);
	sb->s_root = d_make_root(root);
	if (!sb->s_root)
		return -ENOMEM;
	return 0;
}

static int rdfs_get_tree(struct fs_context *fc)
{
	return get_tree_nodev(fc, rdfs_fill_super);
}

static void rdfs_free_fc(struct fs_context *fc)
{
	kfree(fc->fs_private);
}

static const struct fs_context_operations rdfs_context_ops = {
	.free		= rdfs_free_fc,
	.parse_param	= rdfs_parse_param,
	.get_tree	= rdfs_get_tree,
};

static int rdfs_init_fs_context(struct fs_context *fc)
{
	struct rdfs_mount_opts *o = kzalloc(sizeof(*o), GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	o->fd = -1;
	o->attr_timeout = 1;
	o->entry_timeout = 1;
	o->readahead_kb = 4096;
	fc->fs_private = o;
	fc->ops = &rdfs_context_ops;
	return 0;
}

static void rdfs_kill_sb(struct super_block *sb)
{
	struct rdfs_sb_info *sbi = RDFS_SB(sb);

	/* read-ahead runs hold inodes: done before the inodes go */
	flush_workqueue(rdfs_ra_wq);
	kill_anon_super(sb);
	if (!sbi)
		return;
	rdfs_conns_close(sbi);
	rdfs_rdma_exit(sbi);
	if (sbi->chan) {
		rdfs_chan_unmount(sbi->chan);
		rdfs_chan_put(sbi->chan);
	}
	kfree(sbi);
}

static struct file_system_type rdfs_fs_type = {
	.owner			= THIS_MODULE,
	.name			= "rdfs",
	.init_fs_context	= rdfs_init_fs_context,
	.parameters		= rdfs_fs_params,
	.kill_sb		= rdfs_kill_sb,
};
MODULE_ALIAS_FS("rdfs");

static void rdfs_inode_init_once(void *p)
{
	struct rdfs_inode_info *ri = p;

	inode_init_once(&ri->vfs_inode);
}

static int __init rdfs_init(void)
{
	int err;

	if (selftest) {
		err = rdfs_codec_selftest();
		if (err)
			return err;
	}
	rdfs_inode_cachep = kmem_cache_create("rdfs_inode_cache",
					      sizeof(struct rdfs_inode_info), 0,
					      SLAB_RECLAIM_ACCOUNT | SLAB_ACCOUNT,
					      rdfs_inode_init_once);
	if (!rdfs_inode_cachep)
		return -ENOMEM;
	rdfs_ra_wq = alloc_workqueue("rdfs_readahead", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!rdfs_ra_wq) {
		err = -ENOMEM;
		goto out_cache;
	}
	rdfs_wb_wq = alloc_workqueue("rdfs_writeback", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!rdfs_wb_wq) {
		err = -ENOMEM;
		goto out_ra_wq;
	}
	err = rdfs_dev_init();
	if (err)
		goto out_wq;
	err = register_filesystem(&rdfs_fs_type);
	if (err)
		goto out_dev;
	return 0;
out_dev:
	rdfs_dev_exit();
out_wq:
	destroy_workqueue(rdfs_wb_wq);
out_ra_wq:
	destroy_workqueue(rdfs_ra_wq);
out_cache:
	kmem_cache_destroy(rdfs_inode_cachep);
	return err;
}

static void __exit rdfs_exit(void)
{
	unregister_filesystem(&rdfs_fs_type);
	rdfs_dev_exit();
	destroy_workqueue(rdfs_wb_wq);
	destroy_workqueue(rdfs_ra_wq);
	rcu_barrier();	/* free_inode runs after an RCU grace period */
	kmem_cache_destroy(rdfs_inode_cachep);
}

module_init(rdfs_init);
module_exit(rdfs_exit);
MODULE_DESCRIPTION("rdfs kernel client");
MODULE_LICENSE("GPL");
