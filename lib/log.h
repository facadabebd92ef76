/* SPDX-License-Identifier: MIT */
/*
 * log.h - logging: one line per event, to stderr (or a file), with a level,
 * a timestamp and the program name.
 */
#ifndef RDFS_LOG_H
#define RDFS_LOG_H

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Set once at program start (part of what the process is). */
void log_init(const char *progname, enum log_level level);
/* Redirect to @path (append). 0 or -errno. */
int log_open_file(const char *path);
/* "error", "warn", "info", "debug" -> level; -EINVAL otherwise. */
int log_parse_level(const char *s);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...)	log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)	log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)	log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
