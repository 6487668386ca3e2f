/*
 * frame.c - framed JSON + blobs over pipes, with deadlines.
 */
#include "ksearch/base/frame.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/util.h"

int64_t ks_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Write everything before the deadline.  On a non-blocking fd a full pipe
 * (a peer that stopped reading) is waited out with poll(); on a blocking
 * one the deadline can only be checked between writes.
 */
static int write_all(int fd, const void *data, size_t size, int64_t deadline_ms, struct ks_error *err)
{
	const char *p = data;

	while (size) {
		ssize_t n = write(fd, p, size);

		if (n >= 0) {
			p += n;
			size -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return ks_fail(err, "writing to the other process: %s", strerror(errno));
		for (;;) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int64_t left = deadline_ms < 0 ? 1000000 : deadline_ms - ks_now_ms();
			int rc;

			if (left <= 0)
				return ks_fail(err,
					       "the other process stopped reading: a message could not be "
					       "written before its deadline");
			rc = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
			if (rc > 0 || (rc < 0 && errno != EINTR))
				break;
		}
	}
	return 0;
}

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

int ks_frame_write(int fd, int64_t deadline_ms, const json_t *msg, const struct ks_blob *blobs,
		   size_t n_blobs, struct ks_error *err)
{
	unsigned char header[12 + 8 * KS_FRAME_MAX_BLOBS];
	char *json;
	size_t json_len, header_len = 12 + 8 * n_blobs;
	int ret = -1;

	if (n_blobs > KS_FRAME_MAX_BLOBS)
		return ks_fail(err, "internal error: %zu blobs in one frame (at most %d)", n_blobs,
			       KS_FRAME_MAX_BLOBS);
	json = json_dumps(msg, JSON_COMPACT);
	if (!json)
		return ks_fail(err, "internal error: message cannot be encoded as JSON");
	json_len = strlen(json);
	memcpy(header, "KSF1", 4);
	put_u32(header + 4, (uint32_t)json_len);
	put_u32(header + 8, (uint32_t)n_blobs);
	for (size_t i = 0; i < n_blobs; i++)
		put_u64(header + 12 + 8 * i, blobs[i].size);
	if (write_all(fd, header, header_len, deadline_ms, err) < 0 ||
	    write_all(fd, json, json_len, deadline_ms, err) < 0)
		goto cleanup;
	for (size_t i = 0; i < n_blobs; i++)
		if (blobs[i].size && write_all(fd, blobs[i].data, blobs[i].size, deadline_ms, err) < 0)
			goto cleanup;
	ret = 0;
cleanup:
	free(json);
	return ret;
}

/* Read exactly size bytes before the deadline. */
static enum ks_frame_status read_all(int fd, void *data, size_t size, int64_t deadline_ms, int at_start,
				     struct ks_error *err)
{
	char *p = data;
	size_t got = 0;

	while (got < size) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int timeout = -1, rc;
		ssize_t n;

		if (deadline_ms >= 0) {
			int64_t left = deadline_ms - ks_now_ms();

			if (left <= 0) {
				ks_fail(err, "no answer before the deadline");
				return KS_FRAME_TIMEOUT;
			}
			timeout = left > 1000000 ? 1000000 : (int)left;
		}
		rc = poll(&pfd, 1, timeout);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			ks_fail(err, "waiting for the other process: %s", strerror(errno));
			return KS_FRAME_BAD;
		}
		if (rc == 0)
			continue; /* the deadline check above decides */
		n = read(fd, p + got, size - got);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			ks_fail(err, "reading from the other process: %s", strerror(errno));
			return KS_FRAME_BAD;
		}
		if (n == 0) {
			if (at_start && got == 0) {
				ks_fail(err, "the other process closed the pipe");
				return KS_FRAME_EOF;
			}
			ks_fail(err, "the other process closed the pipe in the middle of a message");
			return KS_FRAME_EOF;
		}
		got += (size_t)n;
	}
	return KS_FRAME_OK;
}

void ks_blobs_free(struct ks_blob *blobs, size_t n_blobs)
{
	if (!blobs)
		return;
	for (size_t i = 0; i < n_blobs; i++)
		free(blobs[i].data);
	free(blobs);
}

enum ks_frame_status ks_frame_read(int fd, int64_t deadline_ms, json_t **msg, struct ks_blob **blobs,
				   size_t *n_blobs, struct ks_error *err)
{
	unsigned char header[12], sizes[8 * KS_FRAME_MAX_BLOBS];
	enum ks_frame_status st;
	uint32_t json_len, count;
	char *json = NULL;
	json_error_t jerr;

	*msg = NULL;
	*blobs = NULL;
	*n_blobs = 0;
	st = read_all(fd, header, sizeof(header), deadline_ms, 1, err);
	if (st != KS_FRAME_OK)
		return st;
	if (memcmp(header, "KSF1", 4)) {
		ks_fail(err, "malformed message from the other process (bad magic)");
		return KS_FRAME_BAD;
	}
	json_len = (uint32_t)get_le(header + 4, 4);
	count = (uint32_t)get_le(header + 8, 4);
	if (json_len > KS_FRAME_MAX_JSON || count > KS_FRAME_MAX_BLOBS) {
		ks_fail(err, "malformed message from the other process (%u bytes of JSON, %u blobs)",
			json_len, count);
		return KS_FRAME_BAD;
	}
	st = read_all(fd, sizes, 8 * count, deadline_ms, 0, err);
	if (st != KS_FRAME_OK)
		return st;
	json = ks_malloc(json_len + 1);
	st = read_all(fd, json, json_len, deadline_ms, 0, err);
	if (st != KS_FRAME_OK)
		goto fail;
	json[json_len] = '\0';
	*blobs = ks_calloc(count ? count : 1, sizeof(**blobs));
	for (uint32_t i = 0; i < count; i++) {
		uint64_t size = get_le(sizes + 8 * i, 8);

		if (size > KS_FRAME_MAX_BLOB) {
			ks_fail(err, "malformed message from the other process (blob of %llu bytes)",
				(unsigned long long)size);
			st = KS_FRAME_BAD;
			goto fail;
		}
		(*blobs)[i].size = size;
		(*blobs)[i].data = ks_malloc(size ? size : 1);
		*n_blobs = i + 1;
		st = read_all(fd, (*blobs)[i].data, size, deadline_ms, 0, err);
		if (st != KS_FRAME_OK)
			goto fail;
	}
	*msg = json_loadb(json, json_len, 0, &jerr);
	if (!*msg) {
		ks_fail(err, "malformed message from the other process: %s", jerr.text);
		st = KS_FRAME_BAD;
		goto fail;
	}
	free(json);
	return KS_FRAME_OK;
fail:
	free(json);
	ks_blobs_free(*blobs, *n_blobs);
	*blobs = NULL;
	*n_blobs = 0;
	return st;
}
