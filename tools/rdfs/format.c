// SPDX-License-Identifier: MIT
/*
 * format.c - the tool's number formats and error messages.
 */
#include <stdio.h>
#include <string.h>

#include "tool.h"

void tool_human(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	double v = (double)bytes;
	int u = -1;

	while (v >= 1024.0 && u < (int)sizeof(units) - 2) {
		v /= 1024.0;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else if (v < 10.0)
		snprintf(buf, len, "%.1f%c", v, units[u]);
	else
		snprintf(buf, len, "%.0f%c", v, units[u]);
}

int tool_percent(uint64_t used, uint64_t total)
{
	if (total == 0)
		return -1;
	return (int)((used * 100 + total - 1) / total);
}

void tool_mode_string(mode_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	out[0] = S_ISDIR(mode)	? 'd' :
		 S_ISLNK(mode)	? 'l' :
		 S_ISCHR(mode)	? 'c' :
		 S_ISBLK(mode)	? 'b' :
		 S_ISFIFO(mode) ? 'p' :
		 S_ISSOCK(mode) ? 's' :
				  '-';
	for (i = 0; i < 9; i++)
		out[i + 1] = mode & (1 << (8 - i)) ? rwx[i] : '-';
	if (mode & S_ISUID)
		out[3] = out[3] == 'x' ? 's' : 'S';
	if (mode & S_ISGID)
		out[6] = out[6] == 'x' ? 's' : 'S';
	if (mode & S_ISVTX)
		out[9] = out[9] == 'x' ? 't' : 'T';
	out[10] = '\0';
}

/* The length of the UTF-8 sequence at @p (1-4), or 0 if it is not one. */
static int utf8_len(const unsigned char *p)
{
	int n = p[0] < 0x80	      ? 1 :
		(p[0] & 0xe0) == 0xc0 ? 2 :
		(p[0] & 0xf0) == 0xe0 ? 3 :
		(p[0] & 0xf8) == 0xf0 ? 4 :
					0;

	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void tool_json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		int n = utf8_len(p);

		if (*p == '"' || *p == '\\') {
			printf("\\%c", *p);
		} else if (*p < 0x20 || n == 0) {
			/* a control byte, or a name that is not UTF-8: still valid JSON */
			printf("\\u%04x", *p);
			n = 1;
		} else {
			fwrite(p, 1, n, stdout);
		}
		p += n ? n : 1;
	}
	putchar('"');
}

const char *tool_type_name(mode_t mode)
{
	return S_ISREG(mode)  ? "file" :
	       S_ISDIR(mode)  ? "dir" :
	       S_ISLNK(mode)  ? "symlink" :
	       S_ISFIFO(mode) ? "fifo" :
	       S_ISSOCK(mode) ? "socket" :
	       S_ISCHR(mode)  ? "char" :
	       S_ISBLK(mode)  ? "block" :
				"unknown";
}

int tool_error(const char *cmd, const char *what, int err)
{
	fprintf(stderr, "rdfs %s: %s: %s\n", cmd, what, strerror(-err));
	return TOOL_FAIL;
}

int tool_usage(const struct tool_cmd *cmd, const char *msg)
{
	fprintf(stderr, "rdfs %s: %s\nusage: rdfs %s %s\nTry 'rdfs %s --help'.\n", cmd->name, msg,
		cmd->name, cmd->args, cmd->name);
	return TOOL_USAGE;
}
