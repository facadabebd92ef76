// SPDX-License-Identifier: MIT
/*
 * config.c - INI configuration (inih) with command-line overrides and typed lookups.
 */
#include <errno.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config.h"

struct config_entry {
	char *section;
	char *key;
	char *value;
};

struct rdfs_config {
	struct config_entry *entries;	/* in insertion order, for config_foreach */
	size_t n, cap;
};

struct rdfs_config *config_new(void)
{
	return calloc(1, sizeof(struct rdfs_config));
}

static void entry_free(struct config_entry *e)
{
	free(e->section);
	free(e->key);
	free(e->value);
}

void config_free(struct rdfs_config *cfg)
{
	size_t i;

	if (!cfg)
		return;
	for (i = 0; i < cfg->n; i++)
		entry_free(&cfg->entries[i]);
	free(cfg->entries);
	free(cfg);
}

static struct config_entry *config_find(const struct rdfs_config *cfg, const char *section,
					const char *key)
{
	size_t i;

	for (i = 0; i < cfg->n; i++)
		if (strcmp(cfg->entries[i].section, section) == 0 &&
		    strcmp(cfg->entries[i].key, key) == 0)
			return &cfg->entries[i];
	return NULL;
}

int config_set(struct rdfs_config *cfg, const char *section, const char *key, const char *value)
{
	struct config_entry *e;
	char *v;

	if (!section || !key || !value)
		return -EINVAL;
	v = strdup(value);
	if (!v)
		return -ENOMEM;
	e = config_find(cfg, section, key);
	if (e) {
		free(e->value);
		e->value = v;
		return 0;
	}
	if (cfg->n == cfg->cap) {
		size_t ncap = cfg->cap ? 2 * cfg->cap : 16;
		struct config_entry *ne = realloc(cfg->entries, ncap * sizeof(*ne));

		if (!ne)
			goto nomem;
		cfg->entries = ne;
		cfg->cap = ncap;
	}
	e = &cfg->entries[cfg->n];
	e->section = strdup(section);
	e->key = strdup(key);
	e->value = v;
	if (!e->section || !e->key) {
		free(e->section);
		free(e->key);
		goto nomem;
	}
	cfg->n++;
	return 0;
nomem:
	free(v);
	return -ENOMEM;
}

static int config_ini_handler(void *arg, const char *section, const char *key, const char *value)
{
	/* inih reports a section line without keys with key == NULL in some builds. */
	if (!key)
		return 1;
	return config_set(arg, section, key, value ? value : "") == 0;
}

int config_load(struct rdfs_config *cfg, const char *path, int *errline)
{
	struct rdfs_config *staged;
	FILE *f;
	size_t i;
	int ret, err = 0;

	if (errline)
		*errline = 0;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* Parse aside so a file with a syntax error changes nothing. */
	staged = config_new();
	if (!staged) {
		fclose(f);
		return -ENOMEM;
	}
	ret = ini_parse_file(f, config_ini_handler, staged);
	fclose(f);
	if (ret > 0) {
		if (errline)
			*errline = ret;
		err = -EINVAL;
	} else if (ret < 0) {
		err = -ENOMEM;
	}
	for (i = 0; !err && i < staged->n; i++)
		err = config_set(cfg, staged->entries[i].section, staged->entries[i].key,
				 staged->entries[i].value);
	config_free(staged);
	return err;
}

const char *config_get(const struct rdfs_config *cfg, const char *section, const char *key,
		       const char *def)
{
	const struct config_entry *e = NULL;

	if (cfg && section)
		e = config_find(cfg, section, key);
	if (cfg && !e)
		e = config_find(cfg, "cluster", key);
	return e ? e->value : def;
}

int config_get_int(const struct rdfs_config *cfg, const char *section, const char *key,
		   int64_t def, int64_t *out)
{
	const char *s = config_get(cfg, section, key, NULL);
	long long v;
	char *end;

	*out = def;
	if (!s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	while (isspace((unsigned char)*end))
		end++;
	if (errno || end == s || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s)
		return -EINVAL;
	while (isspace((unsigned char)*s))
		s++;
	/* strtoull accepts "-1" and wraps it; a size is never negative. */
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (tolower((unsigned char)*end)) {
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	case 't':
		shift = 40;
		break;
	}
	if (shift) {
		end++;
		/* "4k", "4KiB" and "4KB" all mean 4096. */
		if (tolower((unsigned char)end[0]) == 'i' && tolower((unsigned char)end[1]) == 'b')
			end += 2;
		else if (tolower((unsigned char)end[0]) == 'b')
			end++;
	} else if (tolower((unsigned char)*end) == 'b') {
		end++;
	}
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (~0ULL >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int config_get_size(const struct rdfs_config *cfg, const char *section, const char *key,
		    uint64_t def, uint64_t *out)
{
	const char *s = config_get(cfg, section, key, NULL);
	uint64_t v;

	*out = def;
	if (!s)
		return 0;
	if (config_parse_size(s, &v))
		return -EINVAL;
	*out = v;
	return 0;
}

int config_get_bool(const struct rdfs_config *cfg, const char *section, const char *key,
		    int def, int *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };
	const char *s = config_get(cfg, section, key, NULL);
	unsigned int i;

	*out = def;
	if (!s)
		return 0;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

void config_foreach(const struct rdfs_config *cfg, const char *section,
		    void (*fn)(const char *key, const char *value, void *arg), void *arg)
{
	size_t i;

	for (i = 0; i < cfg->n; i++)
		if (strcmp(cfg->entries[i].section, section) == 0)
			fn(cfg->entries[i].key, cfg->entries[i].value, arg);
}
