// SPDX-License-Identifier: GPL-2.0
/*
 * The harness's self-test module: proves that a module built on the host
 * against the guest kernel's headers loads and unloads in the guest.
 */
#include <linux/init.h>
#include <linux/module.h>

static int __init rdfs_vm_hello_init(void)
{
	pr_info("rdfs_vm_hello: loaded\n");
	return 0;
}

static void __exit rdfs_vm_hello_exit(void)
{
	pr_info("rdfs_vm_hello: unloaded\n");
}

module_init(rdfs_vm_hello_init);
module_exit(rdfs_vm_hello_exit);
MODULE_DESCRIPTION("rdfs qemu harness self-test module");
MODULE_LICENSE("GPL");
