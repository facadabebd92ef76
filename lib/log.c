// SPDX-License-Identifier: MIT
/*
 * log.c - one line per event, written with a single write() so lines from
 * different threads and processes never interleave. The format is log.h's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX 4096

/* What the process is: set once at start, read by every thread. */
static const char *log_progname = "rdfs";
static enum log_level log_level_max = LOG_LVL_INFO;
static int log_fd = STDERR_FILENO;
/* log_fd is the journal's stream: syslog priority prefixes, no timestamp. */
static int log_journal;

static const char *const level_names[] = {
	[LOG_LVL_ERROR] = "error",
	[LOG_LVL_WARN] = "warn",
	[LOG_LVL_INFO] = "info",
	[LOG_LVL_DEBUG] = "debug",
};

/* sd-daemon.h's SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG (syslog priorities). */
static const char level_prio[] = {
	[LOG_LVL_ERROR] = '3',
	[LOG_LVL_WARN] = '4',
	[LOG_LVL_INFO] = '6',
	[LOG_LVL_DEBUG] = '7',
};

/*
 * Whether @fd is the stream systemd connected to the journal: it sets
 * JOURNAL_STREAM to "DEV:INODE" of that stream (systemd.exec(5)), which tells
 * it from a stderr redirected elsewhere (a file, a pipe) by the service.
 */
static int fd_is_journal(int fd)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char end;

	if (!env || sscanf(env, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return 0;
	if (fstat(fd, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_init(const char *progname, enum log_level level)
{
	if (progname) {
		const char *slash = strrchr(progname, '/');

		log_progname = slash ? slash + 1 : progname;
	}
	log_level_max = level;
	log_journal = fd_is_journal(log_fd);
}

int log_open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int old;

	if (fd < 0)
		return -errno;
	old = log_fd;
	log_fd = fd;
	log_journal = fd_is_journal(fd);
	if (old != STDERR_FILENO)
		close(old);
	return 0;
}

int log_parse_level(const char *s)
{
	unsigned int i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return (int)i;
	if (strcasecmp(s, "warning") == 0)
		return LOG_LVL_WARN;
	return -EINVAL;
}

void log_msg(enum log_level level, unsigned int id, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved_errno = errno;
	size_t len, head;
	int n;

	if ((int)level > (int)log_level_max)
		return;
	if ((unsigned int)level > LOG_LVL_DEBUG)
		level = LOG_LVL_DEBUG;

	if (log_journal) {
		n = snprintf(line, sizeof(line), "<%c>RDFS%07u: ", level_prio[level], id);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line),
			     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s RDFS%07u: ",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			     tm.tm_sec, ts.tv_nsec / 1000000, log_progname, (int)getpid(),
			     level_names[level], id);
	}
	len = n > 0 ? (size_t)n : 0;
	head = len;
	if (len < sizeof(line)) {
		va_start(ap, fmt);
		n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
		va_end(ap);
		if (n > 0)
			len += (size_t)n;
	}
	/* Truncated lines still end in a newline. */
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	while (len > 0 && line[len - 1] == '\n')
		len--;
	/* One event, one line with its id: a newline inside (a %s) is a space. */
	for (size_t i = head; i < len; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[len++] = '\n';

	if (write(log_fd, line, len) < 0) {
		/* Nowhere better to report a failing log. */
	}
	errno = saved_errno;
}
