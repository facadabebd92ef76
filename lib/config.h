/* SPDX-License-Identifier: MIT */
/*
 * config.h - one configuration format for every rdfs program.
 *
 * An INI file (parsed with inih) with one section per program and a shared
 * [cluster] section:
 *
 *   [cluster]
 *   secret_file = /etc/rdfs/secret
 *   metaserver  = tcp://mds1:7000
 *
 *   [ioserver]
 *   listen = tcp://0.0.0.0:7100
 *   volume = /srv/rdfs/vol0
 *
 * Command-line options override the file: each program maps `--key=value` (or a
 * dedicated flag) to config_set(cfg, its_section, key, value) after loading. A
 * lookup checks the program's section, then [cluster], then the default.
 */
#ifndef RDFS_CONFIG_H
#define RDFS_CONFIG_H

#include <stdint.h>

struct rdfs_config;

struct rdfs_config *config_new(void);
void config_free(struct rdfs_config *cfg);

/*
 * Merge @path into @cfg. Returns 0, -ENOENT if the file is missing, -EINVAL on a
 * syntax error (with the line number written to *@errline when not NULL).
 */
int config_load(struct rdfs_config *cfg, const char *path, int *errline);

/* Set (or replace) section.key. */
int config_set(struct rdfs_config *cfg, const char *section, const char *key, const char *value);

/* section.key, else cluster.key, else @def. */
const char *config_get(const struct rdfs_config *cfg, const char *section, const char *key,
		       const char *def);

/*
 * Integer and size lookups. Sizes take k/m/g/t suffixes (powers of 1024).
 * Return 0, or -EINVAL when the value does not parse (the value is then left at @def).
 */
int config_get_int(const struct rdfs_config *cfg, const char *section, const char *key,
		   int64_t def, int64_t *out);
int config_get_size(const struct rdfs_config *cfg, const char *section, const char *key,
		    uint64_t def, uint64_t *out);
int config_get_bool(const struct rdfs_config *cfg, const char *section, const char *key,
		    int def, int *out);
/* Parse "4k", "1M", "1048576" -> bytes. 0 or -EINVAL. */
int config_parse_size(const char *s, uint64_t *out);

/* Iterate: call @fn for every key of @section (for printing effective config). */
void config_foreach(const struct rdfs_config *cfg, const char *section,
		    void (*fn)(const char *key, const char *value, void *arg), void *arg);

#endif
