/*
 * llm_options.c - the LLM settings evolve and doctor share (llm_options.h).
 */
#include "llm_options.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

static const char *env_nonempty(const char *name)
{
	const char *value = getenv(name);

	return value && *value ? value : NULL;
}

int ks_cli_llm_configure(const char *cmd, const struct ks_option *opts, const struct ks_cli_llm *given,
			 struct ks_llm_config *cfg)
{
	struct ks_error err;
	const char *value;

	if (given->url)
		cfg->base_url = ks_strdup(given->url);
	if (given->model)
		cfg->model = ks_strdup(given->model);
	if (given->provider && ks_llm_provider_parse(given->provider, &cfg->provider, &err) < 0)
		return ks_cli_usage(cmd, "--llm-provider: %s", err.msg);
	if (given->extra && ks_llm_config_set_extra(cfg, given->extra, "--llm-extra", &err) < 0)
		return ks_cli_usage(cmd, "%s", err.msg);
	for (size_t i = 0; i < given->headers.n; i++)
		if (ks_llm_config_add_header(cfg, given->headers.items[i], "--llm-header", &err) < 0)
			return ks_cli_usage(cmd, "%s", err.msg);
	cfg->has_temperature = ks_opts_given(opts, &cfg->temperature);
	if (!ks_opts_given(opts, &cfg->max_tokens) && (value = env_nonempty("KSEARCH_LLM_MAX_TOKENS"))) {
		char *end;
		long v;

		errno = 0;
		v = strtol(value, &end, 10);
		if (*end || end == value || errno || v < 1 || v > 1000000)
			return ks_cli_usage(
				cmd,
				"KSEARCH_LLM_MAX_TOKENS=%s: expected a number of tokens from 1 to 1000000",
				value);
		cfg->max_tokens = (int)v;
	}
	if (given->timeout_s > 0) {
		cfg->total_timeout_s = given->timeout_s;
	} else if ((value = env_nonempty("KSEARCH_LLM_TIMEOUT"))) {
		double s = ks_parse_duration(value);

		if (s <= 0)
			return ks_cli_usage(
				cmd, "KSEARCH_LLM_TIMEOUT=%s: expected a duration such as 15m, 900s or 1h",
				value);
		cfg->total_timeout_s = s;
	}
	if (ks_llm_config_from_env(cfg, &err) < 0)
		return ks_cli_usage(cmd, "%s", err.msg);
	return 0;
}

/* "15 min", "90 s", "1 h 30 min": a timeout as people say it. */
static void format_duration(double s, char *buf, size_t size)
{
	long total = (long)(s + 0.5);

	if (total < 60 || total % 60)
		snprintf(buf, size, "%.0f s", s);
	else if (total % 3600 == 0)
		snprintf(buf, size, "%ld h", total / 3600);
	else if (total > 3600)
		snprintf(buf, size, "%ld h %ld min", total / 3600, total % 3600 / 60);
	else
		snprintf(buf, size, "%ld min", total / 60);
}

void ks_cli_llm_describe(const struct ks_llm_config *cfg, const struct ks_llm *client, char *buf, size_t size)
{
	struct ks_strbuf sb;
	char timeout[32];

	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb, "up to %d tokens an answer", cfg->max_tokens);
	if (client)
		ks_strbuf_addf(&sb, " (sent as %s)", ks_llm_max_tokens_field(client));
	if (client ? ks_llm_sends_temperature(client) : cfg->has_temperature)
		ks_strbuf_addf(&sb, ", temperature %g", cfg->temperature);
	else
		ks_strbuf_adds(&sb, ", the model's default temperature");
	format_duration(cfg->total_timeout_s, timeout, sizeof(timeout));
	ks_strbuf_addf(&sb, ", %s per request", timeout);
	if (cfg->extra) {
		json_t *extra = json_loads(cfg->extra, 0, NULL);
		const char *key;
		json_t *v;
		int first = 1;

		ks_strbuf_adds(&sb, ", extra fields");
		json_object_foreach(extra, key, v)
		{
			ks_strbuf_addf(&sb, "%s%s", first ? " " : ", ", key);
			first = 0;
		}
		json_decref(extra);
	}
	if (cfg->n_headers) {
		ks_strbuf_adds(&sb, ", headers");
		for (size_t i = 0; i < cfg->n_headers; i++)
			ks_strbuf_addf(&sb, "%s%.*s", i ? ", " : " ", (int)strcspn(cfg->headers[i], ":"),
				       cfg->headers[i]);
		ks_strbuf_adds(&sb, " (values not shown)");
	}
	if (cfg->api_key && *cfg->api_key)
		ks_strbuf_addf(&sb, ", key from the environment (%s)", ks_llm_key_env_name(cfg->provider));
	else
		ks_strbuf_addf(&sb,
			       ", no API key (%s unset): requests carry no credentials, as local servers "
			       "expect",
			       ks_llm_key_env_name(cfg->provider));
	snprintf(buf, size, "%s", sb.buf ? sb.buf : "");
	ks_strbuf_release(&sb);
}
