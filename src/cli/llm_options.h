/*
 * llm_options.h - the LLM settings that `evolve` and `doctor` share on the
 * command line: where the flags go, and how they meet the environment.
 *
 * The commands bind --temperature and --max-tokens to the fields of their
 * struct ks_llm_config and the rest to a struct ks_cli_llm; after parsing,
 * ks_cli_llm_configure() puts it all into the config.  The command line
 * wins over the environment, setting by setting.
 */
#ifndef KSEARCH_CLI_LLM_OPTIONS_H
#define KSEARCH_CLI_LLM_OPTIONS_H

#include <stddef.h>

#include "cli.h"
#include "ksearch/llm/llm.h"

/* What the command line gave; the strings are argv's own. */
struct ks_cli_llm {
	const char *url, *model, *provider; /* --llm-url, --llm-model, --llm-provider */
	const char *extra;		    /* --llm-extra JSON */
	struct ks_opt_list headers;	    /* --llm-header 'Name: value', repeatable */
	double timeout_s;		    /* --llm-timeout; 0: not given */
};

/*
 * Fill cfg (initialised by ks_llm_config_init(), its --temperature and
 * --max-tokens already parsed into it through opts) from given, then from
 * the environment: KSEARCH_LLM_MAX_TOKENS and KSEARCH_LLM_TIMEOUT when
 * the flags are not given, and what ks_llm_config_from_env() reads (the
 * key among it).  Returns 0, or KS_EXIT_USAGE after printing an error
 * that names the flag or variable.  Does not validate the whole config.
 */
int ks_cli_llm_configure(const char *cmd, const struct ks_option *opts, const struct ks_cli_llm *given,
			 struct ks_llm_config *cfg);

/*
 * The settings a user should see before a long run, as one clause list:
 * the answer budget (and the field it goes in, once client is open), the
 * temperature, the timeout, the extra fields and header names (never their
 * values), and whether a key is sent.  client may be NULL.
 */
void ks_cli_llm_describe(const struct ks_llm_config *cfg, const struct ks_llm *client, char *buf,
			 size_t size);

#endif
