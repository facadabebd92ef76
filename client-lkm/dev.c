// SPDX-License-Identifier: GPL-2.0
/*
 * dev.c - /dev/rdfs, the channel to the user-space helper that does the
 * namespace operations, layouts and authentication (rdfs_dev_abi.h).
 *
 * A request lives on its caller's stack and is linked on the channel's lists
 * only while the caller waits, always under chan->lock, so a reply that comes
 * after the caller gave up finds nothing and is dropped.
 *
 * The module's object counters live here too (/sys/module/rdfs/parameters/
 * objects): with no mount left every one is zero, and module exit says which
 * are not, so a test can check for leaks before and at rmmod.
 */
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "rdfs.h"

/* A helper that does not answer within this fails the request (no hung task). */
#define RDFS_CALL_TIMEOUT	(60 * HZ)

static const struct file_operations rdfs_dev_fops;

static atomic_long_t rdfs_objs[RDFS_OBJ_NR];

static const char *const rdfs_obj_names[RDFS_OBJ_NR] = {
	[RDFS_OBJ_CHAN]		= "chans",
	[RDFS_OBJ_CALL]		= "calls",
	[RDFS_OBJ_MOUNT]	= "mounts",
	[RDFS_OBJ_HANDLE]	= "handles",
};

static void rdfs_obj_get(enum rdfs_obj kind)
{
	atomic_long_inc(&rdfs_objs[kind]);
}

static void rdfs_obj_put(enum rdfs_obj kind)
{
	WARN_ON_ONCE(atomic_long_dec_return(&rdfs_objs[kind]) < 0);
}

static int rdfs_objs_show(char *buf, const struct kernel_param *kp)
{
	int i, n = 0;

	for (i = 0; i < RDFS_OBJ_NR; i++)
		n += sysfs_emit_at(buf, n, "%s%s=%ld", i ? " " : "", rdfs_obj_names[i],
				   atomic_long_read(&rdfs_objs[i]));
	return n + sysfs_emit_at(buf, n, "\n");
}

static const struct kernel_param_ops rdfs_objs_ops = {
	.get	= rdfs_objs_show,
};
module_param_cb(objects, &rdfs_objs_ops, NULL, 0444);
MODULE_PARM_DESC(objects, "objects the module holds now, by kind (all 0 with no mount)");

static void rdfs_chan_release(struct kref *ref)
{
	kfree(container_of(ref, struct rdfs_chan, ref));
	rdfs_obj_put(RDFS_OBJ_CHAN);
}

void rdfs_chan_put(struct rdfs_chan *ch)
{
	kref_put(&ch->ref, rdfs_chan_release);
}

struct rdfs_chan *rdfs_chan_from_fd(int fd)
{
	struct rdfs_chan *ch = ERR_PTR(-EBADF);
	struct file *f = fget(fd);

	if (!f)
		return ch;
	if (f->f_op != &rdfs_dev_fops) {
		ch = ERR_PTR(-EINVAL);
		goto out;
	}
	ch = f->private_data;
	mutex_lock(&ch->lock);
	if (ch->mounted || ch->dead) {
		mutex_unlock(&ch->lock);
		ch = ERR_PTR(-EBUSY);
		goto out;
	}
	ch->mounted = true;
	mutex_unlock(&ch->lock);
	kref_get(&ch->ref);
	rdfs_obj_get(RDFS_OBJ_MOUNT);
out:
	fput(f);
	return ch;
}

/* Fail every request with @err; under ch->lock. */
static void rdfs_chan_fail_all(struct rdfs_chan *ch, int err)
{
	struct rdfs_dev_call *c, *tmp;

	list_for_each_entry_safe(c, tmp, &ch->pending, link) {
		list_del_init(&c->link);
		c->error = err;
		c->done = true;
		wake_up(&c->wait);
	}
	list_for_each_entry_safe(c, tmp, &ch->sent, link) {
		list_del_init(&c->link);
		c->error = err;
		c->done = true;
		wake_up(&c->wait);
	}
}

void rdfs_chan_unmount(struct rdfs_chan *ch)
{
	rdfs_obj_put(RDFS_OBJ_MOUNT);
	mutex_lock(&ch->lock);
	ch->unmounted = true;
	rdfs_chan_fail_all(ch, -EIO);
	mutex_unlock(&ch->lock);
	wake_up_all(&ch->helper_wait);
}

void rdfs_call_init(struct rdfs_dev_call *c, u16 op, u64 ino, u64 handle)
{
	memset(c, 0, sizeof(*c));
	INIT_LIST_HEAD(&c->link);
	init_waitqueue_head(&c->wait);
	c->req.version = RDFS_DEV_ABI_VERSION;
	c->req.op = op;
	c->req.ino = ino;
	c->req.handle = handle;
	rdfs_call_cred(c, current_cred());
}

/*
 * The credentials the helper hands to the metaserver, which checks them: fsuid,
 * fsgid and the supplementary groups (the first RDFS_DEV_MAX_GROUPS: fewer can
 * only deny access the kernel's own check granted, never grant more).
 */
void rdfs_call_cred(struct rdfs_dev_call *c, const struct cred *cred)
{
	const struct group_info *gi = cred->group_info;
	int i, n = min_t(int, gi->ngroups, RDFS_DEV_MAX_GROUPS);

	c->req.uid = from_kuid(&init_user_ns, cred->fsuid);
	c->req.gid = from_kgid(&init_user_ns, cred->fsgid);
	for (i = 0; i < n; i++)
		c->req.groups[i] = from_kgid(&init_user_ns, gi->gid[i]);
	c->req.ngroups = n;
}

void rdfs_call_arg(struct rdfs_dev_call *c, const void *p, size_t len)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(c->args); i++) {
		if (!c->args[i]) {
			c->args[i] = p;
			c->arg_len[i] = len;
			return;
		}
	}
	WARN_ON_ONCE(1);
}

int rdfs_call(struct rdfs_chan *ch, struct rdfs_dev_call *c)
{
	size_t len = sizeof(c->req);
	long left;
	int i;

	/* a release is the module letting go of the handle, whatever the helper says */
	if (c->req.op == RDFS_DEV_RELEASE || c->req.op == RDFS_DEV_RELEASEDIR)
		rdfs_obj_put(RDFS_OBJ_HANDLE);
	for (i = 0; i < ARRAY_SIZE(c->args); i++)
		len += c->arg_len[i];
	if (len > RDFS_DEV_MAX_MSG)
		return -ENAMETOOLONG;
	c->req.len = len;

	mutex_lock(&ch->lock);
	if (ch->dead || ch->unmounted) {
		mutex_unlock(&ch->lock);
		return -EIO;
	}
	c->req.id = ++ch->next_id;
	list_add_tail(&c->link, &ch->pending);
	mutex_unlock(&ch->lock);
	rdfs_obj_get(RDFS_OBJ_CALL);
	wake_up(&ch->helper_wait);

	left = wait_event_killable_timeout(c->wait, READ_ONCE(c->done), RDFS_CALL_TIMEOUT);
	mutex_lock(&ch->lock);
	if (!c->done) {
		list_del_init(&c->link);
		c->error = left < 0 ? -EINTR : -EIO;
		c->done = true;
	}
	mutex_unlock(&ch->lock);
	if (c->error && c->sock) {
		sockfd_put(c->sock);
		c->sock = NULL;
	}
	rdfs_obj_put(RDFS_OBJ_CALL);
	if (!c->error && (c->req.op == RDFS_DEV_OPEN || c->req.op == RDFS_DEV_OPENDIR ||
			  c->req.op == RDFS_DEV_CREATE_OPEN))
		rdfs_obj_get(RDFS_OBJ_HANDLE);
	return c->error;
}

static int rdfs_dev_open(struct inode *inode, struct file *file)
{
	struct rdfs_chan *ch = kzalloc(sizeof(*ch), GFP_KERNEL);

	if (!ch)
		return -ENOMEM;
	kref_init(&ch->ref);
	mutex_init(&ch->lock);
	init_waitqueue_head(&ch->helper_wait);
	INIT_LIST_HEAD(&ch->pending);
	INIT_LIST_HEAD(&ch->sent);
	file->private_data = ch;
	rdfs_obj_get(RDFS_OBJ_CHAN);
	return 0;
}

static int rdfs_dev_release(struct inode *inode, struct file *file)
{
	struct rdfs_chan *ch = file->private_data;

	mutex_lock(&ch->lock);
	ch->dead = true;
	rdfs_chan_fail_all(ch, -EIO);
	mutex_unlock(&ch->lock);
	rdfs_chan_put(ch);
	return 0;
}

static bool rdfs_dev_readable(struct rdfs_chan *ch)
{
	return !list_empty_careful(&ch->pending) || READ_ONCE(ch->unmounted);
}

static ssize_t rdfs_dev_read(struct file *file, char __user *buf, size_t size, loff_t *ppos)
{
	struct rdfs_chan *ch = file->private_data;
	struct rdfs_dev_call *c;
	char __user *p = buf;
	int i, err;

	if (size < RDFS_DEV_MAX_MSG)
		return -EINVAL;
	for (;;) {
		err = wait_event_interruptible(ch->helper_wait, rdfs_dev_readable(ch));
		if (err)
			return err;
		mutex_lock(&ch->lock);
		if (ch->unmounted) {
			mutex_unlock(&ch->lock);
			return 0;
		}
		if (!list_empty(&ch->pending))
			break;
		mutex_unlock(&ch->lock);
	}
	c = list_first_entry(&ch->pending, struct rdfs_dev_call, link);
	err = copy_to_user(p, &c->req, sizeof(c->req));
	p += sizeof(c->req);
	for (i = 0; i < ARRAY_SIZE(c->args) && !err; i++) {
		if (c->arg_len[i] && copy_to_user(p, c->args[i], c->arg_len[i]))
			err = -EFAULT;
		p += c->arg_len[i];
	}
	if (err) {
		list_del_init(&c->link);
		c->error = -EIO;
		c->done = true;
		wake_up(&c->wait);
		mutex_unlock(&ch->lock);
		return -EFAULT;
	}
	list_move_tail(&c->link, &ch->sent);
	mutex_unlock(&ch->lock);
	return p - buf;
}

static ssize_t rdfs_dev_write(struct file *file, const char __user *buf, size_t size,
			      loff_t *ppos)
{
	struct rdfs_chan *ch = file->private_data;
	struct rdfs_dev_reply rep;
	struct rdfs_dev_call *c;
	size_t plen;
	int err;

	if (size < sizeof(rep) || size > RDFS_DEV_MAX_MSG)
		return -EINVAL;
	if (copy_from_user(&rep, buf, sizeof(rep)))
		return -EFAULT;
	if (rep.len != size || rep.error > 0 || rep.error < -4095)
		return -EINVAL;
	plen = size - sizeof(rep);

	mutex_lock(&ch->lock);
	list_for_each_entry(c, &ch->sent, link)
		if (c->req.id == rep.id)
			goto found;
	mutex_unlock(&ch->lock);
	return size;	/* its caller gave up */
found:
	err = rep.error;
	if (!err && plen > c->out_size)
		err = -EOVERFLOW;
	if (!err && plen && copy_from_user(c->out, buf + sizeof(rep), plen))
		err = -EFAULT;
	if (!err && c->req.op == RDFS_DEV_CONNECT) {
		/* the helper's fd means something only now, in its context */
		c->sock = sockfd_lookup(rep.fd, &err);
		if (!c->sock)
			err = err ? err : -EBADF;
		else
			err = 0;
	}
	c->out_len = err ? 0 : plen;
	c->val = rep.val;
	c->error = err;
	list_del_init(&c->link);
	c->done = true;
	wake_up(&c->wait);
	mutex_unlock(&ch->lock);
	return size;
}

static __poll_t rdfs_dev_poll(struct file *file, poll_table *wait)
{
	struct rdfs_chan *ch = file->private_data;

	poll_wait(file, &ch->helper_wait, wait);
	return EPOLLOUT | EPOLLWRNORM |
	       (rdfs_dev_readable(ch) ? EPOLLIN | EPOLLRDNORM : 0);
}

static const struct file_operations rdfs_dev_fops = {
	.owner		= THIS_MODULE,
	.open		= rdfs_dev_open,
	.release	= rdfs_dev_release,
	.read		= rdfs_dev_read,
	.write		= rdfs_dev_write,
	.poll		= rdfs_dev_poll,
	.llseek		= noop_llseek,
};

static struct miscdevice rdfs_miscdev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= RDFS_DEV_NAME,
	.fops	= &rdfs_dev_fops,
	.mode	= 0600,
};

int rdfs_dev_init(void)
{
	return misc_register(&rdfs_miscdev);
}

/* Module exit: every mount is gone, so every object should be too. */
void rdfs_dev_exit(void)
{
	long n;
	int i;

	misc_deregister(&rdfs_miscdev);
	for (i = 0; i < RDFS_OBJ_NR; i++) {
		n = atomic_long_read(&rdfs_objs[i]);
		if (n)
			pr_err(RDFS_MSG(1500016) "%ld %s leaked at module exit\n",
			       n, rdfs_obj_names[i]);
	}
}
