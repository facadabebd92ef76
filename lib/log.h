/* SPDX-License-Identifier: MIT */
/*
 * log.h - logging: one line per event, to stderr (or a file), each with a
 * stable message id.
 *
 * A line (docs/DESIGN.md, "Logs"):
 *
 *	2026-11-26T15:00:00.123Z rdfs-metaserver[4242] warn RDFS1100123: ino=42: message
 *
 * and, when stderr is the journal's stream (systemd sets JOURNAL_STREAM),
 * without what journald records itself (time, program, pid):
 *
 *	<4>RDFS1100123: ino=42: message
 *
 * The id is a 7-digit integer literal written at the call site, unique in the
 * tree and never reused, so `grep -rn 1100123` finds the one line that logs
 * it. docs/HACKING.md says how to pick one; tests/check-log-ids checks them.
 */
#ifndef RDFS_LOG_H
#define RDFS_LOG_H

enum log_level {
	LOG_LVL_ERROR = 0,
	LOG_LVL_WARN,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG
};

/* The smallest and largest message id. */
#define LOG_ID_MIN 1000000
#define LOG_ID_MAX 9999999

/*
 * Set once at program start (part of what the process is). Also decides
 * whether stderr is the journal (it may be called again, as tests do).
 */
void log_init(const char *progname, enum log_level level);
/* Redirect to @path (append). 0 or -errno. */
int log_open_file(const char *path);
/* "error", "warn", "info", "debug" -> level; -EINVAL otherwise. */
int log_parse_level(const char *s);

void log_msg(enum log_level level, unsigned int id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * @id as an unsigned int. Fails to compile if @id is not an integer (a call
 * written without an id) or is a constant out of range.
 */
#ifdef __cplusplus
#define LOG_ID_INT(id) (id)
#else
#define LOG_ID_INT(id) \
	_Generic((id), int : (id), long : (id), unsigned int : (id), unsigned long : (id))
#endif
#define LOG_ID(id)                      \
	((unsigned int)LOG_ID_INT(id) + \
	 0 * sizeof(char[((id) >= LOG_ID_MIN && (id) <= LOG_ID_MAX) ? 1 : -1]))

#define log_error(id, ...) log_msg(LOG_LVL_ERROR, LOG_ID(id), __VA_ARGS__)
#define log_warn(id, ...)  log_msg(LOG_LVL_WARN, LOG_ID(id), __VA_ARGS__)
#define log_info(id, ...)  log_msg(LOG_LVL_INFO, LOG_ID(id), __VA_ARGS__)
#define log_debug(id, ...) log_msg(LOG_LVL_DEBUG, LOG_ID(id), __VA_ARGS__)

#endif
