#include "ksearch/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

/*
 * Every message is UTF-8, whatever it quotes (a path from the command
 * line, a compiler's log, a cut in the middle of a character): messages
 * become JSON (results, records, --json), and jansson refuses anything
 * else.  Bytes that are not UTF-8 become U+FFFD.
 */
static void make_utf8(struct ks_error *err)
{
	size_t len = strlen(err->msg);
	char *clean;

	if (ks_utf8_invalid(err->msg, len) < 0)
		return;
	clean = ks_utf8_sanitize(err->msg);
	len = ks_utf8_prefix(clean,
			     strlen(clean) < sizeof(err->msg) - 1 ? strlen(clean) : sizeof(err->msg) - 1);
	memcpy(err->msg, clean, len);
	err->msg[len] = '\0';
	free(clean);
}

int ks_fail(struct ks_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	make_utf8(err);
	return -1;
}

void ks_error_prefix(struct ks_error *err, const char *fmt, ...)
{
	char context[KS_ERROR_MAX];
	char old[KS_ERROR_MAX];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(context, sizeof(context), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* a message cut at KS_ERROR_MAX still says what failed first */
	if (snprintf(err->msg, sizeof(err->msg), "%s: %s", context, old) >= (int)sizeof(err->msg))
		memcpy(err->msg + ks_utf8_prefix(err->msg, sizeof(err->msg) - 4), "...", 4);
	make_utf8(err);
}

void ks_error_clear(struct ks_error *err)
{
	if (err)
		err->msg[0] = '\0';
}
