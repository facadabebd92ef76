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

	out[0] = S_ISDIR(mode) ? 'd' : S_ISLNK(mode) ? 'l' : S_ISCHR(mode) ? 'c' :
		 S_ISBLK(mode) ? 'b' : S_ISFIFO(mode) ? 'p' : S_ISSOCK(mode) ? 's' : '-';
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

int tool_error(const char *cmd, const char *what, int err)
{
	fprintf(stderr, "rdfs %s: %s: %s\n", cmd, what, strerror(-err));
	return TOOL_FAIL;
}

int tool_usage(const struct tool_cmd *cmd, const char *msg)
{
	fprintf(stderr, "rdfs %s: %s\nusage: rdfs %s %s\nTry 'rdfs %s --help'.\n", cmd->name,
		msg, cmd->name, cmd->args, cmd->name);
	return TOOL_USAGE;
}
