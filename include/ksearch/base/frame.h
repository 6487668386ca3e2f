/*
 * frame.h - the framed protocol between ksearch and its child processes.
 *
 * A frame is one JSON message plus up to KS_FRAME_MAX_BLOBS binary blobs
 * (cubins, PTX, output buffers):
 *
 *   "KSF1" | u32 json_bytes | u32 n_blobs | u64 blob_bytes[n_blobs] | json | blobs
 *
 * little-endian, written in one go over a pipe.  Sizes are bounded so that
 * a confused or hostile peer cannot make the reader allocate without limit;
 * anything malformed is an error, never a crash.  Reads and writes both
 * take a deadline: that is how the coordinator notices a worker stuck in a
 * kernel, and why neither side can hang on a peer that stopped listening.
 */
#ifndef KSEARCH_FRAME_H
#define KSEARCH_FRAME_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"

#define KS_FRAME_MAX_BLOBS 8
#define KS_FRAME_MAX_JSON (64u << 20)
#define KS_FRAME_MAX_BLOB (1ull << 30)

struct ks_blob {
	void *data; /* owned by whoever filled the struct */
	size_t size;
};

enum ks_frame_status {
	KS_FRAME_OK,
	KS_FRAME_EOF,	  /* the peer closed the pipe (it exited or crashed) */
	KS_FRAME_TIMEOUT, /* the deadline passed first */
	KS_FRAME_BAD,	  /* malformed frame or I/O error (err says which) */
};

/*
 * Write msg (borrowed) and blobs, finishing before deadline_ms on the
 * monotonic clock (negative: no deadline).  The deadline holds only on a
 * non-blocking fd (ks_child_spawn() makes both message pipes so): a peer
 * that stopped reading cannot block the writer past it.  Fails on I/O
 * errors (EPIPE included) and on the deadline.
 */
int ks_frame_write(int fd, int64_t deadline_ms, const json_t *msg, const struct ks_blob *blobs,
		   size_t n_blobs, struct ks_error *err);

/*
 * Read one frame, waiting until deadline_ms on the monotonic clock
 * (ks_now_ms(); negative: no deadline).  On KS_FRAME_OK the caller owns
 * *msg (json_decref) and each blob's data (free) and the *blobs array.
 */
enum ks_frame_status ks_frame_read(int fd, int64_t deadline_ms, json_t **msg, struct ks_blob **blobs,
				   size_t *n_blobs, struct ks_error *err);

void ks_blobs_free(struct ks_blob *blobs, size_t n_blobs);

/* Milliseconds on the monotonic clock. */
int64_t ks_now_ms(void);

#endif
