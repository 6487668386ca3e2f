/*
 * secret.h - the LLM credentials, taken out of the environment at start-up.
 *
 * The API keys (KSEARCH_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY) and
 * KSEARCH_LLM_HEADERS arrive in the environment, but the environment is
 * readable: by the process itself through /proc/self/environ (which code
 * compiled by NVRTC can `#include`), and by every child it execs, which
 * inherits it.  So main() captures them before anything else runs: the
 * values move into private heap storage, their bytes in the environment
 * block are overwritten, and the names are unset.  After that no process
 * of ksearch's (itself, GPU workers, compilers, ncu) has them in its
 * environment.
 *
 * The values are never printed; ks_secret_env() is the only way to them.
 */
#ifndef KSEARCH_SECRET_H
#define KSEARCH_SECRET_H

/*
 * Move the secret variables out of the environment: each one set is copied,
 * its value's bytes (in every entry of that name) are zeroed in place, and
 * the name is unset.  Call first thing in main(), before any thread or child
 * starts: it edits the environment, which is not thread-safe.  A second call
 * changes nothing (the variables are gone, and what was captured stays).
 * Exits the process if memory for the copy cannot be had.
 */
void ks_secrets_capture(void);

/*
 * The value captured for name, one of the variables above; NULL if it was
 * unset or empty.  The string is borrowed and lives until the process exits.
 * In a program that never called ks_secrets_capture() (a test linking the
 * library), the environment's current value, as getenv() would give.
 */
const char *ks_secret_env(const char *name);

#endif
