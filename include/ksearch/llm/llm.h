/*
 * llm.h - the client that asks an LLM endpoint for new kernels.
 *
 * Two protocols: OpenAI-compatible chat completions (POST {base}/chat/completions,
 * "Authorization: Bearer KEY"; OpenAI, vLLM, SGLang, llama.cpp, Ollama, ...) and
 * Anthropic messages (POST {base}/messages, "x-api-key: KEY",
 * "anthropic-version: 2023-06-01").  Without a key no credentials are sent at
 * all, as local servers expect.  Several requests are in flight at once
 * through one libcurl multi handle; there are no threads: ks_llm_poll() does
 * all the work, so the search calls it from its own loop.
 *
 * A request body holds the model, the messages, the answer budget
 * (OpenAI: "max_completion_tokens", which OpenAI's reasoning models require
 * and which replaced "max_tokens"; Anthropic: "max_tokens"), the temperature
 * only when cfg.has_temperature, and cfg.extra deep-merged in last.
 *
 * Adapting to the endpoint (OpenAI protocol): a 400 or 422 whose error says
 * that one of the parameters the client chose is unsupported (OpenAI's
 * error.param with code unsupported_parameter / unsupported_value, or the
 * parameter's name in the message of an unknown-field error) makes the
 * client change that parameter for the rest of the run and send the request
 * again at once (not counted as a retry): "temperature" is dropped, and the
 * budget moves from "max_completion_tokens" to "max_tokens" (older servers)
 * or back, once per run.  Each change is queued once as a notice
 * (ks_llm_take_notice()) for the caller to log and show.
 *
 * Reasoning is never the answer: a reply's text is what is left after
 * removing <think>...</think> blocks (an unclosed <think> runs to the end; a
 * reply whose first tag is a lone </think> loses everything before it:
 * ks_llm_strip_think()); reasoning_content / reasoning fields and Anthropic
 * thinking / redacted_thinking blocks are never read as text.  Their tokens
 * are kept: reasoning_tokens as reported (OpenAI's
 * completion_tokens_details), else estimated from the reasoning's bytes / 4.
 *
 * What the module promises:
 *  - At most cfg.concurrency transfers in flight; more submissions queue.
 *  - A failed attempt (connection error, timeout, HTTP 408, 429 or 5xx) is
 *    retried up to cfg.max_retries times, after the server's Retry-After
 *    (seconds or HTTP-date; at most an hour) when it sent one, else after
 *    an exponential backoff with jitter: retry k waits a uniform draw from
 *    [base, min(max, base * 2^k)] (cfg.backoff_base_s, backoff_max_s),
 *    from a PCG32 seeded with cfg.jitter_seed.  Other failures (401, 404, a 200
 *    whose body is not the expected JSON) are not retried.  A retry is not a
 *    completion: ks_llm_poll() hands back each request once, finished.
 *  - After cfg.pause_after consecutive failed requests the client pauses for
 *    cfg.pause_s: ks_llm_paused() is true, ks_llm_submit() refuses with a
 *    message saying why and for how long, queued requests that have not
 *    started come back failed, and transfers in flight finish.  After the
 *    pause one more failure pauses again (a success clears the count).
 *  - Token and USD budgets: usage comes from each response (estimated as
 *    bytes / 4 when a server reports none); once a budget is spent,
 *    ks_llm_submit() refuses saying which one and queued requests come back
 *    failed ("not sent: ...").  Transfers in flight finish, so a budget can
 *    be overshot by at most `concurrency` answers.
 *  - The API key lives in the config struct (and the client's private copy
 *    of it) and in the header list handed to curl, nowhere else: never in
 *    an error message, a response field or a URL.  If a server echoes it,
 *    it is replaced by "<redacted>" in what the client returns (in answer
 *    text only when the key is 8 characters or longer, so that a toy key
 *    like "x" cannot garble a kernel).
 *
 * Errors follow error.h: 0 / -1 and a struct ks_error.  A request that
 * fails is not an error of ks_llm_poll(); it is a response with ok == 0
 * and a message naming the URL and the HTTP status.  Nothing is printed.
 */
#ifndef KSEARCH_LLM_H
#define KSEARCH_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"

enum ks_llm_provider {
	KS_LLM_PROVIDER_UNSET = 0, /* ks_llm_config_from_env() fills it in */
	KS_LLM_OPENAI,
	KS_LLM_ANTHROPIC,
};

/* USD per million tokens, as in prompts/prices.json. */
struct ks_llm_price {
	double input_per_mtok;
	double output_per_mtok;
	double cached_input_per_mtok; /* prompt tokens read from the cache; < 0: priced as input */
	double cache_write_per_mtok;  /* prompt tokens written to the cache (Anthropic); < 0: as input */
};

/*
 * Plain data.  The strings are owned by the struct (malloc'd; replace one
 * with free() + ks_strdup()); ks_llm_config_release() frees them and wipes
 * the key.  Numbers default as ks_llm_config_init() documents.
 */
struct ks_llm_config {
	enum ks_llm_provider provider;
	char *base_url; /* up to and including the version: "https://api.openai.com/v1" */
	char *model;
	char *api_key; /* from the environment only; NULL or "": no auth header sent */
	int concurrency;
	double temperature;
	int has_temperature;	  /* send it; else the model's default (reasoning models take no other) */
	int max_tokens;		  /* the answer budget, reasoning included */
	double connect_timeout_s; /* per attempt (CURLOPT_CONNECTTIMEOUT) */
	double total_timeout_s;	  /* per attempt, whole transfer (CURLOPT_TIMEOUT) */
	int max_retries;	  /* attempts per request: at most max_retries + 1 */
	double backoff_base_s;
	double backoff_max_s;
	int pause_after; /* consecutive failed requests that pause the client; 0: never */
	double pause_s;
	uint64_t budget_tokens; /* prompt + completion tokens; 0: no budget */
	double budget_usd;	/* 0: no budget; needs has_price */
	int has_price;
	struct ks_llm_price price;
	uint64_t jitter_seed; /* seeds the backoff jitter: same seed, same delays */
	char *extra;	      /* a JSON object merged into every body (ks_llm_config_set_extra()); or NULL */
	char **headers;	      /* "Name: value" lines sent with every request (ks_llm_config_add_header()) */
	size_t n_headers, alloc_headers;
};

/*
 * Defaults, allocating nothing: provider unset, no URL/model/key,
 * concurrency 4, no temperature (temperature 0.8 if has_temperature is
 * set), max_tokens 32768, connect timeout 10 s, total timeout 900 s
 * (reasoning models think for minutes), 4 retries, backoff 1..30 s, pause
 * for 120 s after 5 consecutive failures, no budgets, no price, jitter
 * seed 0, no extra fields or headers.
 */
void ks_llm_config_init(struct ks_llm_config *cfg);
/* Free the strings (wiping the key first) and return to ks_llm_config_init(). */
void ks_llm_config_release(struct ks_llm_config *cfg);

/*
 * Fill what is still unset from the environment, so that the command line
 * (applied first) wins: provider from KSEARCH_LLM_PROVIDER (default
 * openai), base_url from KSEARCH_LLM_URL (default the provider's public
 * endpoint), model from KSEARCH_LLM_MODEL, extra from KSEARCH_LLM_EXTRA,
 * headers from KSEARCH_LLM_HEADERS (one "Name: value" per line).  The key
 * is always read here, from KSEARCH_API_KEY, else OPENAI_API_KEY or
 * ANTHROPIC_API_KEY by provider.  The key and the headers are read through
 * ks_secret_env() (secret.h): what main() took out of the environment at
 * start-up.  Fails on an unknown provider name or a bad extra or header,
 * naming the variable.
 */
int ks_llm_config_from_env(struct ks_llm_config *cfg, struct ks_error *err);

/*
 * Set cfg->extra from JSON text: a JSON object whose fields are merged into
 * every request body (objects merged key by key, anything else replaced),
 * e.g. {"reasoning_effort": "high"} or {"thinking": {"type": "enabled",
 * "budget_tokens": 16000}}.  Refused, with origin (the flag or variable)
 * and the reason in the message: text that is not JSON (line and column),
 * a value that is not an object, and the fields the client owns: model,
 * messages, system and stream, and max_tokens, max_completion_tokens and
 * temperature (--max-tokens and --temperature set those).
 */
int ks_llm_config_set_extra(struct ks_llm_config *cfg, const char *json_text, const char *origin,
			    struct ks_error *err);

/*
 * Add a header line "Name: value" to every request.  Refused, naming only
 * the header (never its value): no colon, a name that is not an HTTP token,
 * an empty value or one with a control character, a name given twice, more
 * than 64, and the headers the client sets itself (Content-Type,
 * Content-Length, Host, Expect, Connection, Transfer-Encoding; the
 * provider's key header and anthropic-version are refused by validation,
 * which knows the provider).  Values of 8 characters or more are treated as
 * secrets: redacted like the key in everything the client returns.
 */
int ks_llm_config_add_header(struct ks_llm_config *cfg, const char *line, const char *origin,
			     struct ks_error *err);

/* Whether the settings make sense; the message names the setting and its option. */
int ks_llm_config_validate(const struct ks_llm_config *cfg, struct ks_error *err);

/* "openai" / "anthropic" <-> enum; parse fails with the accepted names. */
int ks_llm_provider_parse(const char *name, enum ks_llm_provider *provider, struct ks_error *err);
const char *ks_llm_provider_name(enum ks_llm_provider provider);

/* The environment variable the key was (or would be) read from, for hints. */
const char *ks_llm_key_env_name(enum ks_llm_provider provider);

/*
 * Look model up in a prices file (a JSON object: model ->
 * {"input_per_mtok": x, "output_per_mtok": y} and optionally
 * "cached_input_per_mtok" and "cache_write_per_mtok").  *found is 0 when
 * the file has no entry for the model (not an error); a missing file, bad
 * JSON or a bad entry is.
 */
int ks_llm_prices_load(const char *path, const char *model, struct ks_llm_price *price, int *found,
		       struct ks_error *err);

/*
 * One question.  The strings are borrowed for the duration of
 * ks_llm_submit() only (the request body is built there).  A repair turn
 * adds the earlier answer and a follow-up: both or neither.
 */
struct ks_llm_request {
	const char *system;    /* may be NULL */
	const char *user;      /* required */
	const char *assistant; /* repair: the earlier answer, or NULL */
	const char *followup;  /* repair: the user turn after it, or NULL */
};

/*
 * One finished request.  text, stop_reason and error are owned by the
 * response: ks_llm_response_release() frees them.
 */
struct ks_llm_response {
	uint64_t tag;		/* as given to ks_llm_submit() */
	int ok;			/* the endpoint answered with a completion */
	long http_status;	/* of the last attempt; 0: no HTTP answer */
	char *text;		/* ok: the assistant's answer without its reasoning, possibly ""; else NULL */
	char *stop_reason;	/* "stop", "length", "end_turn", "max_tokens", ...; or NULL */
	int cut_off;		/* it stopped at the answer budget (finish "length", stop "max_tokens") */
	uint64_t prompt_tokens; /* all of them, cached ones included */
	uint64_t completion_tokens;  /* all of them, reasoning included */
	uint64_t reasoning_tokens;   /* of completion_tokens */
	int reasoning_estimated;     /* not reported: the shown reasoning's bytes / 4 */
	const char *reasoning;	     /* where reasoning came ("<think>", "reasoning_content", ...); or NULL */
	uint64_t cached_tokens;	     /* of prompt_tokens: read from the prompt cache */
	uint64_t cache_write_tokens; /* of prompt_tokens: written to it (Anthropic) */
	int usage_estimated;	     /* the server reported no usage: bytes / 4 */
	double cost_usd;	     /* 0 without a price */
	double latency_s;	     /* the last attempt's transfer */
	double elapsed_s;	     /* submit to completion: queueing, retries and waits */
	int attempts;		     /* HTTP attempts made (0: failed before the first) */
	char *error;		     /* !ok: what failed, naming URL and status; else NULL */
};

void ks_llm_response_release(struct ks_llm_response *resp);

/* Totals since ks_llm_open() over the responses handed back. */
struct ks_llm_usage {
	uint64_t requests; /* completed */
	uint64_t succeeded;
	uint64_t failed;
	uint64_t attempts;
	uint64_t prompt_tokens;
	uint64_t completion_tokens;
	uint64_t reasoning_tokens;
	uint64_t cached_tokens;
	uint64_t cache_write_tokens;
	uint64_t cut_off; /* answers that stopped at the budget */
	double cost_usd;
	uint64_t pauses;
	uint64_t adaptations; /* parameters changed for the endpoint */
	int tokens_exhausted; /* the token budget is spent */
	int usd_exhausted;    /* the USD budget is spent */
};

struct ks_llm;

/*
 * Validate cfg and open a client; it keeps its own copy of cfg, so the
 * caller may release theirs.  Initialises libcurl's global state on first
 * use (once per process; never cleaned up).
 */
int ks_llm_open(struct ks_llm **llm, const struct ks_llm_config *cfg, struct ks_error *err);
/* Abort transfers, drop unreturned responses, wipe the key, free.  NULL is fine. */
void ks_llm_close(struct ks_llm *llm);

/*
 * Queue a request; it starts when a transfer slot is free (at the latest
 * in the next ks_llm_poll()).  Refuses (-1) while paused, once a budget is
 * spent, or for a malformed request (no user text, half a repair turn,
 * text that is not UTF-8).
 */
int ks_llm_submit(struct ks_llm *llm, const struct ks_llm_request *req, uint64_t tag, struct ks_error *err);

/* 0 when ks_llm_submit() would accept a request now; -1 when not, with err saying why. */
int ks_llm_available(struct ks_llm *llm, struct ks_error *err);

/*
 * Drive the transfers for up to timeout_ms (0: do what can be done now and
 * return; negative: until a request finishes) and hand back at most one
 * finished request: *got is 1 and *out is filled (the caller releases it),
 * or *got is 0 on timeout or when nothing is pending.  Returns -1 only
 * when libcurl itself fails; failed requests are responses.
 */
int ks_llm_poll(struct ks_llm *llm, int timeout_ms, struct ks_llm_response *out, int *got,
		struct ks_error *err);

/* Submitted and not yet handed back by ks_llm_poll(). */
size_t ks_llm_pending(const struct ks_llm *llm);
/* Transfers in flight now (never more than the concurrency). */
size_t ks_llm_in_flight(const struct ks_llm *llm);

int ks_llm_paused(const struct ks_llm *llm);
/* Seconds of pause left; 0 when not paused. */
double ks_llm_pause_left(const struct ks_llm *llm);

void ks_llm_usage(const struct ks_llm *llm, struct ks_llm_usage *usage);

/*
 * The next notice on how the client adapted to the endpoint, oldest first
 * (a sentence naming the parameter, the server's words and what changed);
 * malloc'd, the caller frees; NULL when there is none.  Each is given once.
 */
char *ks_llm_take_notice(struct ks_llm *llm);
/* The body field that carries the answer budget now: "max_completion_tokens" or "max_tokens". */
const char *ks_llm_max_tokens_field(const struct ks_llm *llm);
/* Whether requests carry a temperature now (it was set and the endpoint has not refused it). */
int ks_llm_sends_temperature(const struct ks_llm *llm);

/*
 * The answer in text without its reasoning (malloc'd): every
 * <think>...</think> block removed, an unclosed <think> removed with
 * everything after it, and, when the first tag of the text is a lone
 * </think> (the server's template opened the block), everything up to and
 * including it.  The answer is trimmed of the blank lines and spaces the
 * removal leaves at its start.  *reasoning_bytes gets the bytes of
 * reasoning removed (tags included); 0 means the text had none.
 */
char *ks_llm_strip_think(const char *text, size_t *reasoning_bytes);

#endif
