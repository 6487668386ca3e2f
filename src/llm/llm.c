/*
 * llm.c - the LLM client: request bodies, curl multi transfers, retries
 * with backoff, the pause after a run of failures, budgets, and reading
 * the answers of both protocols.  The contract is in llm.h.
 *
 * The key is copied into the client's private config (for redaction) and
 * into the curl_slist of headers; both are wiped before they are freed.
 * Every string the client hands out (responses, error messages, the pause
 * reason, notices) goes through redact() on its way out, which also hides
 * the values of the --llm-header lines (8 characters or more).
 *
 * A request keeps its body without the parameters an endpoint may refuse
 * (the answer budget, the temperature) and the extra fields; each attempt
 * serialises it with the client's current choices, so that a change made
 * for one request holds for the ones already queued.
 *
 * curl's own signal handling is off (CURLOPT_NOSIGNAL: the search may run
 * threads); the resolver is curl's threaded one, and ksearch ignores
 * SIGPIPE (proc.c) as curl's documentation asks of such programs.
 */
#include "ksearch/llm/llm.h"

#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ksearch/base/pcg.h"
#include "ksearch/base/secret.h"
#include "ksearch/base/util.h"

#ifndef KS_VERSION
#define KS_VERSION "dev"
#endif

#define ANTHROPIC_VERSION "2023-06-01"
#define OPENAI_DEFAULT_URL "https://api.openai.com/v1"
#define ANTHROPIC_DEFAULT_URL "https://api.anthropic.com/v1"
/* an answer larger than this is a broken or hostile server */
#define ANSWER_MAX ((size_t)16 << 20)
/* how much of a server's error text goes into a message */
#define SERVER_TEXT_MAX 300
/* a Retry-After beyond this is taken as this */
#define RETRY_AFTER_MAX_S 3600.0
/* keys shorter than this are redacted from error messages but not from answer text */
#define REDACT_TEXT_MIN 8
#define REDACTED "<redacted>"
/* the PCG32 stream of the backoff jitter ("llm") */
#define JITTER_STREAM 0x6c6c6dULL
#define MAX_HEADERS 64
/* immediate resends of one request after the endpoint refused a parameter */
#define ADAPT_MAX 3

/* A submitted request: waiting (for a slot or its retry time) or running. */
struct llm_req {
	struct llm_req *next;
	uint64_t tag;
	json_t *base;		/* model, system and messages: the rest is added per attempt */
	char *body;		/* the body of the current attempt */
	const char *sent_field; /* the budget's field in it */
	int sent_temperature;
	int adapt_retries;
	CURL *easy; /* made at the first attempt, re-added for retries */
	struct ks_strbuf answer;
	int running;
	int answer_too_large;
	int attempts;
	double submitted_at;
	double ready_at; /* earliest start of the next attempt */
	double attempt_started;
	double latency_s;
	long last_status;
	char *last_error;
	char curl_error[CURL_ERROR_SIZE];
};

struct done {
	struct done *next;
	struct ks_llm_response resp;
};

struct notice {
	struct notice *next;
	char *text;
};

struct ks_llm {
	struct ks_llm_config cfg; /* a private copy; its key is used for redaction only */
	char *url;
	struct curl_slist *headers; /* carries the key to curl */
	CURLM *multi;
	struct ks_pcg32 jitter;
	struct llm_req *reqs; /* in submission order */
	size_t n_reqs;
	size_t n_running;
	struct done *done_head, *done_tail;
	size_t n_done;
	int consecutive_failures;
	double paused_until;
	char *pause_reason; /* "5 failed requests in a row (last: ...)" */
	struct ks_llm_usage usage;
	json_t *extra;	       /* cfg.extra, parsed */
	const char *max_field; /* "max_completion_tokens" or "max_tokens" */
	int max_field_changed; /* once per run */
	int temperature_dropped;
	struct notice *notices, **notices_tail;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* A copy of s with every occurrence of key replaced by REDACTED. */
static char *redact_copy(const char *s, const char *key)
{
	struct ks_strbuf sb;
	size_t key_len = key ? strlen(key) : 0;
	const char *hit;

	if (!key_len)
		return ks_strdup(s);
	ks_strbuf_init(&sb);
	while ((hit = strstr(s, key))) {
		ks_strbuf_add(&sb, s, (size_t)(hit - s));
		ks_strbuf_adds(&sb, REDACTED);
		s = hit + key_len;
	}
	ks_strbuf_adds(&sb, s);
	return ks_strbuf_detach(&sb);
}

/* The value of a "Name: value" header line. */
static const char *header_value(const char *line)
{
	const char *v = strchr(line, ':');

	v = v ? v + 1 : line + strlen(line);
	while (*v == ' ' || *v == '\t')
		v++;
	return v;
}

/* s (malloc'd, taken) with secret replaced by REDACTED; secrets shorter than min are left. */
static char *redact_one(char *s, const char *secret, size_t min)
{
	char *out;

	if (!s || !secret || !*secret || strlen(secret) < min || !strstr(s, secret))
		return s;
	out = redact_copy(s, secret);
	free(s);
	return out;
}

/* s (malloc'd, taken) without the key and the header values; answer text spares short keys. */
static char *redact_secrets(const struct ks_llm_config *cfg, char *s, int answer_text)
{
	s = redact_one(s, cfg->api_key, answer_text ? REDACT_TEXT_MIN : 1);
	for (size_t i = 0; i < cfg->n_headers; i++)
		s = redact_one(s, header_value(cfg->headers[i]), REDACT_TEXT_MIN);
	return s;
}

/* Take ownership of s (malloc'd) and return it redacted. */
static char *redact(const struct ks_llm *llm, char *s, int answer_text)
{
	return redact_secrets(&llm->cfg, s, answer_text);
}

static void redact_error(struct ks_error *err, const struct ks_llm_config *cfg)
{
	char *clean;

	if (!err)
		return;
	clean = redact_secrets(cfg, ks_strdup(err->msg), 0);
	snprintf(err->msg, sizeof(err->msg), "%s", clean);
	free(clean);
}

/* ---- configuration ---- */

void ks_llm_config_init(struct ks_llm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->provider = KS_LLM_PROVIDER_UNSET;
	cfg->concurrency = 4;
	cfg->temperature = 0.8;
	cfg->max_tokens = 32768;
	cfg->connect_timeout_s = 10;
	cfg->total_timeout_s = 900;
	cfg->max_retries = 4;
	cfg->backoff_base_s = 1;
	cfg->backoff_max_s = 30;
	cfg->pause_after = 5;
	cfg->pause_s = 120;
	cfg->price.cached_input_per_mtok = -1;
	cfg->price.cache_write_per_mtok = -1;
}

void ks_llm_config_release(struct ks_llm_config *cfg)
{
	free(cfg->base_url);
	free(cfg->model);
	wipe_free(cfg->api_key);
	free(cfg->extra);
	for (size_t i = 0; i < cfg->n_headers; i++)
		wipe_free(cfg->headers[i]);
	free(cfg->headers);
	ks_llm_config_init(cfg);
}

static void config_copy(struct ks_llm_config *dst, const struct ks_llm_config *src)
{
	*dst = *src;
	dst->base_url = src->base_url ? ks_strdup(src->base_url) : NULL;
	dst->model = src->model ? ks_strdup(src->model) : NULL;
	dst->api_key = src->api_key ? ks_strdup(src->api_key) : NULL;
	dst->extra = src->extra ? ks_strdup(src->extra) : NULL;
	dst->headers = src->n_headers ? ks_calloc(src->n_headers, sizeof(*dst->headers)) : NULL;
	dst->alloc_headers = src->n_headers;
	for (size_t i = 0; i < src->n_headers; i++)
		dst->headers[i] = ks_strdup(src->headers[i]);
}

/* The fields a body gets from the client, and the option that sets each. */
static const char *const owned_fields[][2] = {
	{ "model", "--llm-model" },	    { "messages", "the prompts" },
	{ "system", "the system prompt" },  { "stream", "ksearch (it reads whole answers)" },
	{ "max_tokens", "--max-tokens" },   { "max_completion_tokens", "--max-tokens" },
	{ "temperature", "--temperature" },
};

int ks_llm_config_set_extra(struct ks_llm_config *cfg, const char *json_text, const char *origin,
			    struct ks_error *err)
{
	json_error_t jerr;
	json_t *root;
	char *text;

	root = json_loads(json_text ? json_text : "", JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!root)
		return ks_fail(err,
			       "%s: not valid JSON (line %d, column %d: %s); expected an object such as "
			       "'{\"reasoning_effort\": \"high\"}'",
			       origin, jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return ks_fail(err,
			       "%s: expected a JSON object of fields to add to every request, such as "
			       "'{\"reasoning_effort\": \"high\"}'",
			       origin);
	}
	for (size_t i = 0; i < sizeof(owned_fields) / sizeof(owned_fields[0]); i++)
		if (json_object_get(root, owned_fields[i][0])) {
			json_decref(root);
			return ks_fail(err,
				       "%s: the field \"%s\" is ksearch's to set (%s), not an extra field",
				       origin, owned_fields[i][0], owned_fields[i][1]);
		}
	text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	json_decref(root);
	free(cfg->extra);
	cfg->extra = text;
	return 0;
}

/* RFC 9110 token characters. */
static int is_token_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

int ks_llm_config_add_header(struct ks_llm_config *cfg, const char *line, const char *origin,
			     struct ks_error *err)
{
	static const char *const ours[] = { "Content-Type", "Content-Length", "Host",
					    "Expect",	    "Connection",     "Transfer-Encoding" };
	const char *colon = strchr(line, ':'), *value, *end;
	size_t name_len;

	if (!colon)
		return ks_fail(err, "%s: expected 'Name: value', and there is no colon", origin);
	name_len = (size_t)(colon - line);
	while (name_len && (line[name_len - 1] == ' ' || line[name_len - 1] == '\t'))
		name_len--;
	if (!name_len)
		return ks_fail(err, "%s: expected 'Name: value', and the name is empty", origin);
	for (size_t i = 0; i < name_len; i++)
		if (!is_token_char((unsigned char)line[i]))
			return ks_fail(
				err, "%s: '%.*s' is not a header name (letters, digits and -_.!#$%%&'*+^`|~)",
				origin, (int)(colon - line), line);
	value = header_value(line);
	for (end = value + strlen(value); end > value && (end[-1] == ' ' || end[-1] == '\t'); end--)
		;
	if (end == value)
		return ks_fail(err, "%s: the header %.*s has no value", origin, (int)name_len, line);
	for (const char *p = value; p < end; p++)
		if ((unsigned char)*p < 0x20 ? *p != '\t' : *p == 0x7f)
			return ks_fail(
				err, "%s: the value of the header %.*s has a control character or line break",
				origin, (int)name_len, line);
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (strlen(ours[i]) == name_len && !strncasecmp(line, ours[i], name_len))
			return ks_fail(err, "%s: the header %s is ksearch's to set", origin, ours[i]);
	for (size_t i = 0; i < cfg->n_headers; i++)
		if (!strncasecmp(cfg->headers[i], line, name_len) && cfg->headers[i][name_len] == ':')
			return ks_fail(err, "%s: the header %.*s is given twice", origin, (int)name_len,
				       line);
	if (cfg->n_headers >= MAX_HEADERS)
		return ks_fail(err, "%s: more than %d headers", origin, MAX_HEADERS);
	KS_ALLOC_GROW(cfg->headers, cfg->n_headers + 1, cfg->alloc_headers);
	cfg->headers[cfg->n_headers++] =
		ks_asprintf("%.*s: %.*s", (int)name_len, line, (int)(end - value), value);
	return 0;
}

int ks_llm_provider_parse(const char *name, enum ks_llm_provider *provider, struct ks_error *err)
{
	if (name && !strcmp(name, "openai")) {
		*provider = KS_LLM_OPENAI;
		return 0;
	}
	if (name && !strcmp(name, "anthropic")) {
		*provider = KS_LLM_ANTHROPIC;
		return 0;
	}
	return ks_fail(err, "unknown LLM provider '%s' (expected openai or anthropic)", name ? name : "");
}

const char *ks_llm_provider_name(enum ks_llm_provider provider)
{
	switch (provider) {
	case KS_LLM_OPENAI:
		return "openai";
	case KS_LLM_ANTHROPIC:
		return "anthropic";
	default:
		return "unset";
	}
}

const char *ks_llm_key_env_name(enum ks_llm_provider provider)
{
	return provider == KS_LLM_ANTHROPIC ? "KSEARCH_API_KEY or ANTHROPIC_API_KEY"
					    : "KSEARCH_API_KEY or OPENAI_API_KEY";
}

static const char *env_nonempty(const char *name)
{
	const char *value = getenv(name);

	return value && *value ? value : NULL;
}

int ks_llm_config_from_env(struct ks_llm_config *cfg, struct ks_error *err)
{
	const char *value;

	if (cfg->provider == KS_LLM_PROVIDER_UNSET) {
		value = env_nonempty("KSEARCH_LLM_PROVIDER");
		if (!value) {
			cfg->provider = KS_LLM_OPENAI;
		} else if (ks_llm_provider_parse(value, &cfg->provider, err)) {
			ks_error_prefix(err, "KSEARCH_LLM_PROVIDER");
			return -1;
		}
	}
	if (!cfg->base_url || !*cfg->base_url) {
		value = env_nonempty("KSEARCH_LLM_URL");
		free(cfg->base_url);
		cfg->base_url = ks_strdup(value				      ? value
					  : cfg->provider == KS_LLM_ANTHROPIC ? ANTHROPIC_DEFAULT_URL
									      : OPENAI_DEFAULT_URL);
	}
	if (!cfg->model || !*cfg->model) {
		value = env_nonempty("KSEARCH_LLM_MODEL");
		free(cfg->model);
		cfg->model = value ? ks_strdup(value) : NULL;
	}
	value = env_nonempty("KSEARCH_LLM_EXTRA");
	if (!cfg->extra && value && ks_llm_config_set_extra(cfg, value, "KSEARCH_LLM_EXTRA", err))
		return -1;
	value = ks_secret_env("KSEARCH_LLM_HEADERS");
	if (!cfg->n_headers && value) {
		char *copy = ks_strdup(value), *line, *save = NULL;
		int rc = 0;

		for (line = strtok_r(copy, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
			size_t len = strlen(line);

			if (len && line[len - 1] == '\r')
				line[len - 1] = '\0';
			if (line[strspn(line, " \t")])
				rc = ks_llm_config_add_header(cfg, line, "KSEARCH_LLM_HEADERS", err);
		}
		wipe_free(copy);
		if (rc)
			return -1;
	}
	value = ks_secret_env("KSEARCH_API_KEY");
	if (!value)
		value = ks_secret_env(cfg->provider == KS_LLM_ANTHROPIC ? "ANTHROPIC_API_KEY"
									: "OPENAI_API_KEY");
	wipe_free(cfg->api_key);
	cfg->api_key = value ? ks_strdup(value) : NULL;
	return 0;
}

static int bad_number(double x)
{
	return !isfinite(x) || x < 0;
}

/* The extra fields and headers against the provider's rules. */
static int validate_fields(const struct ks_llm_config *cfg, struct ks_error *err)
{
	int anthropic = cfg->provider == KS_LLM_ANTHROPIC;
	const char *key_header = anthropic ? "x-api-key" : "Authorization";
	json_t *extra = NULL, *thinking, *budget;
	const char *type;
	int ret = 0;

	for (size_t i = 0; i < cfg->n_headers; i++) {
		const char *h = cfg->headers[i];

		if (!strncasecmp(h, key_header, strlen(key_header)) && h[strlen(key_header)] == ':')
			return ks_fail(err,
				       "--llm-header %s: the API key goes there, and it comes from the "
				       "environment only (%s), so that it never shows in the process list",
				       key_header, ks_llm_key_env_name(cfg->provider));
		if (anthropic && !strncasecmp(h, "anthropic-version:", 18))
			return ks_fail(err,
				       "--llm-header anthropic-version: ksearch sends %s, the version it "
				       "speaks; new features come with anthropic-beta",
				       ANTHROPIC_VERSION);
	}
	if (!cfg->extra)
		return 0;
	extra = json_loads(cfg->extra, 0, NULL);
	if (!json_is_object(extra)) {
		json_decref(extra);
		return ks_fail(err, "--llm-extra: not a JSON object");
	}
	/* Anthropic's documented rules for extended thinking */
	thinking = json_object_get(extra, "thinking");
	type = json_string_value(json_object_get(thinking, "type"));
	budget = json_object_get(thinking, "budget_tokens");
	if (anthropic && type && strcmp(type, "disabled")) {
		if (cfg->has_temperature && cfg->temperature != 1)
			ret = ks_fail(
				err,
				"--temperature %g: Anthropic's thinking (--llm-extra) is not compatible "
				"with a temperature change; leave --temperature out",
				cfg->temperature);
		else if (json_is_integer(budget) && json_integer_value(budget) >= cfg->max_tokens)
			ret = ks_fail(
				err,
				"--llm-extra: thinking.budget_tokens %lld must be less than --max-tokens "
				"%d, which counts the thinking and the answer",
				(long long)json_integer_value(budget), cfg->max_tokens);
	}
	json_decref(extra);
	return ret;
}

static int validate(const struct ks_llm_config *cfg, struct ks_error *err)
{
	double max_temperature;

	if (cfg->provider != KS_LLM_OPENAI && cfg->provider != KS_LLM_ANTHROPIC)
		return ks_fail(err, "no LLM provider: give --llm-provider openai|anthropic or set "
				    "KSEARCH_LLM_PROVIDER");
	if (!cfg->base_url || !*cfg->base_url)
		return ks_fail(err, "no LLM endpoint: give --llm-url or set KSEARCH_LLM_URL");
	if (strncasecmp(cfg->base_url, "http://", 7) && strncasecmp(cfg->base_url, "https://", 8))
		return ks_fail(
			err, "--llm-url '%s': expected an http:// or https:// URL such as %s", cfg->base_url,
			cfg->provider == KS_LLM_ANTHROPIC ? ANTHROPIC_DEFAULT_URL : OPENAI_DEFAULT_URL);
	if (!cfg->model || !*cfg->model)
		return ks_fail(err, "no LLM model: give --llm-model or set KSEARCH_LLM_MODEL");
	if (cfg->api_key) {
		for (const char *p = cfg->api_key; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return ks_fail(err,
					       "the API key (from %s) contains a control "
					       "character or line break",
					       ks_llm_key_env_name(cfg->provider));
	}
	if (cfg->concurrency < 1 || cfg->concurrency > 256)
		return ks_fail(err, "--llm-concurrency %d: expected 1 to 256", cfg->concurrency);
	/* the APIs' own ranges */
	max_temperature = cfg->provider == KS_LLM_ANTHROPIC ? 1 : 2;
	if (!isfinite(cfg->temperature) || cfg->temperature < 0 || cfg->temperature > max_temperature)
		return ks_fail(err, "--temperature %g: expected 0 to %g for %s", cfg->temperature,
			       max_temperature, ks_llm_provider_name(cfg->provider));
	if (cfg->max_tokens < 1 || cfg->max_tokens > 1000000)
		return ks_fail(err, "--max-tokens %d: expected 1 to 1000000", cfg->max_tokens);
	if (bad_number(cfg->connect_timeout_s) || cfg->connect_timeout_s == 0)
		return ks_fail(err, "LLM connect timeout %g s: expected more than 0", cfg->connect_timeout_s);
	if (bad_number(cfg->total_timeout_s) || cfg->total_timeout_s == 0)
		return ks_fail(err, "LLM total timeout %g s: expected more than 0", cfg->total_timeout_s);
	if (cfg->max_retries < 0 || cfg->max_retries > 100)
		return ks_fail(err, "LLM retries %d: expected 0 to 100", cfg->max_retries);
	if (bad_number(cfg->backoff_base_s) || cfg->backoff_base_s == 0)
		return ks_fail(err, "LLM backoff base %g s: expected more than 0", cfg->backoff_base_s);
	if (bad_number(cfg->backoff_max_s) || cfg->backoff_max_s < cfg->backoff_base_s)
		return ks_fail(err, "LLM backoff maximum %g s: expected at least the base (%g s)",
			       cfg->backoff_max_s, cfg->backoff_base_s);
	if (cfg->pause_after < 0)
		return ks_fail(err, "LLM pause after %d failures: expected 0 (never) or more",
			       cfg->pause_after);
	if (bad_number(cfg->pause_s) || (cfg->pause_after > 0 && cfg->pause_s == 0))
		return ks_fail(err, "LLM pause %g s: expected more than 0", cfg->pause_s);
	if (bad_number(cfg->budget_usd))
		return ks_fail(err, "--llm-budget-usd %g: expected 0 (none) or more", cfg->budget_usd);
	if (cfg->has_price &&
	    (bad_number(cfg->price.input_per_mtok) || bad_number(cfg->price.output_per_mtok)))
		return ks_fail(err, "price of model '%s': expected numbers >= 0 per million tokens",
			       cfg->model);
	if (cfg->budget_usd > 0 && !cfg->has_price)
		return ks_fail(err,
			       "--llm-budget-usd needs the price of model '%s': add it to "
			       "prompts/prices.json",
			       cfg->model);
	return validate_fields(cfg, err);
}

int ks_llm_config_validate(const struct ks_llm_config *cfg, struct ks_error *err)
{
	if (validate(cfg, err) == 0)
		return 0;
	/* a URL or model name is echoed; a user may have pasted the key into one */
	redact_error(err, cfg);
	return -1;
}

int ks_llm_prices_load(const char *path, const char *model, struct ks_llm_price *price, int *found,
		       struct ks_error *err)
{
	json_error_t jerr;
	json_t *root, *entry, *in, *out;
	int ret = -1;

	*found = 0;
	root = json_load_file(path, 0, &jerr);
	if (!root) {
		if (jerr.line <= 0)
			return ks_fail(err, "%s: %s", path, jerr.text);
		return ks_fail(err, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
	}
	if (!json_is_object(root)) {
		ks_fail(err,
			"%s: expected an object of model -> {\"input_per_mtok\", "
			"\"output_per_mtok\"}",
			path);
		goto cleanup;
	}
	entry = json_object_get(root, model);
	if (!entry) {
		ret = 0;
		goto cleanup;
	}
	in = json_object_get(entry, "input_per_mtok");
	out = json_object_get(entry, "output_per_mtok");
	if (!json_is_object(entry) || !json_is_number(in) || !json_is_number(out) ||
	    bad_number(json_number_value(in)) || bad_number(json_number_value(out))) {
		ks_fail(err,
			"%s: model \"%s\": expected {\"input_per_mtok\": USD, "
			"\"output_per_mtok\": USD} with numbers >= 0",
			path, model);
		goto cleanup;
	}
	price->input_per_mtok = json_number_value(in);
	price->output_per_mtok = json_number_value(out);
	price->cached_input_per_mtok = -1;
	price->cache_write_per_mtok = -1;
	{
		const char *optional[] = { "cached_input_per_mtok", "cache_write_per_mtok" };
		double *to[] = { &price->cached_input_per_mtok, &price->cache_write_per_mtok };

		for (int i = 0; i < 2; i++) {
			json_t *v = json_object_get(entry, optional[i]);

			if (!v)
				continue;
			if (!json_is_number(v) || bad_number(json_number_value(v))) {
				ks_fail(err,
					"%s: model \"%s\": \"%s\" must be a number >= 0 (USD per million "
					"tokens)",
					path, model, optional[i]);
				goto cleanup;
			}
			*to[i] = json_number_value(v);
		}
	}
	*found = 1;
	ret = 0;
cleanup:
	json_decref(root);
	return ret;
}

/* ---- requests ---- */

static int add_message(json_t *messages, const char *role, const char *content, const char *what,
		       struct ks_error *err)
{
	json_t *text = json_string(content);

	if (!text)
		return ks_fail(err, "LLM request: the %s is not valid UTF-8", what);
	json_array_append_new(messages, json_pack("{s:s, s:o}", "role", role, "content", text));
	return 0;
}

/*
 * The part of the body every attempt shares (model, system, messages);
 * NULL (and err) if a text is not UTF-8.
 */
static json_t *build_base(const struct ks_llm_config *cfg, const struct ks_llm_request *req,
			  struct ks_error *err)
{
	json_t *root = json_object(), *messages = json_array(), *system = NULL, *base = NULL;
	int anthropic = cfg->provider == KS_LLM_ANTHROPIC;

	if (req->system) {
		system = json_string(req->system);
		if (!system) {
			ks_fail(err, "LLM request: the system prompt is not valid UTF-8");
			goto cleanup;
		}
	}
	if (system && !anthropic && add_message(messages, "system", req->system, "system prompt", err))
		goto cleanup;
	if (add_message(messages, "user", req->user, "user prompt", err))
		goto cleanup;
	if (req->assistant && (add_message(messages, "assistant", req->assistant, "earlier answer", err) ||
			       add_message(messages, "user", req->followup, "follow-up prompt", err)))
		goto cleanup;
	json_object_set_new(root, "model", json_string(cfg->model));
	if (anthropic && system)
		json_object_set(root, "system", system);
	json_object_set(root, "messages", messages);
	base = json_incref(root);
cleanup:
	json_decref(system);
	json_decref(messages);
	json_decref(root);
	return base;
}

/* Merge src into dst: objects key by key, anything else replaced (a copy of src's). */
static void merge(json_t *dst, json_t *src)
{
	const char *key;
	json_t *value;

	json_object_foreach(src, key, value)
	{
		json_t *old = json_object_get(dst, key);

		if (json_is_object(old) && json_is_object(value)) {
			json_t *copy = json_deep_copy(old);

			merge(copy, value);
			json_object_set_new(dst, key, copy);
		} else {
			json_object_set_new(dst, key, json_deep_copy(value));
		}
	}
}

/* r->body for the next attempt, with the client's current choices; -1 if it cannot be encoded. */
static int attempt_body(struct ks_llm *llm, struct llm_req *r, struct ks_error *err)
{
	json_t *root = json_copy(r->base);
	int anthropic = llm->cfg.provider == KS_LLM_ANTHROPIC;

	r->sent_field = anthropic ? "max_tokens" : llm->max_field;
	r->sent_temperature = llm->cfg.has_temperature && !llm->temperature_dropped;
	json_object_set_new(root, r->sent_field, json_integer(llm->cfg.max_tokens));
	if (r->sent_temperature)
		json_object_set_new(root, "temperature", json_real(llm->cfg.temperature));
	if (llm->extra)
		merge(root, llm->extra);
	free(r->body);
	r->body = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_decref(root);
	if (!r->body)
		return ks_fail(err, "LLM request: cannot encode the body as JSON");
	return 0;
}

/* Why submit would refuse now (-1 and err), or 0. */
static int blocked(const struct ks_llm *llm, struct ks_error *err)
{
	const struct ks_llm_config *cfg = &llm->cfg;
	double left = ks_llm_pause_left(llm);
	uint64_t tokens = llm->usage.prompt_tokens + llm->usage.completion_tokens;

	if (cfg->budget_tokens && tokens >= cfg->budget_tokens)
		return ks_fail(err,
			       "the LLM token budget is spent: %llu of %llu tokens used "
			       "(--llm-budget-tokens)",
			       (unsigned long long)tokens, (unsigned long long)cfg->budget_tokens);
	if (cfg->budget_usd > 0 && llm->usage.cost_usd >= cfg->budget_usd)
		return ks_fail(err,
			       "the LLM cost budget is spent: $%.4f of $%.4f used "
			       "(--llm-budget-usd)",
			       llm->usage.cost_usd, cfg->budget_usd);
	if (left > 0)
		return ks_fail(err, "the LLM side is paused for another %.0f s after %s", ceil(left),
			       llm->pause_reason ? llm->pause_reason : "failures");
	return 0;
}

int ks_llm_available(struct ks_llm *llm, struct ks_error *err)
{
	return blocked(llm, err);
}

int ks_llm_submit(struct ks_llm *llm, const struct ks_llm_request *req, uint64_t tag, struct ks_error *err)
{
	struct llm_req *r, **tail;
	json_t *base;

	if (blocked(llm, err))
		return -1;
	if (!req || !req->user)
		return ks_fail(err, "LLM request without a user prompt");
	if (!req->assistant != !req->followup)
		return ks_fail(err, "LLM repair request: give both the earlier answer and the "
				    "follow-up prompt, or neither");
	base = build_base(&llm->cfg, req, err);
	if (!base)
		return -1;
	r = ks_calloc(1, sizeof(*r));
	r->tag = tag;
	r->base = base;
	ks_strbuf_init(&r->answer);
	r->submitted_at = now_s();
	r->ready_at = r->submitted_at;
	for (tail = &llm->reqs; *tail; tail = &(*tail)->next)
		;
	*tail = r;
	llm->n_reqs++;
	return 0;
}

/* ---- transfers ---- */

static size_t on_answer_data(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct llm_req *r = userdata;
	size_t n = size * nmemb;

	if (r->answer.len + n > ANSWER_MAX) {
		r->answer_too_large = 1;
		return 0;
	}
	ks_strbuf_add(&r->answer, data, n);
	return n;
}

static long to_ms(double seconds)
{
	double ms = ceil(seconds * 1000);

	return ms < 1 ? 1 : ms > LONG_MAX / 2 ? LONG_MAX / 2 : (long)ms;
}

static CURL *make_easy(struct ks_llm *llm, struct llm_req *r, struct ks_error *err)
{
	CURL *easy = curl_easy_init();
	CURLcode rc = CURLE_OK;

	if (!easy) {
		ks_fail(err, "libcurl: cannot create a transfer");
		return NULL;
	}
#define SET(opt, val)                                                                                        \
	if (rc == CURLE_OK)                                                                                  \
	rc = curl_easy_setopt(easy, opt, val)
	SET(CURLOPT_URL, llm->url);
	SET(CURLOPT_POST, 1L);
	SET(CURLOPT_HTTPHEADER, llm->headers);
	SET(CURLOPT_WRITEFUNCTION, on_answer_data);
	SET(CURLOPT_WRITEDATA, r);
	SET(CURLOPT_PRIVATE, (void *)r);
	SET(CURLOPT_ERRORBUFFER, r->curl_error);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, to_ms(llm->cfg.connect_timeout_s));
	SET(CURLOPT_TIMEOUT_MS, to_ms(llm->cfg.total_timeout_s));
	SET(CURLOPT_ACCEPT_ENCODING, "");
	SET(CURLOPT_USERAGENT, "ksearch/" KS_VERSION);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	/* a reasoning model is silent for minutes: keep idle-connection reapers away */
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, 60L);
	SET(CURLOPT_TCP_KEEPINTVL, 30L);
#undef SET
	if (rc != CURLE_OK) {
		curl_easy_cleanup(easy);
		ks_fail(err, "libcurl: setting up a transfer: %s", curl_easy_strerror(rc));
		return NULL;
	}
	return easy;
}

static int start_attempt(struct ks_llm *llm, struct llm_req *r, struct ks_error *err)
{
	CURLMcode mc;

	if (!r->easy) {
		r->easy = make_easy(llm, r, err);
		if (!r->easy)
			return -1;
	}
	if (attempt_body(llm, r, err))
		return -1;
	if (curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->body)) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body) != CURLE_OK)
		return ks_fail(err, "libcurl: cannot set the request body");
	ks_strbuf_release(&r->answer);
	ks_strbuf_init(&r->answer);
	r->answer_too_large = 0;
	r->curl_error[0] = '\0';
	mc = curl_multi_add_handle(llm->multi, r->easy);
	if (mc != CURLM_OK)
		return ks_fail(err, "libcurl: starting a transfer: %s", curl_multi_strerror(mc));
	r->running = 1;
	r->attempts++;
	r->attempt_started = now_s();
	llm->n_running++;
	llm->usage.attempts++;
	return 0;
}

/* Backoff before retry number `retry` (1, 2, ...): uniform in [base, min(max, base * 2^retry)]. */
static double backoff_delay(struct ks_llm *llm, int retry)
{
	double base = llm->cfg.backoff_base_s, cap;

	cap = base * ldexp(1.0, retry > 60 ? 60 : retry);
	if (cap > llm->cfg.backoff_max_s)
		cap = llm->cfg.backoff_max_s;
	return base + (cap - base) * ks_pcg32_double(&llm->jitter);
}

static void push_done(struct ks_llm *llm, struct ks_llm_response *resp)
{
	struct done *d = ks_calloc(1, sizeof(*d));

	d->resp = *resp;
	if (llm->done_tail)
		llm->done_tail->next = d;
	else
		llm->done_head = d;
	llm->done_tail = d;
	llm->n_done++;
}

static void unlink_req(struct ks_llm *llm, struct llm_req *r)
{
	struct llm_req **p;

	for (p = &llm->reqs; *p; p = &(*p)->next) {
		if (*p == r) {
			*p = r->next;
			llm->n_reqs--;
			return;
		}
	}
}

static void free_req(struct ks_llm *llm, struct llm_req *r)
{
	if (r->easy) {
		if (r->running)
			curl_multi_remove_handle(llm->multi, r->easy);
		curl_easy_cleanup(r->easy);
	}
	json_decref(r->base);
	free(r->body);
	free(r->last_error);
	ks_strbuf_release(&r->answer);
	free(r);
}

static void enter_pause(struct ks_llm *llm, const char *last_error)
{
	free(llm->pause_reason);
	llm->pause_reason = ks_asprintf("%d failed request%s in a row (last: %s)", llm->consecutive_failures,
					llm->consecutive_failures == 1 ? "" : "s", last_error);
	llm->paused_until = now_s() + llm->cfg.pause_s;
	llm->usage.pauses++;
	/* half-open: the first failure after the pause pauses again */
	llm->consecutive_failures = llm->cfg.pause_after - 1;
}

/*
 * Hand r back as a response: resp carries the answer fields (ok/text/usage)
 * or error (malloc'd, not yet redacted).  count_failure: whether this
 * failure is evidence about the endpoint (it is not when the request was
 * dropped by a pause or a budget).
 */
static void finish(struct ks_llm *llm, struct llm_req *r, struct ks_llm_response *resp, char *error,
		   int count_failure)
{
	uint64_t tokens;

	resp->tag = r->tag;
	resp->http_status = r->last_status;
	resp->attempts = r->attempts;
	resp->latency_s = r->latency_s;
	resp->elapsed_s = now_s() - r->submitted_at;
	resp->text = redact(llm, resp->text, 1);
	resp->stop_reason = redact(llm, resp->stop_reason, 1);
	llm->usage.requests++;
	llm->usage.prompt_tokens += resp->prompt_tokens;
	llm->usage.completion_tokens += resp->completion_tokens;
	llm->usage.reasoning_tokens += resp->reasoning_tokens;
	llm->usage.cached_tokens += resp->cached_tokens;
	llm->usage.cache_write_tokens += resp->cache_write_tokens;
	llm->usage.cut_off += resp->cut_off;
	llm->usage.cost_usd += resp->cost_usd;
	if (resp->ok) {
		llm->usage.succeeded++;
		llm->consecutive_failures = 0;
	} else {
		resp->error = redact(llm, error, 0);
		llm->usage.failed++;
		if (count_failure && !ks_llm_paused(llm)) {
			llm->consecutive_failures++;
			if (llm->cfg.pause_after > 0 && llm->consecutive_failures >= llm->cfg.pause_after)
				enter_pause(llm, resp->error);
		}
	}
	tokens = llm->usage.prompt_tokens + llm->usage.completion_tokens;
	llm->usage.tokens_exhausted = llm->cfg.budget_tokens && tokens >= llm->cfg.budget_tokens;
	llm->usage.usd_exhausted = llm->cfg.budget_usd > 0 && llm->usage.cost_usd >= llm->cfg.budget_usd;
	push_done(llm, resp);
	unlink_req(llm, r);
	free_req(llm, r);
}

static void finish_failed(struct ks_llm *llm, struct llm_req *r, char *error, int count_failure)
{
	struct ks_llm_response resp;

	memset(&resp, 0, sizeof(resp));
	finish(llm, r, &resp, error, count_failure);
}

/* Printable, single-line, at most SERVER_TEXT_MAX bytes of s. */
static char *clean_text(const char *s, size_t len)
{
	struct ks_strbuf sb;
	size_t n = len > SERVER_TEXT_MAX ? SERVER_TEXT_MAX : len;

	ks_strbuf_init(&sb);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		ks_strbuf_add(&sb, c < 0x20 || c == 0x7f ? " " : (const char *)&s[i], 1);
	}
	while (sb.len && sb.buf[sb.len - 1] == ' ')
		sb.buf[--sb.len] = '\0';
	if (n < len)
		ks_strbuf_adds(&sb, "...");
	return ks_strbuf_detach(&sb);
}

/* The message in an error body ({"error": {"message": ...}} and kin), or its start. */
static char *server_text(const char *body, size_t len)
{
	json_t *root = json_loadb(body, len, 0, NULL), *error;
	const char *message = NULL;
	char *out;

	if (json_is_object(root)) {
		error = json_object_get(root, "error");
		if (json_is_object(error))
			message = json_string_value(json_object_get(error, "message"));
		else
			message = json_string_value(error);
		if (!message)
			message = json_string_value(json_object_get(root, "message"));
		if (!message)
			message = json_string_value(json_object_get(root, "detail"));
	}
	out = message ? clean_text(message, strlen(message)) : clean_text(body, len);
	json_decref(root);
	return out;
}

/* A word of text: not inside a longer identifier. */
static int has_word(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; (p = strstr(p, word)); p++) {
		int before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
		int after = !(isalnum((unsigned char)p[n]) || p[n] == '_');

		if (before && after)
			return 1;
	}
	return 0;
}

/* error.param, error.code and error.message of an error body (OpenAI's, or top-level kin). */
static void error_fields(json_t *root, const char **param, const char **code, const char **message)
{
	json_t *error = json_object_get(root, "error");

	if (!json_is_object(error))
		error = root;
	*param = json_string_value(json_object_get(error, "param"));
	*code = json_string_value(json_object_get(error, "code"));
	*message = json_string_value(json_object_get(error, "message"));
	if (!*message)
		*message = json_string_value(json_object_get(root, "message"));
	if (!*message)
		*message = json_string_value(json_object_get(root, "detail"));
}

/* The hint for a 400 that names a field of --llm-extra (malloc'd), or NULL. */
static char *extra_field_named(struct ks_llm *llm, struct llm_req *r)
{
	json_t *root = json_loadb(r->answer.buf, r->answer.len, 0, NULL), *value;
	const char *param, *code, *message, *key;
	char *hint = NULL;

	if (!llm->extra || !json_is_object(root)) {
		json_decref(root);
		return NULL;
	}
	error_fields(root, &param, &code, &message);
	json_object_foreach(llm->extra, key, value)
	{
		if ((param && !strcmp(param, key)) || (message && has_word(message, key))) {
			hint = ks_asprintf(
				" (\"%s\" comes from --llm-extra / KSEARCH_LLM_EXTRA: this endpoint "
				"does not take it)",
				key);
			break;
		}
	}
	json_decref(root);
	return hint;
}

/*
 * Which of names[0..n) the error body says the endpoint does not support:
 * its index, or -1.  OpenAI names it in error.param with a code saying so;
 * other servers (request validation errors) only in the message.
 */
static int refused_param(const char *body, size_t len, const char *const *names, size_t n)
{
	static const char *const codes[] = { "unsupported_parameter", "unsupported_value",
					     "unknown_parameter" };
	static const char *const words[] = { "unsupported",   "not supported",	 "does not support",
					     "unknown",	      "unrecognized",	 "unrecognised",
					     "not permitted", "extra_forbidden", "not allowed" };
	json_t *root = json_loadb(body, len, 0, NULL);
	const char *param = NULL, *code = NULL, *message = NULL;
	int refused = 0, found = -1;

	if (json_is_object(root))
		error_fields(root, &param, &code, &message);
	for (size_t i = 0; code && i < sizeof(codes) / sizeof(codes[0]); i++)
		refused |= !strcmp(code, codes[i]);
	for (size_t i = 0; message && i < sizeof(words) / sizeof(words[0]); i++)
		refused |= strcasestr(message, words[i]) != NULL;
	for (size_t i = 0; refused && found < 0 && i < n; i++)
		if (param ? !strcmp(param, names[i]) : message && has_word(message, names[i]))
			found = (int)i;
	json_decref(root);
	return found;
}

static void push_notice(struct ks_llm *llm, char *text)
{
	struct notice *n = ks_calloc(1, sizeof(*n));

	n->text = redact(llm, text, 0);
	*llm->notices_tail = n;
	llm->notices_tail = &n->next;
	llm->usage.adaptations++;
}

/*
 * The endpoint refused a parameter the client chose: change it for the run
 * and resend r at once (1), or leave the failure as it is (0).
 */
static int adapt(struct ks_llm *llm, struct llm_req *r, long status)
{
	const char *names[2], *other;
	size_t n = 0;
	int which;
	char *said;

	if (llm->cfg.provider != KS_LLM_OPENAI || (status != 400 && status != 422) ||
	    r->adapt_retries >= ADAPT_MAX)
		return 0;
	names[n++] = r->sent_field;
	if (r->sent_temperature)
		names[n++] = "temperature";
	which = refused_param(r->answer.buf, r->answer.len, names, n);
	if (which < 0)
		return 0;
	said = server_text(r->answer.buf, r->answer.len);
	if (!strcmp(names[which], "temperature")) {
		if (!llm->temperature_dropped)
			push_notice(llm,
				    ks_asprintf("the endpoint refused temperature %g (HTTP %ld: %s): "
						"requests carry no temperature from now on, so the model "
						"uses its default",
						llm->cfg.temperature, status, said));
		llm->temperature_dropped = 1;
	} else if (!strcmp(llm->max_field, r->sent_field)) {
		if (llm->max_field_changed) {
			/* moved once already: the endpoint takes neither, and says so */
			free(said);
			return 0;
		}
		other = strcmp(r->sent_field, "max_tokens") ? "max_tokens" : "max_completion_tokens";
		push_notice(llm, ks_asprintf("the endpoint refused '%s' (HTTP %ld: %s): the answer budget "
					     "(%d tokens) goes in '%s' from now on",
					     r->sent_field, status, said, llm->cfg.max_tokens, other));
		llm->max_field = other;
		llm->max_field_changed = 1;
	}
	free(said);
	r->adapt_retries++;
	return 1;
}

static char *http_error(struct ks_llm *llm, struct llm_req *r, long status)
{
	char *text = server_text(r->answer.buf, r->answer.len);
	char *hint = NULL, *msg;

	if ((status == 401 || status == 403) && llm->cfg.api_key && *llm->cfg.api_key)
		hint = ks_asprintf(" (is the API key in %s right for this endpoint%s?)",
				   ks_llm_key_env_name(llm->cfg.provider),
				   llm->cfg.n_headers ? ", and are the --llm-header values" : "");
	else if (status == 401 || status == 403)
		hint = ks_asprintf(" (no API key was sent: set %s, or give the header the endpoint wants "
				   "with --llm-header)",
				   ks_llm_key_env_name(llm->cfg.provider));
	else if (status == 404)
		hint = ks_asprintf(" (is model '%s' served there, and is the URL right?)", llm->cfg.model);
	else if (status == 400 || status == 422)
		hint = extra_field_named(llm, r);
	msg = ks_asprintf("POST %s: HTTP %ld%s%s%s", llm->url, status, *text ? ": " : "", text,
			  hint ? hint : "");
	free(hint);
	free(text);
	return msg;
}

static int curl_code_retryable(CURLcode code)
{
	switch (code) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

static uint64_t json_count(json_t *obj, const char *name, int *present)
{
	json_t *v = json_object_get(obj, name);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return 0;
	*present = 1;
	return (uint64_t)json_integer_value(v);
}

char *ks_llm_strip_think(const char *text, size_t *reasoning_bytes)
{
	const char *p = text, *open, *close;
	struct ks_strbuf out;
	size_t removed = 0;

	open = strstr(p, "<think>");
	close = strstr(p, "</think>");
	/* the template opened the block: the reply starts inside it */
	if (close && (!open || close < open)) {
		removed += (size_t)(close - p) + 8;
		p = close + 8;
	}
	ks_strbuf_init(&out);
	while ((open = strstr(p, "<think>"))) {
		ks_strbuf_add(&out, p, (size_t)(open - p));
		close = strstr(open + 7, "</think>");
		if (!close) {
			/* cut off while thinking: the rest is reasoning */
			removed += strlen(open);
			p = open + strlen(open);
			break;
		}
		removed += (size_t)(close - open) + 8;
		p = close + 8;
	}
	ks_strbuf_adds(&out, p);
	*reasoning_bytes = removed;
	if (removed) {
		size_t lead = strspn(out.buf ? out.buf : "", " \t\r\n");
		char *answer = ks_strdup((out.buf ? out.buf : "") + lead);

		ks_strbuf_release(&out);
		return answer;
	}
	ks_strbuf_release(&out);
	return ks_strdup(text);
}

static double cost_of(const struct ks_llm_price *price, const struct ks_llm_response *resp)
{
	double cached_price =
		price->cached_input_per_mtok >= 0 ? price->cached_input_per_mtok : price->input_per_mtok;
	double write_price =
		price->cache_write_per_mtok >= 0 ? price->cache_write_per_mtok : price->input_per_mtok;
	uint64_t cached = resp->cached_tokens, written = resp->cache_write_tokens, plain = 0;

	if (cached > resp->prompt_tokens)
		cached = resp->prompt_tokens;
	if (written > resp->prompt_tokens - cached)
		written = resp->prompt_tokens - cached;
	plain = resp->prompt_tokens - cached - written;
	return ((double)plain * price->input_per_mtok + (double)cached * cached_price +
		(double)written * write_price + (double)resp->completion_tokens * price->output_per_mtok) /
	       1e6;
}

/*
 * Read a 2xx answer into resp (ok, text, stop reason, usage, reasoning);
 * on failure return a message (malloc'd).
 */
static char *read_answer(struct ks_llm *llm, struct llm_req *r, struct ks_llm_response *resp)
{
	json_error_t jerr;
	json_t *root, *usage;
	char *msg = NULL, *raw = NULL;
	int have_prompt = 0, have_completion = 0, have_reasoning = 0, unused = 0;
	size_t reasoning_bytes = 0, think_bytes = 0;

	root = json_loadb(r->answer.buf, r->answer.len, 0, &jerr);
	if (!root) {
		char *near = clean_text(jerr.text, strlen(jerr.text));

		msg = ks_asprintf("POST %s: HTTP %ld but the answer is not valid JSON (%zu bytes; "
				  "truncated or not an LLM endpoint?): %s",
				  llm->url, r->last_status, r->answer.len, near);
		free(near);
		return msg;
	}
	if (!json_is_object(root)) {
		msg = ks_asprintf("POST %s: HTTP %ld but the answer is not a JSON object", llm->url,
				  r->last_status);
		goto cleanup;
	}
	usage = json_object_get(root, "usage");
	if (llm->cfg.provider == KS_LLM_ANTHROPIC) {
		json_t *content = json_object_get(root, "content"), *block;
		struct ks_strbuf text;
		size_t i;

		if (!json_is_array(content)) {
			char *why = server_text(r->answer.buf, r->answer.len);

			msg = ks_asprintf("POST %s: HTTP %ld but the answer has no \"content\" list: %s",
					  llm->url, r->last_status, why);
			free(why);
			goto cleanup;
		}
		ks_strbuf_init(&text);
		json_array_foreach(content, i, block)
		{
			const char *type = json_string_value(json_object_get(block, "type"));
			json_t *t = json_object_get(block, "text");

			if (type && !strcmp(type, "text") && json_is_string(t))
				ks_strbuf_add(&text, json_string_value(t), json_string_length(t));
			/* thinking is never the answer; its size is kept */
			if (type && (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking"))) {
				resp->reasoning = "thinking blocks";
				reasoning_bytes += json_string_length(json_object_get(block, "thinking"));
			}
		}
		raw = ks_strbuf_detach(&text);
		if (json_is_string(json_object_get(root, "stop_reason")))
			resp->stop_reason =
				ks_strdup(json_string_value(json_object_get(root, "stop_reason")));
		resp->cut_off = resp->stop_reason && !strcmp(resp->stop_reason, "max_tokens");
		resp->cached_tokens = json_count(usage, "cache_read_input_tokens", &unused);
		resp->cache_write_tokens = json_count(usage, "cache_creation_input_tokens", &unused);
		resp->prompt_tokens = json_count(usage, "input_tokens", &have_prompt) + resp->cached_tokens +
				      resp->cache_write_tokens;
		resp->completion_tokens = json_count(usage, "output_tokens", &have_completion);
	} else {
		json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
		json_t *message = json_object_get(choice, "message");
		json_t *content = json_object_get(message, "content");
		json_t *finish_reason = json_object_get(choice, "finish_reason");
		const char *fields[] = { "reasoning_content", "reasoning" };

		if (!json_is_object(message) ||
		    (content && !json_is_string(content) && !json_is_null(content))) {
			char *why = server_text(r->answer.buf, r->answer.len);

			msg = ks_asprintf("POST %s: HTTP %ld but the answer has no "
					  "choices[0].message.content: %s",
					  llm->url, r->last_status, why);
			free(why);
			goto cleanup;
		}
		/* content null: a refusal or only tool calls; an empty answer, not a failure */
		raw = json_is_string(content)
			      ? ks_strndup(json_string_value(content), json_string_length(content))
			      : ks_strdup("");
		/* vLLM's and SGLang's reasoning parsers: never the answer */
		for (int i = 0; i < 2; i++) {
			json_t *f = json_object_get(message, fields[i]);

			if (json_is_string(f) && json_string_length(f)) {
				resp->reasoning = fields[i];
				reasoning_bytes += json_string_length(f);
				break;
			}
		}
		if (json_is_string(finish_reason))
			resp->stop_reason = ks_strdup(json_string_value(finish_reason));
		resp->cut_off = resp->stop_reason && !strcmp(resp->stop_reason, "length");
		resp->prompt_tokens = json_count(usage, "prompt_tokens", &have_prompt);
		resp->completion_tokens = json_count(usage, "completion_tokens", &have_completion);
		resp->cached_tokens =
			json_count(json_object_get(usage, "prompt_tokens_details"), "cached_tokens", &unused);
		resp->reasoning_tokens = json_count(json_object_get(usage, "completion_tokens_details"),
						    "reasoning_tokens", &have_reasoning);
	}
	resp->text = ks_llm_strip_think(raw, &think_bytes);
	if (think_bytes) {
		resp->reasoning = "<think>";
		reasoning_bytes += think_bytes;
	}
	if (have_reasoning && resp->reasoning_tokens && !resp->reasoning)
		resp->reasoning = "hidden";
	if (!have_completion || !have_prompt) {
		resp->usage_estimated = 1;
		if (!have_prompt)
			resp->prompt_tokens = strlen(r->body) / 4;
		if (!have_completion)
			resp->completion_tokens = (strlen(resp->text) + reasoning_bytes) / 4;
	}
	if (!have_reasoning && reasoning_bytes) {
		resp->reasoning_tokens = reasoning_bytes / 4;
		resp->reasoning_estimated = 1;
	}
	if (resp->reasoning_tokens > resp->completion_tokens)
		resp->reasoning_tokens = resp->completion_tokens;
	if (llm->cfg.has_price)
		resp->cost_usd = cost_of(&llm->cfg.price, resp);
	resp->ok = 1;
cleanup:
	free(raw);
	json_decref(root);
	return msg;
}

static void attempt_done(struct ks_llm *llm, struct llm_req *r, CURLcode code)
{
	struct ks_llm_response resp;
	curl_off_t retry_after = 0;
	long status = 0;
	int retryable;
	char *error;

	curl_multi_remove_handle(llm->multi, r->easy);
	r->running = 0;
	llm->n_running--;
	r->latency_s = now_s() - r->attempt_started;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	r->last_status = status;
	memset(&resp, 0, sizeof(resp));
	if (code != CURLE_OK) {
		if (r->answer_too_large)
			error = ks_asprintf("POST %s: the answer is larger than %zu MiB", llm->url,
					    ANSWER_MAX >> 20);
		else
			error = ks_asprintf("POST %s: %s", llm->url,
					    r->curl_error[0] ? r->curl_error : curl_easy_strerror(code));
		retryable = curl_code_retryable(code) && !r->answer_too_large;
	} else if (status >= 200 && status < 300) {
		error = read_answer(llm, r, &resp);
		if (!error) {
			finish(llm, r, &resp, NULL, 0);
			return;
		}
		ks_llm_response_release(&resp);
		retryable = 0;
	} else if (adapt(llm, r, status)) {
		r->ready_at = now_s();
		return;
	} else {
		error = http_error(llm, r, status);
		retryable = status == 408 || status == 429 || (status >= 500 && status <= 599);
		curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &retry_after);
	}
	free(r->last_error);
	r->last_error = error;
	if (retryable && r->attempts - r->adapt_retries <= llm->cfg.max_retries) {
		double delay = retry_after > 0 ? (double)retry_after : backoff_delay(llm, r->attempts);

		r->ready_at = now_s() + (delay > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : delay);
		return;
	}
	r->last_error = NULL;
	if (r->attempts > 1) {
		char *more = ks_asprintf("%s (gave up after %d attempts)", error, r->attempts);

		free(error);
		error = more;
	}
	finish_failed(llm, r, error, 1);
}

/* While paused or out of budget, requests not in flight come back failed. */
static void drop_blocked(struct ks_llm *llm)
{
	struct ks_error why;
	struct llm_req *r, *next;

	if (!blocked(llm, &why))
		return;
	for (r = llm->reqs; r; r = next) {
		next = r->next;
		if (r->running)
			continue;
		if (r->last_error)
			finish_failed(llm, r, ks_asprintf("%s; not retried: %s", r->last_error, why.msg), 0);
		else
			finish_failed(llm, r, ks_asprintf("not sent: %s", why.msg), 0);
	}
}

static int start_ready(struct ks_llm *llm, struct ks_error *err)
{
	double t = now_s();

	for (struct llm_req *r = llm->reqs; r; r = r->next) {
		if (llm->n_running >= (size_t)llm->cfg.concurrency)
			break;
		if (!r->running && r->ready_at <= t && start_attempt(llm, r, err))
			return -1;
	}
	return 0;
}

static void collect_finished(struct ks_llm *llm)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(llm->multi, &left))) {
		void *priv = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		attempt_done(llm, priv, msg->data.result);
	}
}

/* Seconds until the next waiting request may start; INFINITY if none can. */
static double next_start_in(const struct ks_llm *llm)
{
	double t = now_s(), next = INFINITY;

	if (llm->n_running >= (size_t)llm->cfg.concurrency)
		return INFINITY;
	for (const struct llm_req *r = llm->reqs; r; r = r->next)
		if (!r->running && r->ready_at - t < next)
			next = r->ready_at - t;
	return next < 0 ? 0 : next;
}

static int pop_done(struct ks_llm *llm, struct ks_llm_response *out)
{
	struct done *d = llm->done_head;

	if (!d)
		return 0;
	llm->done_head = d->next;
	if (!llm->done_head)
		llm->done_tail = NULL;
	llm->n_done--;
	*out = d->resp;
	free(d);
	return 1;
}

int ks_llm_poll(struct ks_llm *llm, int timeout_ms, struct ks_llm_response *out, int *got,
		struct ks_error *err)
{
	double deadline = timeout_ms < 0 ? INFINITY : now_s() + timeout_ms / 1000.0;

	memset(out, 0, sizeof(*out));
	*got = 0;
	for (;;) {
		CURLMcode mc;
		double wait;
		int running;

		if (pop_done(llm, out)) {
			*got = 1;
			return 0;
		}
		drop_blocked(llm);
		if (llm->done_head)
			continue;
		if (start_ready(llm, err))
			return -1;
		mc = curl_multi_perform(llm->multi, &running);
		if (mc != CURLM_OK)
			return ks_fail(err, "libcurl: %s", curl_multi_strerror(mc));
		collect_finished(llm);
		if (llm->done_head)
			continue;
		if (!llm->reqs)
			return 0;
		wait = deadline - now_s();
		if (wait <= 0)
			return 0;
		if (next_start_in(llm) < wait)
			wait = next_start_in(llm);
		/* curl_multi_poll also wakes for curl's own timers */
		mc = curl_multi_poll(llm->multi, NULL, 0, wait > 60 ? 60000 : (int)ceil(wait * 1000), NULL);
		if (mc != CURLM_OK)
			return ks_fail(err, "libcurl: %s", curl_multi_strerror(mc));
	}
}

/* ---- the client ---- */

static int curl_global_ready;

int ks_llm_open(struct ks_llm **out, const struct ks_llm_config *cfg, struct ks_error *err)
{
	struct ks_llm *llm;
	const char *path;
	char *header;
	size_t base_len;

	*out = NULL;
	if (ks_llm_config_validate(cfg, err))
		return -1;
	if (!curl_global_ready) {
		CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);

		if (rc != CURLE_OK)
			return ks_fail(err, "libcurl: %s", curl_easy_strerror(rc));
		curl_global_ready = 1;
	}
	llm = ks_calloc(1, sizeof(*llm));
	config_copy(&llm->cfg, cfg);
	llm->max_field = "max_completion_tokens";
	llm->notices_tail = &llm->notices;
	llm->extra = cfg->extra ? json_loads(cfg->extra, 0, NULL) : NULL;
	base_len = strlen(cfg->base_url);
	while (base_len && cfg->base_url[base_len - 1] == '/')
		base_len--;
	path = cfg->provider == KS_LLM_ANTHROPIC ? "/messages" : "/chat/completions";
	llm->url = ks_asprintf("%.*s%s", (int)base_len, cfg->base_url, path);

	llm->headers = curl_slist_append(NULL, "Content-Type: application/json");
	/* no "Expect: 100-continue" round trip for large prompts */
	llm->headers = curl_slist_append(llm->headers, "Expect:");
	if (cfg->provider == KS_LLM_ANTHROPIC)
		llm->headers = curl_slist_append(llm->headers, "anthropic-version: " ANTHROPIC_VERSION);
	if (cfg->api_key && *cfg->api_key) {
		header = cfg->provider == KS_LLM_ANTHROPIC
				 ? ks_asprintf("x-api-key: %s", cfg->api_key)
				 : ks_asprintf("Authorization: Bearer %s", cfg->api_key);
		llm->headers = curl_slist_append(llm->headers, header);
		wipe_free(header);
	}
	for (size_t i = 0; i < cfg->n_headers; i++)
		llm->headers = curl_slist_append(llm->headers, cfg->headers[i]);
	llm->multi = curl_multi_init();
	if (!llm->headers || !llm->multi) {
		ks_llm_close(llm);
		return ks_fail(err, "libcurl: cannot set up the LLM client");
	}
	ks_pcg32_seed(&llm->jitter, cfg->jitter_seed, JITTER_STREAM);
	*out = llm;
	return 0;
}

void ks_llm_close(struct ks_llm *llm)
{
	struct ks_llm_response resp;

	if (!llm)
		return;
	while (llm->reqs) {
		struct llm_req *r = llm->reqs;

		llm->reqs = r->next;
		free_req(llm, r);
	}
	while (pop_done(llm, &resp))
		ks_llm_response_release(&resp);
	if (llm->multi)
		curl_multi_cleanup(llm->multi);
	for (struct curl_slist *h = llm->headers; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
	curl_slist_free_all(llm->headers);
	free(llm->url);
	free(llm->pause_reason);
	while (llm->notices) {
		struct notice *n = llm->notices;

		llm->notices = n->next;
		free(n->text);
		free(n);
	}
	json_decref(llm->extra);
	ks_llm_config_release(&llm->cfg);
	free(llm);
}

char *ks_llm_take_notice(struct ks_llm *llm)
{
	struct notice *n = llm->notices;
	char *text;

	if (!n)
		return NULL;
	llm->notices = n->next;
	if (!llm->notices)
		llm->notices_tail = &llm->notices;
	text = n->text;
	free(n);
	return text;
}

const char *ks_llm_max_tokens_field(const struct ks_llm *llm)
{
	return llm->cfg.provider == KS_LLM_ANTHROPIC ? "max_tokens" : llm->max_field;
}

int ks_llm_sends_temperature(const struct ks_llm *llm)
{
	return llm->cfg.has_temperature && !llm->temperature_dropped;
}

void ks_llm_response_release(struct ks_llm_response *resp)
{
	free(resp->text);
	free(resp->stop_reason);
	free(resp->error);
	memset(resp, 0, sizeof(*resp));
}

size_t ks_llm_pending(const struct ks_llm *llm)
{
	return llm->n_reqs + llm->n_done;
}

size_t ks_llm_in_flight(const struct ks_llm *llm)
{
	return llm->n_running;
}

double ks_llm_pause_left(const struct ks_llm *llm)
{
	double left = llm->paused_until - now_s();

	return llm->paused_until > 0 && left > 0 ? left : 0;
}

int ks_llm_paused(const struct ks_llm *llm)
{
	return ks_llm_pause_left(llm) > 0;
}

void ks_llm_usage(const struct ks_llm *llm, struct ks_llm_usage *usage)
{
	*usage = llm->usage;
}
