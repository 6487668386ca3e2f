/*
 * comm.c - messages between ranks over MPI (cluster.h).  One thread per
 * process calls these, so MPI_THREAD_SERIALIZED is enough.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/util.h"
#include "ksearch/cluster/cluster.h"

#define TAG 27 /* the number: any fixed tag would do */

struct pending_send {
	MPI_Request req;
	char *bytes;
};

struct ks_cluster_comm {
	int rank, size;
	struct pending_send *sends;
	size_t n_sends, alloc_sends;
};

static int mpi_fail(struct ks_error *err, int rc, const char *what)
{
	char text[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
		snprintf(text, sizeof(text), "error %d", rc);
	return ks_fail(err, "MPI: %s: %s", what, text);
}

int ks_cluster_comm_open(struct ks_cluster_comm **out, int *argc, char ***argv, struct ks_error *err)
{
	struct ks_cluster_comm *c;
	int provided = 0, rc;

	*out = NULL;
	rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Init_thread");
	if (provided < MPI_THREAD_SERIALIZED) {
		MPI_Finalize();
		return ks_fail(err,
			       "MPI: the library gives thread level %d, ksearch needs MPI_THREAD_SERIALIZED",
			       provided);
	}
	/* a dead peer is an error to handle (a rank's jobs go elsewhere), not the end of the job */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	c = ks_calloc(1, sizeof(*c));
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	*out = c;
	return 0;
}

int ks_cluster_comm_rank(const struct ks_cluster_comm *c)
{
	return c->rank;
}

int ks_cluster_comm_size(const struct ks_cluster_comm *c)
{
	return c->size;
}

/* Free the buffers of the sends MPI is done with. */
static void reap_sends(struct ks_cluster_comm *c)
{
	size_t kept = 0;

	for (size_t i = 0; i < c->n_sends; i++) {
		int done = 0;

		if (MPI_Test(&c->sends[i].req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) {
			free(c->sends[i].bytes);
			continue;
		}
		c->sends[kept++] = c->sends[i];
	}
	c->n_sends = kept;
}

int ks_cluster_comm_send_bytes(struct ks_cluster_comm *c, int rank, const void *bytes, size_t len,
			       struct ks_error *err)
{
	struct pending_send s;
	int rc;

	if (len > KS_CLUSTER_MAX_MESSAGE)
		return ks_fail(err, "a message of %zu bytes for rank %d, at most %u", len, rank,
			       KS_CLUSTER_MAX_MESSAGE);
	s.bytes = ks_malloc(len ? len : 1);
	memcpy(s.bytes, bytes, len);
	rc = MPI_Isend(s.bytes, (int)len, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, &s.req);
	if (rc != MPI_SUCCESS) {
		free(s.bytes);
		return mpi_fail(err, rc, "sending to a rank");
	}
	KS_ALLOC_GROW(c->sends, c->n_sends + 1, c->alloc_sends);
	c->sends[c->n_sends++] = s;
	reap_sends(c);
	return 0;
}

int ks_cluster_comm_send(struct ks_cluster_comm *c, int rank, const struct ks_cluster_msg *msg,
			 struct ks_error *err)
{
	char *bytes;
	size_t len;
	int ret;

	ks_cluster_msg_encode(msg, &bytes, &len);
	ret = ks_cluster_comm_send_bytes(c, rank, bytes, len, err);
	free(bytes);
	return ret;
}

int ks_cluster_comm_poll(struct ks_cluster_comm *c, int *from, struct ks_cluster_msg *msg,
			 struct ks_error *err)
{
	MPI_Status st;
	char *bytes = NULL;
	int flag = 0, count = 0, rc, ret = -1;

	*from = -1;
	ks_cluster_msg_init(msg, KS_CLUSTER_TYPE_COUNT);
	reap_sends(c);
	rc = MPI_Iprobe(MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &flag, &st);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "waiting for messages");
	if (!flag)
		return 0;
	*from = st.MPI_SOURCE;
	MPI_Get_count(&st, MPI_BYTE, &count);
	/* the size is known before anything is allocated: a confused rank cannot make this one allocate much
	 */
	if (count < 0 || (size_t)count > KS_CLUSTER_MAX_MESSAGE) {
		char one;

		MPI_Recv(&one, 0, MPI_BYTE, st.MPI_SOURCE, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		return ks_fail(err, "rank %d sent a message of %d bytes, at most %u", *from, count,
			       KS_CLUSTER_MAX_MESSAGE);
	}
	bytes = ks_malloc((size_t)count + 1);
	rc = MPI_Recv(bytes, count, MPI_BYTE, st.MPI_SOURCE, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS) {
		mpi_fail(err, rc, "receiving a message");
		goto cleanup;
	}
	if (ks_cluster_msg_decode(bytes, (size_t)count, msg, err) < 0) {
		ks_error_prefix(err, "rank %d sent a malformed message", *from);
		goto cleanup;
	}
	ret = 1;
cleanup:
	free(bytes);
	return ret;
}

/*
 * Open MPI's MPI_Finalize ends in a fence over every rank of the job, and
 * a rank that was killed never arrives: the survivors wait there for
 * ever (seen with Open MPI 4.1 under load).  A watchdog gives Finalize
 * until its deadline and then ends the process with the status it was
 * about to have; what mattered (results, the archive) is already done.
 */
struct finalize_watch {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	int done;
	int64_t deadline_ms;
	int status;
};

static void *finalize_watchdog(void *arg)
{
	struct finalize_watch *w = arg;
	struct timespec until;
	int64_t left = w->deadline_ms - ks_now_ms();

	clock_gettime(CLOCK_REALTIME, &until);
	if (left < 0)
		left = 0;
	until.tv_sec += (time_t)(left / 1000);
	until.tv_nsec += (long)(left % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->done) {
		if (pthread_cond_timedwait(&w->done_cond, &w->lock, &until) != 0 && !w->done) {
			fprintf(stderr, "ksearch: MPI_Finalize did not return (a rank of the job is gone); "
					"exiting without it\n");
			fflush(NULL);
			_exit(w->status);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void ks_cluster_comm_close(struct ks_cluster_comm *c, int64_t deadline_ms, int status)
{
	struct finalize_watch w = { .done = 0, .status = status };
	pthread_t watchdog;
	int watching;

	if (!c)
		return;
	while (c->n_sends && ks_now_ms() < deadline_ms) {
		reap_sends(c);
		if (c->n_sends)
			usleep(1000);
	}
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.done_cond, NULL);
	w.deadline_ms = (deadline_ms > ks_now_ms() ? deadline_ms : ks_now_ms()) + KS_CLUSTER_FINALIZE_MS;
	watching = pthread_create(&watchdog, NULL, finalize_watchdog, &w) == 0;
	MPI_Finalize();
	if (watching) {
		pthread_mutex_lock(&w.lock);
		w.done = 1;
		pthread_cond_signal(&w.done_cond);
		pthread_mutex_unlock(&w.lock);
		pthread_join(watchdog, NULL);
	}
	pthread_cond_destroy(&w.done_cond);
	pthread_mutex_destroy(&w.lock);
	/* a send to a dead rank never completes: its buffer is freed only now that MPI is gone */
	for (size_t i = 0; i < c->n_sends; i++)
		free(c->sends[i].bytes);
	free(c->sends);
	free(c);
}
