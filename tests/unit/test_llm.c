/*
 * test_llm.c - the LLM client against tools/fake-llm (started per test as
 * a child process): request bodies and headers of both protocols, usage,
 * cost and budgets, retries (Retry-After, backoff bounds, what is and is
 * not retried), per-attempt timeouts, the concurrency limit, the pause
 * after consecutive failures, and that the API key never comes back out.
 *
 * Skips (exit 77) only when python3 is missing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/llm/llm.h"
#include "ksearch/base/util.h"
#include "fakellm.h"
#include "testlib.h"

/* distinctive, so that a leak anywhere is found by strstr */
#define KEY "sk-ksearch-TEST-7f3a9c1e5b2d"

static const char *rec_header(json_t *rec, const char *name)
{
	return json_string_value(json_object_get(json_object_get(rec, "headers"), name));
}

static void config_for(struct ks_llm_config *cfg, int port, enum ks_llm_provider provider)
{
	ks_llm_config_init(cfg);
	cfg->provider = provider;
	cfg->base_url = ks_asprintf("http://127.0.0.1:%d/v1", port);
	cfg->model = ks_strdup("fake-model");
	cfg->api_key = ks_strdup(KEY);
	cfg->temperature = 0.5;
	cfg->has_temperature = 1;
	cfg->max_tokens = 1234;
	cfg->connect_timeout_s = 2;
	cfg->total_timeout_s = 10;
	cfg->max_retries = 0;
	cfg->backoff_base_s = 0.01;
	cfg->backoff_max_s = 0.02;
	cfg->pause_after = 0;
	cfg->jitter_seed = 42;
}

static struct ks_llm *open_llm(const struct ks_llm_config *cfg)
{
	struct ks_llm *llm;
	struct ks_error err;

	if (ks_llm_open(&llm, cfg, &err))
		fail_msg("ks_llm_open: %s", err.msg);
	return llm;
}

static void submit(struct ks_llm *llm, const char *system, const char *user, uint64_t tag)
{
	struct ks_llm_request req = { .system = system, .user = user };
	struct ks_error err;

	if (ks_llm_submit(llm, &req, tag, &err))
		fail_msg("ks_llm_submit: %s", err.msg);
}

/* Poll until one response comes back (at most 20 s). */
static void wait_one(struct ks_llm *llm, struct ks_llm_response *resp)
{
	double deadline = now_s() + 20;
	struct ks_error err;
	int got = 0;

	while (!got) {
		if (ks_llm_poll(llm, 200, resp, &got, &err))
			fail_msg("ks_llm_poll: %s", err.msg);
		if (!got && now_s() > deadline)
			fail_msg("no response within 20 s");
	}
}

/* One request on a fresh client; the caller releases resp. */
static void ask_once(const struct ks_llm_config *cfg, struct ks_llm_response *resp)
{
	struct ks_llm *llm = open_llm(cfg);

	submit(llm, "You write CUDA kernels.", "Make it faster.", 7);
	wait_one(llm, resp);
	assert_int_equal(ks_llm_pending(llm), 0);
	ks_llm_close(llm);
}

static void assert_no_key(const char *s)
{
	if (s && strstr(s, KEY))
		fail_msg("the API key leaked into: %s", s);
}

static void assert_response_keyless(const struct ks_llm_response *resp)
{
	assert_no_key(resp->text);
	assert_no_key(resp->stop_reason);
	assert_no_key(resp->error);
}

/* A port on 127.0.0.1 that nothing listens on (bound, then closed). */
static int closed_port(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	close(fd);
	return ntohs(addr.sin_port);
}

/* ---- configuration ---- */

static void test_config_validation_names_the_setting(void **state)
{
	struct ks_llm_config cfg;
	struct ks_error err;

	(void)state;
	ks_llm_config_init(&cfg);
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--llm-provider");

	config_for(&cfg, 1, KS_LLM_OPENAI);
	assert_int_equal(ks_llm_config_validate(&cfg, &err), 0);

	cfg.concurrency = 0;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--llm-concurrency 0");
	cfg.concurrency = 2;

	cfg.temperature = 1.5;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), 0);
	cfg.provider = KS_LLM_ANTHROPIC;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--temperature 1.5: expected 0 to 1 for anthropic");
	cfg.temperature = 0.5;

	cfg.max_tokens = 0;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--max-tokens");
	cfg.max_tokens = 100;

	cfg.backoff_max_s = 0.001;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "backoff maximum");
	cfg.backoff_max_s = 1;

	cfg.budget_usd = 2;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--llm-budget-usd needs the price of model 'fake-model'");
	cfg.has_price = 1;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), 0);

	free(cfg.base_url);
	cfg.base_url = ks_strdup("ftp://example.com/" KEY);
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--llm-url");
	assert_contains(err.msg, "<redacted>");
	assert_no_key(err.msg);
	free(cfg.base_url);
	cfg.base_url = ks_strdup("http://127.0.0.1:1/v1");

	free(cfg.api_key);
	cfg.api_key = ks_strdup(KEY "\r\nX-Evil: 1");
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "control character");
	assert_no_key(err.msg);

	free(cfg.model);
	cfg.model = NULL;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "KSEARCH_LLM_MODEL");
	ks_llm_config_release(&cfg);
	assert_null(cfg.api_key);
}

static void test_config_from_env_command_line_wins(void **state)
{
	struct ks_llm_config cfg;
	struct ks_error err;

	(void)state;
	unsetenv("KSEARCH_API_KEY");
	unsetenv("KSEARCH_LLM_URL");
	setenv("KSEARCH_LLM_PROVIDER", "anthropic", 1);
	setenv("KSEARCH_LLM_MODEL", "env-model", 1);
	setenv("OPENAI_API_KEY", "openai-key", 1);
	setenv("ANTHROPIC_API_KEY", "anthropic-key", 1);

	ks_llm_config_init(&cfg);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), 0);
	assert_int_equal(cfg.provider, KS_LLM_ANTHROPIC);
	assert_string_equal(cfg.base_url, "https://api.anthropic.com/v1");
	assert_string_equal(cfg.model, "env-model");
	assert_string_equal(cfg.api_key, "anthropic-key");
	ks_llm_config_release(&cfg);

	/* what the command line set stays; the key follows its provider */
	ks_llm_config_init(&cfg);
	cfg.provider = KS_LLM_OPENAI;
	cfg.model = ks_strdup("cli-model");
	setenv("KSEARCH_LLM_URL", "http://localhost:8000/v1", 1);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), 0);
	assert_string_equal(cfg.base_url, "http://localhost:8000/v1");
	assert_string_equal(cfg.model, "cli-model");
	assert_string_equal(cfg.api_key, "openai-key");
	setenv("KSEARCH_API_KEY", "ksearch-key", 1);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), 0);
	assert_string_equal(cfg.api_key, "ksearch-key");
	ks_llm_config_release(&cfg);

	ks_llm_config_init(&cfg);
	setenv("KSEARCH_LLM_PROVIDER", "gemini", 1);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), -1);
	assert_contains(err.msg, "KSEARCH_LLM_PROVIDER: unknown LLM provider 'gemini'");
	ks_llm_config_release(&cfg);

	unsetenv("KSEARCH_LLM_PROVIDER");
	unsetenv("KSEARCH_LLM_MODEL");
	unsetenv("KSEARCH_LLM_URL");
	unsetenv("KSEARCH_API_KEY");
	unsetenv("OPENAI_API_KEY");
	unsetenv("ANTHROPIC_API_KEY");
}

static void test_prices_file(void **state)
{
	char *dir = test_tmpdir(), path[4200];
	struct ks_llm_price price;
	struct ks_error err;
	int found;

	(void)state;
	test_write(dir, "prices.json",
		   "{\"gpt-x\": {\"input_per_mtok\": 2.5, \"output_per_mtok\": 10},\n"
		   " \"cached\": {\"input_per_mtok\": 3, \"output_per_mtok\": 15, \"cached_input_per_mtok\": "
		   "0.3,"
		   " \"cache_write_per_mtok\": 3.75},\n"
		   " \"bad-cache\": {\"input_per_mtok\": 3, \"output_per_mtok\": 15, "
		   "\"cached_input_per_mtok\": -1},\n"
		   " \"broken\": {\"input_per_mtok\": \"cheap\"}}\n");
	snprintf(path, sizeof(path), "%s/prices.json", dir);
	assert_int_equal(ks_llm_prices_load(path, "gpt-x", &price, &found, &err), 0);
	assert_int_equal(found, 1);
	assert_true(price.input_per_mtok == 2.5 && price.output_per_mtok == 10);
	/* not given: cached tokens are priced as input */
	assert_true(price.cached_input_per_mtok < 0 && price.cache_write_per_mtok < 0);
	assert_int_equal(ks_llm_prices_load(path, "cached", &price, &found, &err), 0);
	assert_true(price.cached_input_per_mtok == 0.3 && price.cache_write_per_mtok == 3.75);
	assert_int_equal(ks_llm_prices_load(path, "bad-cache", &price, &found, &err), -1);
	assert_contains(err.msg, "\"cached_input_per_mtok\" must be a number >= 0");
	assert_int_equal(ks_llm_prices_load(path, "other", &price, &found, &err), 0);
	assert_int_equal(found, 0);
	assert_int_equal(ks_llm_prices_load(path, "broken", &price, &found, &err), -1);
	assert_contains(err.msg, "model \"broken\"");
	test_write(dir, "bad.json", "{\n  \"a\": ,\n}\n");
	snprintf(path, sizeof(path), "%s/bad.json", dir);
	assert_int_equal(ks_llm_prices_load(path, "a", &price, &found, &err), -1);
	assert_contains(err.msg, "bad.json:2:");
	test_rmtree(dir);
	/* the shipped file reads, cache prices included */
	snprintf(path, sizeof(path), "%s/prompts/prices.json", source_root());
	assert_int_equal(ks_llm_prices_load(path, "claude-sonnet-4-5", &price, &found, &err), 0);
	assert_int_equal(found, 1);
	assert_true(price.cached_input_per_mtok >= 0 && price.cached_input_per_mtok < price.input_per_mtok);
	assert_true(price.cache_write_per_mtok > price.input_per_mtok);
}

static void test_submit_refuses_malformed_requests(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm *llm;
	struct ks_error err;
	struct ks_llm_request no_user = { .system = "s" };
	struct ks_llm_request half_repair = { .user = "u", .assistant = "a" };
	struct ks_llm_request bad_utf8 = { .user = "caf\xc3" };

	(void)state;
	config_for(&cfg, 1, KS_LLM_OPENAI);
	llm = open_llm(&cfg);
	assert_int_equal(ks_llm_submit(llm, &no_user, 1, &err), -1);
	assert_contains(err.msg, "without a user prompt");
	assert_int_equal(ks_llm_submit(llm, &half_repair, 1, &err), -1);
	assert_contains(err.msg, "both the earlier answer and the follow-up");
	assert_int_equal(ks_llm_submit(llm, &bad_utf8, 1, &err), -1);
	assert_contains(err.msg, "user prompt is not valid UTF-8");
	assert_int_equal(ks_llm_pending(llm), 0);
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);
}

/* ---- the protocols ---- */

static void test_openai_request_schema(void **state)
{
	struct ks_llm_request repair = {
		.system = "sys", .user = "first", .assistant = "earlier", .followup = "fix it"
	};
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;
	json_t *recs, *rec, *body, *messages;
	char expect[64];

	(void)state;
	fake_start(&fake, "[{\"reply\": \"hello ```cuda\\nint x;\\n```\"}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	llm = open_llm(&cfg);
	submit(llm, "You write CUDA kernels.", "Make it faster.", 11);
	wait_one(llm, &resp);
	assert_true(resp.ok);
	assert_int_equal(resp.tag, 11);
	assert_int_equal(resp.http_status, 200);
	assert_int_equal(resp.attempts, 1);
	assert_string_equal(resp.text, "hello ```cuda\nint x;\n```");
	assert_string_equal(resp.stop_reason, "stop");
	assert_null(resp.error);
	assert_false(resp.usage_estimated);
	/* the fake's count: every text joined by "\n", over 4 */
	assert_int_equal(resp.prompt_tokens, strlen("You write CUDA kernels.\nMake it faster.") / 4);
	assert_int_equal(resp.completion_tokens, strlen(resp.text) / 4);
	assert_true(resp.latency_s > 0 && resp.elapsed_s >= resp.latency_s);
	ks_llm_response_release(&resp);

	if (ks_llm_submit(llm, &repair, 12, &err))
		fail_msg("%s", err.msg);
	wait_one(llm, &resp);
	assert_true(resp.ok);
	ks_llm_response_release(&resp);
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);

	recs = fake_records(&fake, 2);
	assert_int_equal(json_array_size(recs), 2);
	rec = json_array_get(recs, 0);
	assert_string_equal(json_string_value(json_object_get(rec, "path")), "/v1/chat/completions");
	assert_string_equal(json_string_value(json_object_get(rec, "method")), "POST");
	snprintf(expect, sizeof(expect), "<redacted:%zu chars>", strlen("Bearer " KEY));
	assert_non_null(rec_header(rec, "authorization"));
	assert_string_equal(rec_header(rec, "authorization"), expect);
	assert_null(rec_header(rec, "x-api-key"));
	assert_string_equal(rec_header(rec, "content-type"), "application/json");
	body = json_object_get(rec, "body");
	assert_true(json_is_object(body));
	assert_int_equal(json_object_size(body), 4);
	assert_string_equal(json_string_value(json_object_get(body, "model")), "fake-model");
	assert_true(json_is_real(json_object_get(body, "temperature")));
	assert_true(json_real_value(json_object_get(body, "temperature")) == 0.5);
	/* the field OpenAI's reasoning models require, which replaced max_tokens */
	assert_null(json_object_get(body, "max_tokens"));
	assert_true(json_is_integer(json_object_get(body, "max_completion_tokens")));
	assert_int_equal(json_integer_value(json_object_get(body, "max_completion_tokens")), 1234);
	messages = json_object_get(body, "messages");
	assert_int_equal(json_array_size(messages), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 0), "role")),
			    "system");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 0), "content")),
			    "You write CUDA kernels.");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 1), "role")), "user");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 1), "content")),
			    "Make it faster.");

	messages = json_object_get(json_object_get(json_array_get(recs, 1), "body"), "messages");
	assert_int_equal(json_array_size(messages), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 2), "role")),
			    "assistant");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 2), "content")),
			    "earlier");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 3), "role")), "user");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 3), "content")),
			    "fix it");
	json_decref(recs);
	fake_stop(&fake);
}

static void test_anthropic_request_schema(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	json_t *recs, *rec, *body, *messages;
	char expect[64];

	(void)state;
	fake_start(&fake, "[{\"reply\": \"an answer\", \"finish\": \"length\"}]");
	config_for(&cfg, fake.port, KS_LLM_ANTHROPIC);
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	assert_string_equal(resp.text, "an answer");
	assert_string_equal(resp.stop_reason, "max_tokens");
	assert_int_equal(resp.prompt_tokens, strlen("You write CUDA kernels.\nMake it faster.") / 4);
	assert_int_equal(resp.completion_tokens, 2);
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);

	recs = fake_records(&fake, 1);
	assert_int_equal(json_array_size(recs), 1);
	rec = json_array_get(recs, 0);
	assert_string_equal(json_string_value(json_object_get(rec, "path")), "/v1/messages");
	snprintf(expect, sizeof(expect), "<redacted:%zu chars>", strlen(KEY));
	assert_non_null(rec_header(rec, "x-api-key"));
	assert_string_equal(rec_header(rec, "x-api-key"), expect);
	assert_null(rec_header(rec, "authorization"));
	assert_string_equal(rec_header(rec, "anthropic-version"), "2023-06-01");
	body = json_object_get(rec, "body");
	assert_int_equal(json_object_size(body), 5);
	assert_string_equal(json_string_value(json_object_get(body, "model")), "fake-model");
	assert_string_equal(json_string_value(json_object_get(body, "system")), "You write CUDA kernels.");
	assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 1234);
	assert_true(json_real_value(json_object_get(body, "temperature")) == 0.5);
	messages = json_object_get(body, "messages");
	assert_int_equal(json_array_size(messages), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 0), "role")), "user");
	assert_string_equal(json_string_value(json_object_get(json_array_get(messages, 0), "content")),
			    "Make it faster.");
	json_decref(recs);
	fake_stop(&fake);
}

static void test_no_code_answer_is_returned_as_text(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;

	(void)state;
	fake_start(&fake, "[{\"no_code\": true}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	assert_contains(resp.text, "Thank you");
	assert_null(strstr(resp.text, "```"));
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

/* ---- usage and budgets ---- */

static void test_usage_cost_and_budgets(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm_usage usage;
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;
	struct ks_llm_request req = { .user = "u" };

	(void)state;
	fake_start(&fake, "[{\"reply\": \"x\", \"usage\": {\"prompt_tokens\": 1000, "
			  "\"completion_tokens\": 500}}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.has_price = 1;
	cfg.price.input_per_mtok = 3;
	cfg.price.output_per_mtok = 15;
	cfg.budget_tokens = 2000;
	cfg.concurrency = 1;

	/* the token budget: 1500 leaves room, 3000 does not */
	llm = open_llm(&cfg);
	submit(llm, NULL, "u", 1);
	wait_one(llm, &resp);
	assert_true(resp.ok);
	assert_int_equal(resp.prompt_tokens, 1000);
	assert_int_equal(resp.completion_tokens, 500);
	assert_true(fabs(resp.cost_usd - 0.0105) < 1e-12);
	ks_llm_response_release(&resp);
	assert_int_equal(ks_llm_available(llm, &err), 0);
	/* with one slot, the second runs and the third waits: it is dropped once the budget is spent */
	submit(llm, NULL, "u", 2);
	submit(llm, NULL, "u", 3);
	wait_one(llm, &resp);
	assert_true(resp.ok);
	assert_int_equal(resp.tag, 2);
	ks_llm_response_release(&resp);
	wait_one(llm, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.tag, 3);
	assert_int_equal(resp.attempts, 0);
	assert_contains(resp.error, "not sent: the LLM token budget is spent: 3000 of 2000 tokens");
	ks_llm_response_release(&resp);
	assert_int_equal(ks_llm_submit(llm, &req, 4, &err), -1);
	assert_contains(err.msg, "token budget is spent");
	assert_contains(err.msg, "--llm-budget-tokens");
	ks_llm_usage(llm, &usage);
	assert_int_equal(usage.requests, 3);
	assert_int_equal(usage.succeeded, 2);
	assert_int_equal(usage.failed, 1);
	assert_int_equal(usage.attempts, 2);
	assert_int_equal(usage.prompt_tokens, 2000);
	assert_int_equal(usage.completion_tokens, 1000);
	assert_true(fabs(usage.cost_usd - 0.021) < 1e-12);
	assert_true(usage.tokens_exhausted);
	assert_false(usage.usd_exhausted);
	ks_llm_close(llm);

	/* the USD budget */
	cfg.budget_tokens = 0;
	cfg.budget_usd = 0.015;
	llm = open_llm(&cfg);
	submit(llm, NULL, "u", 1);
	wait_one(llm, &resp);
	ks_llm_response_release(&resp);
	assert_int_equal(ks_llm_available(llm, &err), 0);
	submit(llm, NULL, "u", 2);
	wait_one(llm, &resp);
	ks_llm_response_release(&resp);
	assert_int_equal(ks_llm_submit(llm, &req, 3, &err), -1);
	assert_contains(err.msg, "the LLM cost budget is spent: $0.0210 of $0.0150 used");
	assert_contains(err.msg, "--llm-budget-usd");
	ks_llm_usage(llm, &usage);
	assert_true(usage.usd_exhausted);
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

/* ---- retries ---- */

static double record_time(json_t *recs, size_t i)
{
	return json_number_value(json_object_get(json_array_get(recs, i), "time"));
}

static void test_retry_after_is_honoured(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	char script[256], date[64];
	time_t when;
	double start;
	json_t *recs;

	(void)state;
	/* seconds */
	fake_start(&fake, "[{\"status\": 429, \"retry_after\": 1}, {\"reply\": \"ok\"}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.max_retries = 2;
	start = now_s();
	ask_once(&cfg, &resp);
	assert_true(now_s() - start >= 1.0);
	assert_true(resp.ok);
	assert_int_equal(resp.attempts, 2);
	assert_true(resp.elapsed_s >= 1.0);
	ks_llm_response_release(&resp);
	recs = fake_records(&fake, 2);
	assert_int_equal(json_array_size(recs), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(recs, 0), "status")), 429);
	assert_true(record_time(recs, 1) - record_time(recs, 0) >= 1.0);
	json_decref(recs);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);

	/* an HTTP-date two seconds ahead (whole seconds: at least one to wait) */
	when = time(NULL) + 2;
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime(&when));
	snprintf(script, sizeof(script), "[{\"status\": 503, \"retry_after\": \"%s\"}, {\"reply\": \"ok\"}]",
		 date);
	fake_start(&fake, script);
	config_for(&cfg, fake.port, KS_LLM_ANTHROPIC);
	cfg.max_retries = 1;
	start = now_s();
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	assert_int_equal(resp.attempts, 2);
	assert_true(now_s() - start >= 0.9);
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_backoff_stays_within_bounds(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	json_t *recs;

	(void)state;
	fake_start(&fake, "[{\"status\": 500}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.max_retries = 3;
	cfg.backoff_base_s = 0.1;
	cfg.backoff_max_s = 0.25;
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_null(resp.text);
	assert_int_equal(resp.http_status, 500);
	assert_int_equal(resp.attempts, 4);
	assert_contains(resp.error, "/v1/chat/completions: HTTP 500: The server had an error");
	assert_contains(resp.error, "(gave up after 4 attempts)");
	ks_llm_response_release(&resp);
	recs = fake_records(&fake, 4);
	assert_int_equal(json_array_size(recs), 4);
	for (size_t i = 1; i < 4; i++) {
		double gap = record_time(recs, i) - record_time(recs, i - 1);

		if (gap < 0.1 || gap > 0.25 + 0.3)
			fail_msg("retry %zu came %.3f s after the previous attempt (backoff 0.1..0.25 s)", i,
				 gap);
	}
	json_decref(recs);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_connection_refused_is_retried(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;

	(void)state;
	config_for(&cfg, closed_port(), KS_LLM_OPENAI);
	cfg.max_retries = 2;
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.http_status, 0);
	assert_int_equal(resp.attempts, 3);
	assert_contains(resp.error, "POST http://127.0.0.1:");
	assert_contains(resp.error, "(gave up after 3 attempts)");
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
}

static void test_timeout_is_per_attempt(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	double start;

	(void)state;
	fake_start(&fake, "[{\"sleep\": 3, \"reply\": \"late\"}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.total_timeout_s = 0.3;
	cfg.max_retries = 1;
	start = now_s();
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.attempts, 2);
	assert_contains(resp.error, "timed out");
	assert_true(resp.latency_s >= 0.29 && resp.latency_s < 1.0);
	assert_true(now_s() - start >= 0.6 && now_s() - start < 2.0);
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_what_is_not_retried(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	const char *const hosted[] = { "--require-key", NULL };

	(void)state;
	fake_start_with(&fake,
			"[{\"status\": 401}, {\"malformed\": true}, {\"truncated\": true},"
			" {\"truncated\": \"connection\"}, {\"reply\": \"whole\"}]",
			hosted);
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.max_retries = 3;

	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.attempts, 1);
	assert_int_equal(resp.http_status, 401);
	assert_contains(resp.error, "HTTP 401: Incorrect API key provided.");
	assert_contains(resp.error, "KSEARCH_API_KEY or OPENAI_API_KEY");
	ks_llm_response_release(&resp);

	free(cfg.model);
	cfg.model = ks_strdup("missing-model");
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.attempts, 1);
	assert_int_equal(resp.http_status, 404);
	assert_contains(resp.error, "HTTP 404: The model `missing-model` does not exist");
	ks_llm_response_release(&resp);
	free(cfg.model);
	cfg.model = ks_strdup("fake-model");

	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.attempts, 1);
	assert_int_equal(resp.http_status, 200);
	assert_contains(resp.error, "HTTP 200 but the answer is not valid JSON");
	ks_llm_response_release(&resp);

	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.attempts, 1);
	assert_contains(resp.error, "not valid JSON");
	ks_llm_response_release(&resp);

	/* a connection cut mid-answer is a transfer error: retried */
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	assert_int_equal(resp.attempts, 2);
	assert_string_equal(resp.text, "whole");
	ks_llm_response_release(&resp);

	/* no key at all: the server says so, and the message says where a key comes from */
	free(cfg.api_key);
	cfg.api_key = NULL;
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.http_status, 401);
	assert_contains(resp.error, "no API key was sent: set KSEARCH_API_KEY or OPENAI_API_KEY");
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

/* ---- concurrency and the pause ---- */

static void test_concurrency_bounds_transfers(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;
	double start, took;
	int got, done = 0;
	size_t most = 0;

	(void)state;
	fake_start(&fake, "[{\"sleep\": 1, \"reply\": \"slow\"}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.concurrency = 2;
	llm = open_llm(&cfg);
	start = now_s();
	for (int i = 0; i < 4; i++)
		submit(llm, NULL, "slow please", (uint64_t)i);
	assert_int_equal(ks_llm_pending(llm), 4);
	while (done < 4) {
		if (ks_llm_poll(llm, 50, &resp, &got, &err))
			fail_msg("%s", err.msg);
		if (ks_llm_in_flight(llm) > most)
			most = ks_llm_in_flight(llm);
		if (got) {
			assert_true(resp.ok);
			ks_llm_response_release(&resp);
			done++;
		}
		assert_true(now_s() - start < 10);
	}
	took = now_s() - start;
	if (took < 1.95 || took > 3.5)
		fail_msg("4 requests of 1 s with concurrency 2 took %.2f s (expected about 2)", took);
	assert_int_equal(most, 2);
	assert_int_equal(ks_llm_pending(llm), 0);
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_pause_after_consecutive_failures(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm_usage usage;
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;
	struct ks_llm_request req = { .user = "u" };

	(void)state;
	fake_start(&fake, "[{\"status\": 500}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.concurrency = 1;
	cfg.pause_after = 3;
	cfg.pause_s = 1;
	llm = open_llm(&cfg);
	for (int i = 0; i < 5; i++)
		submit(llm, NULL, "u", (uint64_t)i);
	for (int i = 0; i < 3; i++) {
		wait_one(llm, &resp);
		assert_false(resp.ok);
		assert_int_equal(resp.attempts, 1);
		assert_int_equal(resp.http_status, 500);
		ks_llm_response_release(&resp);
	}
	assert_true(ks_llm_paused(llm));
	/* the two still queued come back unsent */
	for (int i = 3; i < 5; i++) {
		wait_one(llm, &resp);
		assert_int_equal(resp.tag, i);
		assert_false(resp.ok);
		assert_int_equal(resp.attempts, 0);
		assert_contains(resp.error, "not sent: the LLM side is paused for another");
		ks_llm_response_release(&resp);
	}
	assert_int_equal(ks_llm_submit(llm, &req, 9, &err), -1);
	assert_contains(err.msg, "the LLM side is paused for another 1 s after 3 failed requests in "
				 "a row (last: POST http://127.0.0.1:");
	assert_contains(err.msg, "HTTP 500");
	assert_int_equal(ks_llm_available(llm, &err), -1);
	ks_llm_usage(llm, &usage);
	assert_int_equal(usage.pauses, 1);
	assert_int_equal(usage.failed, 5);
	assert_int_equal(usage.attempts, 3);

	while (ks_llm_paused(llm))
		sleep_s(0.05);
	assert_int_equal(ks_llm_available(llm, &err), 0);
	/* after the pause, one more failure pauses again */
	submit(llm, NULL, "u", 10);
	wait_one(llm, &resp);
	assert_false(resp.ok);
	ks_llm_response_release(&resp);
	assert_true(ks_llm_paused(llm));
	ks_llm_usage(llm, &usage);
	assert_int_equal(usage.pauses, 2);
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

/* ---- endpoints as they are: reasoning models, older servers, local servers ---- */

/* A user prompt holding a parent, so that the fake's decoys include an edit that applies. */
static const char parent_prompt[] =
	"Improve this kernel.\n\n```cuda\n/* ksearch {\"params\": {\"A\": [1, 2]}, "
	"\"launch\": []} */\nextern \"C\" __global__ void k() {}\n```\n";

static void test_defaults_fit_reasoning_models(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	json_t *recs, *body;

	(void)state;
	ks_llm_config_init(&cfg);
	assert_true(cfg.max_tokens >= 32768);
	assert_true(cfg.total_timeout_s >= 15 * 60);
	assert_false(cfg.has_temperature);
	ks_llm_config_release(&cfg);

	fake_start(&fake, "[{\"reply\": \"ok\"}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.has_temperature = 0;
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	ks_llm_response_release(&resp);
	cfg.provider = KS_LLM_ANTHROPIC;
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	ks_llm_response_release(&resp);
	recs = fake_records(&fake, 2);
	body = json_object_get(json_array_get(recs, 0), "body");
	/* no temperature unless set: the model's default, the only one reasoning models take */
	assert_null(json_object_get(body, "temperature"));
	assert_int_equal(json_integer_value(json_object_get(body, "max_completion_tokens")), 1234);
	body = json_object_get(json_array_get(recs, 1), "body");
	assert_null(json_object_get(body, "temperature"));
	assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 1234);
	json_decref(recs);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_no_key_sends_no_credentials(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;
	json_t *recs, *headers;

	(void)state;
	fake_start(&fake, "[{\"reply\": \"local\"}]");
	for (int anthropic = 0; anthropic < 2; anthropic++) {
		config_for(&cfg, fake.port, anthropic ? KS_LLM_ANTHROPIC : KS_LLM_OPENAI);
		free(cfg.api_key);
		cfg.api_key = NULL;
		ask_once(&cfg, &resp);
		if (!resp.ok)
			fail_msg("a local server without auth: %s", resp.error);
		assert_string_equal(resp.text, "local");
		ks_llm_response_release(&resp);
		ks_llm_config_release(&cfg);
	}
	recs = fake_records(&fake, 2);
	for (size_t i = 0; i < 2; i++) {
		headers = json_object_get(json_array_get(recs, i), "headers");
		assert_null(json_object_get(headers, "authorization"));
		assert_null(json_object_get(headers, "x-api-key"));
	}
	json_decref(recs);
	fake_stop(&fake);
}

/* What a request's attempts sent: "field temperature" per record, e.g. "max_completion_tokens -". */
static void sent_params(json_t *rec, char *buf, size_t size)
{
	json_t *body = json_object_get(rec, "body");

	snprintf(buf, size, "%lld %s %s", (long long)json_integer_value(json_object_get(rec, "status")),
		 json_object_get(body, "max_tokens")		  ? "max_tokens"
		 : json_object_get(body, "max_completion_tokens") ? "max_completion_tokens"
								  : "-",
		 json_object_get(body, "temperature") ? "temperature" : "-");
}

static void test_reasoning_model_parameters_are_adapted_once(void **state)
{
	const char *const mode[] = { "--mode", "openai-reasoning", NULL };
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm_usage usage;
	struct ks_llm *llm;
	struct fake fake;
	json_t *recs;
	char *notice, got[128];

	(void)state;
	fake_start_with(&fake, "[{\"reply\": \"an answer\"}]", mode);
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.temperature = 0.8; /* what the user asked for; the model takes only its default */
	cfg.max_tokens = 4000;
	cfg.concurrency = 1;
	llm = open_llm(&cfg);
	assert_string_equal(ks_llm_max_tokens_field(llm), "max_completion_tokens");
	assert_true(ks_llm_sends_temperature(llm));
	for (int i = 0; i < 3; i++)
		submit(llm, NULL, "u", (uint64_t)i);
	for (int i = 0; i < 3; i++) {
		wait_one(llm, &resp);
		if (!resp.ok)
			fail_msg("request %d: %s", i, resp.error);
		/* the first is resent at once without the temperature; the others go without it */
		assert_int_equal(resp.attempts, i == 0 ? 2 : 1);
		assert_int_equal(resp.reasoning_tokens, 300);
		assert_false(resp.reasoning_estimated);
		assert_string_equal(resp.reasoning, "hidden");
		assert_string_equal(resp.text, "an answer");
		ks_llm_response_release(&resp);
	}
	assert_false(ks_llm_sends_temperature(llm));
	notice = ks_llm_take_notice(llm);
	assert_non_null(notice);
	assert_contains(notice, "refused temperature 0.8");
	assert_contains(notice, "Unsupported value: 'temperature' does not support 0.8 with this model");
	assert_contains(notice, "no temperature from now on");
	free(notice);
	assert_null(ks_llm_take_notice(llm)); /* said once */
	ks_llm_usage(llm, &usage);
	assert_int_equal(usage.failed, 0);
	assert_int_equal(usage.adaptations, 1);
	assert_int_equal(usage.reasoning_tokens, 900);
	ks_llm_close(llm);

	recs = fake_records(&fake, 4);
	assert_int_equal(json_array_size(recs), 4);
	sent_params(json_array_get(recs, 0), got, sizeof(got));
	assert_string_equal(got, "400 max_completion_tokens temperature");
	for (size_t i = 1; i < 4; i++) {
		sent_params(json_array_get(recs, i), got, sizeof(got));
		assert_string_equal(got, "200 max_completion_tokens -");
	}
	json_decref(recs);

	/* reasoning spends the budget first: an answer cut off with nothing shown */
	cfg.max_tokens = 200;
	ask_once(&cfg, &resp);
	assert_true(resp.ok);
	assert_true(resp.cut_off);
	assert_string_equal(resp.stop_reason, "length");
	assert_string_equal(resp.text, "");
	assert_int_equal(resp.completion_tokens, 200);
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_older_server_gets_max_tokens(void **state)
{
	const char *const mode[] = { "--mode", "legacy-max-tokens", NULL };
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm *llm;
	struct fake fake;
	json_t *recs;
	char *notice, got[128];

	(void)state;
	fake_start_with(&fake, "[{\"reply\": \"fine\"}]", mode);
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.max_retries = 0; /* a resend for a refused parameter is not a retry */
	llm = open_llm(&cfg);
	submit(llm, "s", "u", 1);
	wait_one(llm, &resp);
	if (!resp.ok)
		fail_msg("%s", resp.error);
	assert_int_equal(resp.attempts, 2);
	ks_llm_response_release(&resp);
	assert_string_equal(ks_llm_max_tokens_field(llm), "max_tokens");
	notice = ks_llm_take_notice(llm);
	assert_non_null(notice);
	assert_contains(notice, "refused 'max_completion_tokens' (HTTP 400:");
	assert_contains(notice, "Extra inputs are not permitted");
	assert_contains(notice, "goes in 'max_tokens' from now on");
	free(notice);
	submit(llm, "s", "u", 2);
	wait_one(llm, &resp);
	assert_true(resp.ok);
	assert_int_equal(resp.attempts, 1);
	ks_llm_response_release(&resp);
	assert_null(ks_llm_take_notice(llm));
	ks_llm_close(llm);
	recs = fake_records(&fake, 3);
	sent_params(json_array_get(recs, 0), got, sizeof(got));
	assert_string_equal(got, "400 max_completion_tokens temperature");
	sent_params(json_array_get(recs, 1), got, sizeof(got));
	assert_string_equal(got, "200 max_tokens temperature");
	sent_params(json_array_get(recs, 2), got, sizeof(got));
	assert_string_equal(got, "200 max_tokens temperature");
	json_decref(recs);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_other_refusals_are_not_adapted(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;

	(void)state;
	fake_start(&fake, "[{\"status\": 400, \"message\": \"Your prompt is too long.\"},"
			  " {\"status\": 400, \"message\": \"Unrecognized request argument supplied: "
			  "reasoning_effort\"},"
			  " {\"status\": 400, \"message\": \"max_tokens is too large: 99999.\"}]");
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.max_retries = 2;
	if (ks_llm_config_set_extra(&cfg, "{\"reasoning_effort\": \"high\"}", "--llm-extra", &err))
		fail_msg("%s", err.msg);
	llm = open_llm(&cfg);
	for (int i = 0; i < 3; i++) {
		submit(llm, NULL, "u", (uint64_t)i);
		wait_one(llm, &resp);
		assert_false(resp.ok);
		assert_int_equal(resp.attempts, 1);
		assert_int_equal(resp.http_status, 400);
		/* a field of --llm-extra the endpoint does not take: said where it comes from */
		if (i == 1)
			assert_contains(resp.error, "\"reasoning_effort\" comes from --llm-extra");
		else
			assert_null(strstr(resp.error, "--llm-extra"));
		ks_llm_response_release(&resp);
	}
	assert_null(ks_llm_take_notice(llm));
	assert_string_equal(ks_llm_max_tokens_field(llm), "max_completion_tokens");
	assert_true(ks_llm_sends_temperature(llm));
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_strip_think(void **state)
{
	static const struct {
		const char *text, *answer;
		size_t removed;
	} cases[] = {
		{ "plain answer", "plain answer", 0 },
		{ "<think>\nhmm\n</think>\n\nthe answer", "the answer", 20 },
		{ "  <think>a</think>B", "B", 16 },
		{ "<think>cut off while thinking", "", 29 },
		{ "opened by the template\n</think>\n\nthe answer", "the answer", 31 },
		{ "A <think>x</think>B<think>y", "A B", 24 },
		{ "text with </think> then <think>z</think> end", "then  end", 34 },
		{ "", "", 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t removed = 99;
		char *answer = ks_llm_strip_think(cases[i].text, &removed);

		if (strcmp(answer, cases[i].answer) || removed != cases[i].removed)
			fail_msg("\"%s\": got \"%s\" (%zu bytes of reasoning); expected \"%s\" (%zu)",
				 cases[i].text, answer, removed, cases[i].answer, cases[i].removed);
		free(answer);
	}
}

static void test_reasoning_is_never_the_answer(void **state)
{
	static const struct {
		const char *mode, *where;
	} modes[] = {
		{ "think", "<think>" },
		{ "think-no-open", "<think>" },
		{ "reasoning-content", "reasoning_content" },
		{ "reasoning", "reasoning" },
	};
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;
	json_t *recs, *thinking;

	(void)state;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		const char *const options[] = { "--mode", modes[i].mode, NULL };

		fake_start_with(&fake, "[{\"reply\": \"The final answer.\"}]", options);
		config_for(&cfg, fake.port, KS_LLM_OPENAI);
		llm = open_llm(&cfg);
		submit(llm, NULL, parent_prompt, 1);
		wait_one(llm, &resp);
		if (!resp.ok)
			fail_msg("%s: %s", modes[i].mode, resp.error);
		assert_string_equal(resp.text, "The final answer.");
		assert_string_equal(resp.reasoning, modes[i].where);
		assert_true(resp.reasoning_estimated);
		assert_true(resp.reasoning_tokens > 50 && resp.reasoning_tokens < resp.completion_tokens);
		ks_llm_response_release(&resp);
		ks_llm_close(llm);
		ks_llm_config_release(&cfg);
		/* the fake did send the decoys */
		recs = fake_records(&fake, 1);
		if (strstr(modes[i].mode, "think"))
			assert_contains(json_string_value(json_object_get(json_array_get(recs, 0), "answer")),
					"DECOY_FROM_THINKING");
		json_decref(recs);
		fake_stop(&fake);
	}

	/* Anthropic: thinking asked for with --llm-extra, answered in thinking blocks */
	fake_start(&fake, "[{\"reply\": \"The final answer.\"}]");
	config_for(&cfg, fake.port, KS_LLM_ANTHROPIC);
	cfg.has_temperature = 0;
	cfg.max_tokens = 8000;
	if (ks_llm_config_set_extra(&cfg, "{\"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 4000}}",
				    "--llm-extra", &err))
		fail_msg("%s", err.msg);
	ask_once(&cfg, &resp);
	if (!resp.ok)
		fail_msg("%s", resp.error);
	assert_string_equal(resp.text, "The final answer.");
	assert_string_equal(resp.reasoning, "thinking blocks");
	assert_true(resp.reasoning_tokens > 50);
	ks_llm_response_release(&resp);
	recs = fake_records(&fake, 1);
	thinking = json_object_get(json_object_get(json_array_get(recs, 0), "body"), "thinking");
	assert_int_equal(json_integer_value(json_object_get(thinking, "budget_tokens")), 4000);
	json_decref(recs);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_cut_off_answers_are_marked(void **state)
{
	const char *const mode[] = { "--mode", "length", NULL };
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm_usage usage;
	struct ks_llm *llm;
	struct fake fake;

	(void)state;
	fake_start_with(&fake, "[{\"reply\": \"a long answer that goes on\"}]", mode);
	for (int anthropic = 0; anthropic < 2; anthropic++) {
		config_for(&cfg, fake.port, anthropic ? KS_LLM_ANTHROPIC : KS_LLM_OPENAI);
		llm = open_llm(&cfg);
		submit(llm, NULL, "u", 1);
		wait_one(llm, &resp);
		assert_true(resp.ok);
		assert_true(resp.cut_off);
		assert_string_equal(resp.stop_reason, anthropic ? "max_tokens" : "length");
		assert_int_equal(resp.completion_tokens, 1234);
		assert_string_equal(resp.text, "a long answer");
		ks_llm_response_release(&resp);
		ks_llm_usage(llm, &usage);
		assert_int_equal(usage.cut_off, 1);
		ks_llm_close(llm);
		ks_llm_config_release(&cfg);
	}
	fake_stop(&fake);
}

static void test_cached_tokens_are_counted_and_priced(void **state)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct fake fake;

	(void)state;
	fake_start(&fake,
		   "[{\"reply\": \"x\", \"usage\": {\"prompt_tokens\": 10000, \"completion_tokens\": 2000,"
		   " \"reasoning_tokens\": 1500, \"cached_tokens\": 8000, \"cache_write_tokens\": 1000}}]");
	/* OpenAI: cached tokens are part of prompt_tokens; reasoning part of completion_tokens */
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	cfg.has_price = 1;
	cfg.price = (struct ks_llm_price){ 2, 10, 0.5, -1 };
	ask_once(&cfg, &resp);
	assert_int_equal(resp.prompt_tokens, 10000);
	assert_int_equal(resp.cached_tokens, 8000);
	assert_int_equal(resp.cache_write_tokens, 0);
	assert_int_equal(resp.completion_tokens, 2000);
	assert_int_equal(resp.reasoning_tokens, 1500);
	assert_false(resp.reasoning_estimated);
	/* 2000 at $2, 8000 cached at $0.5, 2000 out at $10 */
	assert_true(fabs(resp.cost_usd - (2000 * 2 + 8000 * 0.5 + 2000 * 10) / 1e6) < 1e-12);
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);

	/* Anthropic: input_tokens excludes cache reads and writes; all three make the prompt */
	config_for(&cfg, fake.port, KS_LLM_ANTHROPIC);
	cfg.has_price = 1;
	cfg.price = (struct ks_llm_price){ 3, 15, 0.3, 3.75 };
	ask_once(&cfg, &resp);
	assert_int_equal(resp.prompt_tokens, 10000);
	assert_int_equal(resp.cached_tokens, 8000);
	assert_int_equal(resp.cache_write_tokens, 1000);
	assert_true(fabs(resp.cost_usd - (1000 * 3 + 8000 * 0.3 + 1000 * 3.75 + 2000 * 15) / 1e6) < 1e-12);
	ks_llm_response_release(&resp);
	/* without cache prices, cached tokens are priced as input */
	cfg.price = (struct ks_llm_price){ 3, 15, -1, -1 };
	ask_once(&cfg, &resp);
	assert_true(fabs(resp.cost_usd - (10000 * 3 + 2000 * 15) / 1e6) < 1e-12);
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);
	fake_stop(&fake);
}

static void test_extra_fields_and_headers_are_checked(void **state)
{
	struct ks_llm_config cfg;
	struct ks_error err;
	static const struct {
		const char *json, *says;
	} bad_extra[] = {
		{ "{\"reasoning_effort\": }", "--llm-extra: not valid JSON (line 1, column" },
		{ "[1, 2]", "expected a JSON object" },
		{ "\"high\"", "expected a JSON object" },
		{ "{\"model\": \"other\"}", "the field \"model\" is ksearch's to set (--llm-model)" },
		{ "{\"messages\": []}", "the field \"messages\"" },
		{ "{\"temperature\": 1}", "(--temperature)" },
		{ "{\"max_tokens\": 5}", "(--max-tokens)" },
		{ "{\"max_completion_tokens\": 5}", "(--max-tokens)" },
		{ "{\"stream\": true}", "the field \"stream\"" },
		{ "{\"a\": 1, \"a\": 2}", "not valid JSON" },
	};
	static const struct {
		const char *line, *says;
	} bad_header[] = {
		{ "X-Title ksearch", "there is no colon" },
		{ ": v", "the name is empty" },
		{ "X Title: v", "'X Title' is not a header name" },
		{ "X-Title:   ", "the header X-Title has no value" },
		{ "X-Title: a\x01"
		  "b",
		  "control character" },
		{ "content-type: text/plain", "the header Content-Type is ksearch's to set" },
		{ "Host: evil", "Host is ksearch's to set" },
	};

	(void)state;
	ks_llm_config_init(&cfg);
	for (size_t i = 0; i < sizeof(bad_extra) / sizeof(bad_extra[0]); i++) {
		if (ks_llm_config_set_extra(&cfg, bad_extra[i].json, "--llm-extra", &err) == 0)
			fail_msg("extra %s was accepted", bad_extra[i].json);
		assert_contains(err.msg, bad_extra[i].says);
	}
	assert_null(cfg.extra);
	assert_int_equal(
		ks_llm_config_set_extra(&cfg, "{\"provider\": {\"order\": [\"a\"]}}", "--llm-extra", &err),
		0);
	for (size_t i = 0; i < sizeof(bad_header) / sizeof(bad_header[0]); i++) {
		if (ks_llm_config_add_header(&cfg, bad_header[i].line, "--llm-header", &err) == 0)
			fail_msg("header %s was accepted", bad_header[i].line);
		assert_contains(err.msg, bad_header[i].says);
		assert_null(strstr(err.msg, "evil")); /* a value is never echoed */
	}
	assert_int_equal(ks_llm_config_add_header(&cfg, "X-Title:  ksearch  ", "--llm-header", &err), 0);
	assert_string_equal(cfg.headers[0], "X-Title: ksearch");
	assert_int_equal(ks_llm_config_add_header(&cfg, "x-title: again", "--llm-header", &err), -1);
	assert_contains(err.msg, "given twice");
	ks_llm_config_release(&cfg);

	/* the provider's key header: the key comes from the environment only */
	config_for(&cfg, 1, KS_LLM_OPENAI);
	assert_int_equal(ks_llm_config_add_header(&cfg, "Authorization: Bearer sk-cli", "--llm-header", &err),
			 0);
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--llm-header Authorization: the API key goes there");
	assert_contains(err.msg, "KSEARCH_API_KEY or OPENAI_API_KEY");
	assert_null(strstr(err.msg, "sk-cli"));
	cfg.provider = KS_LLM_ANTHROPIC; /* there it is x-api-key's job; Authorization may go to a gateway */
	assert_int_equal(ks_llm_config_validate(&cfg, &err), 0);
	ks_llm_config_release(&cfg);
	config_for(&cfg, 1, KS_LLM_ANTHROPIC);
	assert_int_equal(ks_llm_config_add_header(&cfg, "X-API-Key: k", "--llm-header", &err), 0);
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--llm-header x-api-key");
	ks_llm_config_release(&cfg);

	/* Anthropic's rules for thinking */
	config_for(&cfg, 1, KS_LLM_ANTHROPIC);
	cfg.max_tokens = 16000;
	assert_int_equal(ks_llm_config_set_extra(
				 &cfg, "{\"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 16000}}",
				 "--llm-extra", &err),
			 0);
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "--temperature 0.5: Anthropic's thinking");
	cfg.has_temperature = 0;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), -1);
	assert_contains(err.msg, "thinking.budget_tokens 16000 must be less than --max-tokens 16000");
	cfg.max_tokens = 32000;
	assert_int_equal(ks_llm_config_validate(&cfg, &err), 0);
	ks_llm_config_release(&cfg);

	/* the environment: named in the message */
	setenv("KSEARCH_LLM_EXTRA", "{oops", 1);
	ks_llm_config_init(&cfg);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), -1);
	assert_contains(err.msg, "KSEARCH_LLM_EXTRA: not valid JSON");
	ks_llm_config_release(&cfg);
	setenv("KSEARCH_LLM_EXTRA", "{\"top_p\": 0.9}", 1);
	setenv("KSEARCH_LLM_HEADERS", "X-Title: ksearch\r\n\nHTTP-Referer: https://example.com/ksearch\n", 1);
	ks_llm_config_init(&cfg);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), 0);
	assert_string_equal(cfg.extra, "{\"top_p\":0.9}");
	assert_int_equal(cfg.n_headers, 2);
	assert_string_equal(cfg.headers[1], "HTTP-Referer: https://example.com/ksearch");
	ks_llm_config_release(&cfg);
	/* what the command line set wins */
	ks_llm_config_init(&cfg);
	assert_int_equal(ks_llm_config_set_extra(&cfg, "{\"top_p\": 0.5}", "--llm-extra", &err), 0);
	assert_int_equal(ks_llm_config_add_header(&cfg, "X-Other: 1", "--llm-header", &err), 0);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), 0);
	assert_string_equal(cfg.extra, "{\"top_p\":0.5}");
	assert_int_equal(cfg.n_headers, 1);
	ks_llm_config_release(&cfg);
	setenv("KSEARCH_LLM_HEADERS", "no colon here", 1);
	ks_llm_config_init(&cfg);
	assert_int_equal(ks_llm_config_from_env(&cfg, &err), -1);
	assert_contains(err.msg, "KSEARCH_LLM_HEADERS: expected 'Name: value'");
	ks_llm_config_release(&cfg);
	unsetenv("KSEARCH_LLM_EXTRA");
	unsetenv("KSEARCH_LLM_HEADERS");
	unsetenv("OPENAI_API_KEY");
	unsetenv("ANTHROPIC_API_KEY");
	unsetenv("KSEARCH_API_KEY");
}

#define GATEWAY_SECRET "gw-TEST-5e1f0a9d77"

static void test_extra_fields_and_headers_reach_a_gateway(void **state)
{
	const char *const gateway[] = { "--require-header", "X-Gateway-Key: " GATEWAY_SECRET, NULL };
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_error err;
	struct fake fake;
	json_t *recs, *body, *headers;
	char *raw;

	(void)state;
	fake_start_with(&fake,
			"[{\"reply\": \"ok\"}, {\"reply\": \"your header said " GATEWAY_SECRET "\"},"
			" {\"status\": 400, \"message\": \"bad header " GATEWAY_SECRET "\"}]",
			gateway);
	config_for(&cfg, fake.port, KS_LLM_OPENAI);
	/* without its header, the gateway refuses, and the message says what to look at */
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_int_equal(resp.http_status, 401);
	assert_contains(resp.error, "requires the header 'X-Gateway-Key'");
	ks_llm_response_release(&resp);

	if (ks_llm_config_set_extra(&cfg,
				    "{\"provider\": {\"order\": [\"a\", \"b\"], \"allow_fallbacks\": false},"
				    " \"reasoning_effort\": \"high\"}",
				    "--llm-extra", &err) ||
	    ks_llm_config_add_header(&cfg, "X-Gateway-Key: " GATEWAY_SECRET, "--llm-header", &err) ||
	    ks_llm_config_add_header(&cfg, "X-Title: ksearch", "--llm-header", &err))
		fail_msg("%s", err.msg);
	ask_once(&cfg, &resp);
	if (!resp.ok)
		fail_msg("%s", resp.error);
	ks_llm_response_release(&resp);
	/* a header value is a secret like the key: redacted in answers and errors */
	ask_once(&cfg, &resp);
	assert_contains(resp.text, "your header said <redacted>");
	ks_llm_response_release(&resp);
	ask_once(&cfg, &resp);
	assert_false(resp.ok);
	assert_contains(resp.error, "bad header <redacted>");
	ks_llm_response_release(&resp);
	ks_llm_config_release(&cfg);

	recs = fake_records(&fake, 4);
	assert_int_equal(json_array_size(recs), 4);
	body = json_object_get(json_array_get(recs, 1), "body");
	assert_string_equal(json_string_value(json_object_get(body, "reasoning_effort")), "high");
	assert_true(json_is_false(json_object_get(json_object_get(body, "provider"), "allow_fallbacks")));
	assert_string_equal(json_string_value(json_object_get(body, "model")), "fake-model");
	headers = json_object_get(json_array_get(recs, 1), "headers");
	assert_string_equal(json_string_value(json_object_get(headers, "x-title")), "ksearch");
	assert_non_null(json_object_get(headers, "x-gateway-key"));
	raw = json_dumps(headers, 0);
	assert_null(strstr(raw, GATEWAY_SECRET)); /* the fake redacts what it requires */
	free(raw);
	json_decref(recs);
	fake_stop(&fake);
}

/* ---- the key ---- */

/*
 * Every error path, for both protocols, against one fake whose script is
 * consumed in order (requests the fake rejects before the script, like
 * the unknown model, take no step).  The server echoes the key in its
 * error messages and in one answer; none of it may come back.
 */
struct leak_case {
	const char *name;
	int steps;	   /* script steps it consumes (documentation of leak_script) */
	const char *model; /* NULL: fake-model */
	int closed_port;
	double total_timeout_s;
	int max_retries;
	int pause_after;
	uint64_t budget_tokens;
	int ok;
	long status;
	int echoed; /* the server echoed the key: "<redacted>" must show */
};

static const struct leak_case leak_cases[] = {
	/* first: its answers come 2 s late, and the recording waits for them */
	{ "timeout", 2, NULL, 0, 0.2, 1, 0, 0, 0, 0, 0 },
	{ "401", 1, NULL, 0, 0, 2, 0, 0, 0, 401, 1 },
	{ "404 model", 0, "missing-model", 0, 0, 2, 0, 0, 0, 404, 0 },
	{ "429 Retry-After", 2, NULL, 0, 0, 1, 0, 0, 0, 429, 1 },
	{ "500 until retries run out, then the pause", 3, NULL, 0, 0, 2, 1, 0, 0, 500, 1 },
	{ "connection refused", 0, NULL, 1, 0, 1, 0, 0, 0, 0, 0 },
	{ "truncated JSON", 1, NULL, 0, 0, 2, 0, 0, 0, 200, 0 },
	{ "connection cut", 2, NULL, 0, 0, 1, 0, 0, 0, 200, 0 },
	{ "malformed JSON", 1, NULL, 0, 0, 2, 0, 0, 0, 200, 0 },
	{ "no code", 1, NULL, 0, 0, 0, 0, 0, 1, 200, 0 },
	{ "answer echoing the key, then the budget", 1, NULL, 0, 0, 0, 0, 1, 1, 200, 1 },
};

static const char leak_script[] =
	"[{\"sleep\": 2, \"reply\": \"late\"}, {\"sleep\": 2, \"reply\": \"late\"},"
	" {\"status\": 401, \"echo_key\": true},"
	" {\"status\": 429, \"retry_after\": 1, \"echo_key\": true},"
	" {\"status\": 429, \"retry_after\": 1, \"echo_key\": true},"
	" {\"status\": 500, \"echo_key\": true}, {\"status\": 500, \"echo_key\": true},"
	" {\"status\": 500, \"echo_key\": true},"
	" {\"truncated\": true, \"reply\": \"cut\"},"
	" {\"truncated\": \"connection\", \"reply\": \"cut\"},"
	" {\"truncated\": \"connection\", \"reply\": \"cut\"},"
	" {\"malformed\": true},"
	" {\"no_code\": true},"
	" {\"reply\": \"Your key is " KEY ", keep it safe.\"}]";

static void check_leaks(enum ks_llm_provider provider)
{
	struct ks_llm_config cfg;
	struct ks_llm_response resp;
	struct ks_llm_request req = { .system = "s", .user = "u" };
	struct ks_llm *llm;
	struct ks_error err;
	struct fake fake;
	json_t *recs, *rec;
	size_t i;

	fake_start(&fake, leak_script);
	for (i = 0; i < sizeof(leak_cases) / sizeof(leak_cases[0]); i++) {
		const struct leak_case *c = &leak_cases[i];

		config_for(&cfg, c->closed_port ? closed_port() : fake.port, provider);
		if (c->model) {
			free(cfg.model);
			cfg.model = ks_strdup(c->model);
		}
		if (c->total_timeout_s > 0)
			cfg.total_timeout_s = c->total_timeout_s;
		cfg.max_retries = c->max_retries;
		cfg.pause_after = c->pause_after;
		cfg.pause_s = 60;
		cfg.budget_tokens = c->budget_tokens;
		/* extra fields and headers travel with every request; the key stays out of them */
		if (ks_llm_config_set_extra(&cfg, "{\"metadata\": {\"run\": \"leak-test\"}}", "--llm-extra",
					    &err) ||
		    ks_llm_config_add_header(&cfg, "X-Title: ksearch-leak-test", "--llm-header", &err))
			fail_msg("%s", err.msg);
		llm = open_llm(&cfg);
		submit(llm, "s", "u", i);
		wait_one(llm, &resp);
		assert_response_keyless(&resp);
		if (resp.ok != c->ok || resp.http_status != c->status)
			fail_msg("%s (%s): ok %d, HTTP %ld; expected ok %d, HTTP %ld (%s)", c->name,
				 ks_llm_provider_name(provider), resp.ok, resp.http_status, c->ok, c->status,
				 resp.error ? resp.error : "");
		if (c->echoed)
			assert_contains(resp.ok ? resp.text : resp.error, "<redacted>");
		if (!resp.ok)
			assert_contains(resp.error, "127.0.0.1");
		ks_llm_response_release(&resp);
		/* what submit refuses with (a pause, a budget) is keyless too */
		if (c->pause_after || c->budget_tokens) {
			assert_int_equal(ks_llm_submit(llm, &req, 99, &err), -1);
			assert_no_key(err.msg);
			assert_contains(err.msg, c->pause_after ? "paused" : "token budget");
			/* the pause quotes the last error, echoed key and all */
			if (c->pause_after)
				assert_contains(err.msg, "<redacted>");
		} else {
			assert_int_equal(ks_llm_available(llm, &err), 0);
		}
		ks_llm_close(llm);
		ks_llm_config_release(&cfg);
	}
	/* every request the fake saw: all but the refused connection */
	recs = fake_records(&fake, 15);
	assert_int_equal(json_array_size(recs), 15);
	json_array_foreach(recs, i, rec)
	{
		const char *auth =
			rec_header(rec, provider == KS_LLM_ANTHROPIC ? "x-api-key" : "authorization");

		char *sent;

		assert_non_null(auth);
		assert_true(!strncmp(auth, "<redacted:", 10));
		/* what the client sent, beyond the auth header (the answers are the script's) */
		sent = json_dumps(json_object_get(rec, "body"), 0);
		assert_no_key(sent);
		free(sent);
		sent = json_dumps(json_object_get(rec, "headers"), 0);
		assert_no_key(sent);
		free(sent);
		assert_string_equal(rec_header(rec, "x-title"), "ksearch-leak-test");
		assert_string_equal(
			json_string_value(json_object_get(
				json_object_get(json_object_get(rec, "body"), "metadata"), "run")),
			"leak-test");
	}
	json_decref(recs);
	fake_stop(&fake);
}

static void test_key_never_leaks(void **state)
{
	(void)state;
	check_leaks(KS_LLM_OPENAI);
	check_leaks(KS_LLM_ANTHROPIC);
}

static int have_python3(void)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL, probe[4200];
	int found = 0;

	if (!path)
		return 0;
	copy = strdup(path);
	for (dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		snprintf(probe, sizeof(probe), "%s/python3", *dir ? dir : ".");
		found = access(probe, X_OK) == 0;
	}
	free(copy);
	return found;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_validation_names_the_setting),
		cmocka_unit_test(test_config_from_env_command_line_wins),
		cmocka_unit_test(test_prices_file),
		cmocka_unit_test(test_submit_refuses_malformed_requests),
		cmocka_unit_test(test_openai_request_schema),
		cmocka_unit_test(test_anthropic_request_schema),
		cmocka_unit_test(test_no_code_answer_is_returned_as_text),
		cmocka_unit_test(test_usage_cost_and_budgets),
		cmocka_unit_test(test_retry_after_is_honoured),
		cmocka_unit_test(test_backoff_stays_within_bounds),
		cmocka_unit_test(test_connection_refused_is_retried),
		cmocka_unit_test(test_timeout_is_per_attempt),
		cmocka_unit_test(test_what_is_not_retried),
		cmocka_unit_test(test_concurrency_bounds_transfers),
		cmocka_unit_test(test_pause_after_consecutive_failures),
		cmocka_unit_test(test_defaults_fit_reasoning_models),
		cmocka_unit_test(test_no_key_sends_no_credentials),
		cmocka_unit_test(test_reasoning_model_parameters_are_adapted_once),
		cmocka_unit_test(test_older_server_gets_max_tokens),
		cmocka_unit_test(test_other_refusals_are_not_adapted),
		cmocka_unit_test(test_strip_think),
		cmocka_unit_test(test_reasoning_is_never_the_answer),
		cmocka_unit_test(test_cut_off_answers_are_marked),
		cmocka_unit_test(test_cached_tokens_are_counted_and_priced),
		cmocka_unit_test(test_extra_fields_and_headers_are_checked),
		cmocka_unit_test(test_extra_fields_and_headers_reach_a_gateway),
		cmocka_unit_test(test_key_never_leaks),
	};

	if (!have_python3()) {
		printf("skipping the LLM client tests: python3 (for tools/fake-llm) is not on PATH\n");
		return 77;
	}
	/* as ksearch does: a peer closing early must not kill the process */
	signal(SIGPIPE, SIG_IGN);
	setenv("NO_PROXY", "127.0.0.1,localhost", 1);
	setenv("no_proxy", "127.0.0.1,localhost", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
