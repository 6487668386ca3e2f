#include "ksearch/op/verdict.h"

#include <string.h>

static const char *const names[KS_VERDICT_COUNT] = {
	[KS_VERDICT_OK] = "ok",
	[KS_VERDICT_COMPILE_ERROR] = "compile_error",
	[KS_VERDICT_CONTRACT_ERROR] = "contract_error",
	[KS_VERDICT_REFUSED] = "refused",
	[KS_VERDICT_WRONG] = "wrong",
	[KS_VERDICT_CRASH] = "crash",
	[KS_VERDICT_TIMEOUT] = "timeout",
	[KS_VERDICT_IMPLAUSIBLE] = "implausible",
};

const char *ks_verdict_name(enum ks_verdict verdict)
{
	if ((unsigned)verdict >= KS_VERDICT_COUNT)
		return "?";
	return names[verdict];
}

int ks_verdict_parse(const char *name, enum ks_verdict *out)
{
	for (int i = 0; i < KS_VERDICT_COUNT; i++) {
		if (!strcmp(name, names[i])) {
			*out = (enum ks_verdict)i;
			return 0;
		}
	}
	return -1;
}
