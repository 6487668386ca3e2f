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
		   " \"broken\": {\"input_per_mtok\": \"cheap\"}}\n");
	snprintf(path, sizeof(path), "%s/prices.json", dir);
	assert_int_equal(ks_llm_prices_load(path, "gpt-x", &price, &found, &err), 0);
	assert_int_equal(found, 1);
	assert_true(price.input_per_mtok == 2.5 && price.output_per_mtok == 10);
	assert_int_equal(ks_llm_prices_load(path, "other", &price, &found, &err), 0);
	assert_int_equal(found, 0);
	assert_int_equal(ks_llm_prices_load(path, "broken", &price, &found, &err), -1);
	assert_contains(err.msg, "model \"broken\"");
	test_write(dir, "bad.json", "{\n  \"a\": ,\n}\n");
	snprintf(path, sizeof(path), "%s/bad.json", dir);
	assert_int_equal(ks_llm_prices_load(path, "a", &price, &found, &err), -1);
	assert_contains(err.msg, "bad.json:2:");
	test_rmtree(dir);
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
	assert_true(json_is_integer(json_object_get(body, "max_tokens")));
	assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 1234);
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
	assert_contains(resp.error, "no API key: set KSEARCH_API_KEY or OPENAI_API_KEY");
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
