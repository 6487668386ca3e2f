/*
 * archive_salvage.c - everything readable of a damaged archive, as an
 * export document (`ksearch archive salvage`).
 *
 * LMDB keeps no checksums inside pages, so a damaged page in the middle
 * of data.mdb is found only when a read walks into it, and a read may then
 * fail, loop, or fault.  So the reading happens in a child process: it
 * opens the archive read-only and sends what it reads, one JSON line at a
 * time, record by record in id order (each a walk of the B-tree from its
 * root, so a damaged page loses the records under it, not those after).
 * When a child fails, faults or stalls, the parent notes the record it
 * was reading as lost and starts another after it.  The parent never
 * opens the damaged environment (never across fork(): the child does,
 * after it), and the damaged archive is never written.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive_internal.h"
#include "ksearch/base/sha256.h"
#include "ksearch/base/util.h"

/* A reader that sends nothing for this long is stuck in a damaged page. */
#define SALVAGE_STALL_MS 20000

/* ---- the reading child ---- */

static void send_line(FILE *out, json_t *msg)
{
	json_dumpf(msg, out, JSON_COMPACT | JSON_ENSURE_ASCII);
	fputc('\n', out);
	fflush(out);
	json_decref(msg);
}

/*
 * The last record id: the candidates database's last key, or the counters
 * when that walk fails; *count the records the counters say there are (0
 * when they cannot be read), to find records a damaged page hides.
 */
static uint64_t last_id(struct ks_archive *ar, uint64_t *count)
{
	struct ks_counters c;
	struct ks_error err;
	MDB_cursor *cur = NULL;
	MDB_txn *txn;
	MDB_val key, val;
	uint64_t last = 0;

	*count = 0;
	if (ks_archive_txn_begin(ar, 1, &txn, &err) < 0)
		return 0;
	if (!mdb_cursor_open(txn, ar->candidates, &cur) && !mdb_cursor_get(cur, &key, &val, MDB_LAST) &&
	    key.mv_size == 8)
		last = ks_be64_get(key.mv_data);
	if (cur)
		mdb_cursor_close(cur);
	if (ks_counters_load(ar, txn, &c, &err) == 0) {
		*count = c.candidates;
		if (c.next_id > last + 1)
			last = c.next_id - 1;
	}
	ks_archive_txn_end(ar, txn);
	return last;
}

static json_t *header_json(struct ks_archive *ar, uint64_t last, uint64_t count)
{
	return json_pack("{s:{s:s, s:s, s:o, s:f}, s:I, s:I}", "header", "op", ar->op, "gpu", ar->gpu, "grid",
			 ks_grid_to_json(ar->axes, ar->n_axes), "qd_offset", ar->qd_offset, "last_id",
			 (json_int_t)last, "count", (json_int_t)count);
}

/* Whether source is the text record's source_hash names (a damaged chunk reads as other text). */
static int source_matches(const json_t *record, const char *source)
{
	unsigned char want[KS_SHA256_LEN], got[KS_SHA256_LEN];

	ks_sha256(source, strlen(source), got);
	return ks_unhex_sha256(json_string_value(json_object_get(record, "source_hash")), want) == 0 &&
	       !memcmp(want, got, KS_SHA256_LEN);
}

static void send_prompts(struct ks_archive *ar, FILE *out)
{
	struct ks_error err;
	json_t *prompts;
	size_t i;
	json_t *p;

	send_line(out, json_pack("{s:b}", "prompts", 1));
	if (ks_archive_prompts(ar, &prompts, &err) < 0) {
		send_line(out, json_pack("{s:s}", "prompts_lost", err.msg));
		return;
	}
	json_array_foreach(prompts, i, p) send_line(out, json_pack("{s:O}", "prompt", p));
	json_decref(prompts);
}

/* The child: records from..last (and the header first when asked), then the prompts. */
static void reader_main(int fd, const char *root, const char *op, const char *gpu, uint64_t from, int header)
{
	struct ks_archive_options options = { .flags = KS_ARCHIVE_READONLY };
	FILE *out = fdopen(fd, "w");
	struct ks_archive *ar;
	struct ks_error err;
	uint64_t last, count;

	if (!out)
		_exit(2);
	if (ks_archive_open(&ar, root, op, gpu, &options, &err) < 0) {
		send_line(out, json_pack("{s:s}", "fatal", err.msg));
		_exit(1);
	}
	last = last_id(ar, &count);
	if (header)
		send_line(out, header_json(ar, last, count));
	for (uint64_t id = from; id <= last; id++) {
		json_t *record = NULL;
		char *source = NULL;

		if (ks_archive_get(ar, id, &record, &source, &err) < 0)
			send_line(out, json_pack("{s:I, s:s}", "id", (json_int_t)id, "lost", err.msg));
		else if (!record)
			send_line(out, json_pack("{s:I}", "id", (json_int_t)id)); /* never written */
		else if (ks_archive_check_record(record, &err) < 0)
			send_line(out, json_pack("{s:I, s:s}", "id", (json_int_t)id, "lost", err.msg));
		else if (!source_matches(record, source))
			send_line(out, json_pack("{s:I, s:s}", "id", (json_int_t)id, "lost",
						 "its source text reads damaged (its SHA-256 is not its "
						 "source_hash)"));
		else
			send_line(out, json_pack("{s:I, s:O, s:s}", "id", (json_int_t)id, "record", record,
						 "source", source));
		json_decref(record);
		free(source);
	}
	send_prompts(ar, out);
	send_line(out, json_pack("{s:b}", "done", 1));
	ks_archive_close(ar);
	fclose(out);
	_exit(0);
}

/* ---- the parent ---- */

struct reader {
	pid_t pid;
	int fd;
	struct ks_strbuf buf; /* bytes read, not yet a whole line */
	size_t used;	      /* of buf, already handed out */
};

static int reader_start(struct reader *r, const char *root, const char *op, const char *gpu, uint64_t from,
			int header, struct ks_error *err)
{
	int fds[2];

	if (pipe(fds) < 0)
		return ks_fail(err, "salvage: cannot make a pipe: %s", strerror(errno));
	fflush(NULL);
	r->pid = fork();
	if (r->pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return ks_fail(err, "salvage: cannot start a reader: %s", strerror(errno));
	}
	if (r->pid == 0) {
		close(fds[0]);
		reader_main(fds[1], root, op, gpu, from, header);
	}
	close(fds[1]);
	r->fd = fds[0];
	ks_strbuf_init(&r->buf);
	r->used = 0;
	return 0;
}

/* The next line the reader sent (parsed), NULL at its end, after a stall, or on bad output. */
static json_t *reader_next(struct reader *r, int *stalled)
{
	*stalled = 0;
	for (;;) {
		char *start = r->buf.buf + r->used, *nl = memchr(start, '\n', r->buf.len - r->used);
		struct pollfd p = { r->fd, POLLIN, 0 };
		char chunk[65536];
		ssize_t n;

		if (nl) {
			json_t *msg = json_loadb(start, (size_t)(nl - start), 0, NULL);

			r->used = (size_t)(nl + 1 - r->buf.buf);
			return msg;
		}
		if (poll(&p, 1, SALVAGE_STALL_MS) == 0) {
			*stalled = 1;
			return NULL;
		}
		n = read(r->fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		ks_strbuf_add(&r->buf, chunk, (size_t)n);
	}
}

/* End the reader; what became of it, in words, into why ("" when it ended well). */
static void reader_end(struct reader *r, int stalled, char *why, size_t size)
{
	int status = 0;

	if (stalled)
		kill(r->pid, SIGKILL);
	close(r->fd);
	while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
		;
	ks_strbuf_release(&r->buf);
	if (stalled)
		snprintf(why, size, "reading it did not finish in %d s (a damaged page)",
			 SALVAGE_STALL_MS / 1000);
	else if (WIFSIGNALED(status))
		snprintf(why, size, "reading it crashed the reader (%s: a damaged page)",
			 strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status) && WEXITSTATUS(status))
		snprintf(why, size, "the reader stopped there (exit %d)", WEXITSTATUS(status));
	else
		why[0] = '\0';
}

static void lost_add(struct ks_archive_salvage *s, uint64_t id, const char *why)
{
	KS_ALLOC_GROW(s->lost, s->n_lost + 1, s->alloc_lost);
	s->lost[s->n_lost].id = id;
	snprintf(s->lost[s->n_lost].why, sizeof(s->lost[s->n_lost].why), "%s", why);
	s->n_lost++;
}

/* A document with the export's header fields (archive/README.md) and empty lists. */
static json_t *new_doc(const json_t *header)
{
	char now[32];

	ks_archive_now(now, sizeof(now));
	return json_pack("{s:s, s:i, s:O, s:O, s:O, s:O, s:s, s:b, s:[], s:{}, s:[]}", "format",
			 "ksearch-archive", "version", KS_ARCHIVE_EXPORT_VERSION, "op",
			 json_object_get(header, "op"), "gpu", json_object_get(header, "gpu"), "grid",
			 json_object_get(header, "grid"), "qd_offset", json_object_get(header, "qd_offset"),
			 "exported", now, "elites_only", 0, "candidates", "sources", "prompts");
}

/* One line from a reader into s; *last_id follows the records. */
static void take(struct ks_archive_salvage *s, json_t *msg, uint64_t *last_seen, int *in_prompts, int *done)
{
	const json_t *id = json_object_get(msg, "id"), *record = json_object_get(msg, "record");
	const char *lost = json_string_value(json_object_get(msg, "lost"));

	if (json_object_get(msg, "header")) {
		s->doc = new_doc(json_object_get(msg, "header"));
		s->last_id = (uint64_t)json_integer_value(json_object_get(msg, "last_id"));
		s->counted = (uint64_t)json_integer_value(json_object_get(msg, "count"));
	} else if (json_is_integer(id)) {
		*last_seen = (uint64_t)json_integer_value(id);
		if (lost) {
			lost_add(s, *last_seen, lost);
		} else if (record) {
			const char *hash = json_string_value(json_object_get(record, "source_hash"));

			json_array_append(json_object_get(s->doc, "candidates"), (json_t *)record);
			json_object_set(json_object_get(s->doc, "sources"), hash,
					json_object_get(msg, "source"));
			s->records++;
		}
	} else if (json_object_get(msg, "prompts")) {
		*in_prompts = 1;
	} else if (json_object_get(msg, "prompt")) {
		json_array_append(json_object_get(s->doc, "prompts"), json_object_get(msg, "prompt"));
		s->prompts++;
	} else if (json_object_get(msg, "prompts_lost")) {
		snprintf(s->prompts_lost, sizeof(s->prompts_lost), "%s",
			 json_string_value(json_object_get(msg, "prompts_lost")));
	} else if (json_object_get(msg, "done")) {
		*done = 1;
	}
}

int ks_archive_salvage_read(const char *root, const char *op_key, const char *gpu_model,
			    struct ks_archive_salvage *s, struct ks_error *err)
{
	uint64_t from = 1, last_seen = 0;
	int done = 0, in_prompts = 0;

	memset(s, 0, sizeof(*s));
	while (!done) {
		struct reader r;
		char why[160];
		json_t *msg;
		int stalled = 0;

		if (reader_start(&r, root, op_key, gpu_model, from, !s->doc, err) < 0)
			goto fail;
		while ((msg = reader_next(&r, &stalled))) {
			const char *fatal = json_string_value(json_object_get(msg, "fatal"));

			if (fatal) {
				ks_fail(err, "%s", fatal);
				json_decref(msg);
				reader_end(&r, 0, why, sizeof(why));
				goto fail;
			}
			take(s, msg, &last_seen, &in_prompts, &done);
			json_decref(msg);
		}
		reader_end(&r, stalled, why, sizeof(why));
		if (done)
			break;
		if (!s->doc) {
			ks_fail(err, "the archive's header (its meta database) cannot be read: %s",
				why[0] ? why : "the reader said nothing");
			goto fail;
		}
		if (in_prompts || last_seen >= s->last_id) {
			/* the prompts are one walk: what came before the fault is kept */
			snprintf(s->prompts_lost, sizeof(s->prompts_lost), "%s",
				 why[0] ? why : "the reader stopped");
			break;
		}
		/* the record after the last one sent is where the reader stopped */
		lost_add(s, last_seen + 1, why[0] ? why : "the reader stopped there");
		last_seen++;
		from = last_seen + 1;
	}
	return 0;
fail:
	ks_archive_salvage_release(s);
	return -1;
}

void ks_archive_salvage_release(struct ks_archive_salvage *s)
{
	json_decref(s->doc);
	free(s->lost);
	memset(s, 0, sizeof(*s));
}
