#include "ksearch/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ks_fail(struct ks_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
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
		memcpy(err->msg + sizeof(err->msg) - 4, "...", 4);
}

void ks_error_clear(struct ks_error *err)
{
	if (err)
		err->msg[0] = '\0';
}
