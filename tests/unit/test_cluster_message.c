/*
 * test_cluster_message.c - the ranks' messages (cluster/message.h) and the rank
 * detection (cluster/role.h): no MPI needed, so they run in every build and
 * under the sanitizers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ksearch/cluster/message.h"
#include "ksearch/cluster/role.h"

static void decode_fails(const char *bytes, const char *expect)
{
	struct ks_cluster_msg msg;
	struct ks_error err;

	ks_error_clear(&err);
	assert_int_equal(ks_cluster_msg_decode(bytes, strlen(bytes), &msg, &err), -1);
	if (!strstr(err.msg, expect))
		fail_msg("'%s': expected an error with '%s', got '%s'", bytes, expect, err.msg);
	ks_cluster_msg_release(&msg);
}

static void test_job_round_trip(void **state)
{
	struct ks_cluster_msg in, out;
	struct ks_error err;
	char *bytes;
	size_t len;

	(void)state;
	ks_cluster_msg_init(&in, KS_CLUSTER_JOB);
	in.job = 7;
	in.family = strdup("llm-3");
	in.path = strdup("llm-3.cu");
	in.source = strdup("__global__ void k() {}\n/* \"quoted\" */");
	in.params[0] = -4;
	in.params[1] = 1LL << 40;
	in.n_params = 2;
	in.deadline_ms = 60000;
	in.evaluate = 1;
	ks_cluster_msg_encode(&in, &bytes, &len);
	assert_int_equal(ks_cluster_msg_decode(bytes, len, &out, &err), 0);
	assert_int_equal(out.type, KS_CLUSTER_JOB);
	assert_int_equal(out.job, 7);
	assert_string_equal(out.family, "llm-3");
	assert_string_equal(out.source, in.source);
	assert_int_equal(out.n_params, 2);
	assert_int_equal(out.params[1], 1LL << 40);
	assert_int_equal(out.deadline_ms, 60000);
	assert_true(out.evaluate);
	free(bytes);
	ks_cluster_msg_release(&in);
	ks_cluster_msg_release(&out);
}

static void test_result_round_trip(void **state)
{
	struct ks_cluster_msg in, out;
	struct ks_error err;
	char *bytes;
	size_t len;

	(void)state;
	ks_cluster_msg_init(&in, KS_CLUSTER_BUILT);
	in.job = 9;
	in.held = 1;
	ks_result_fail(&in.result, KS_VERDICT_COMPILE_ERROR, "line 3: expected ';'");
	ks_cluster_msg_encode(&in, &bytes, &len);
	assert_int_equal(ks_cluster_msg_decode(bytes, len, &out, &err), 0);
	assert_int_equal(out.type, KS_CLUSTER_BUILT);
	assert_true(out.held);
	assert_int_equal(out.result.verdict, KS_VERDICT_COMPILE_ERROR);
	assert_string_equal(out.result.evidence, "line 3: expected ';'");
	free(bytes);
	ks_cluster_msg_release(&in);
	ks_cluster_msg_release(&out);
}

static void test_evidence_round_trip(void **state)
{
	struct ks_cluster_msg in, out;
	struct ks_error err;
	char *bytes;
	size_t len;

	(void)state;
	ks_cluster_msg_init(&in, KS_CLUSTER_EVIDENCE);
	in.job = 12;
	in.kind = KS_CLUSTER_SANITIZE;
	in.family = strdup("gqa_ws");
	in.path = strdup("operators/gqa/seeds/gqa_ws.cu");
	in.source = strdup("__global__ void k() {}");
	in.params[0] = 3;
	in.n_params = 1;
	in.deadline_ms = 900000;
	ks_cluster_msg_encode(&in, &bytes, &len);
	assert_int_equal(ks_cluster_msg_decode(bytes, len, &out, &err), 0);
	assert_int_equal(out.type, KS_CLUSTER_EVIDENCE);
	assert_int_equal(out.job, 12);
	assert_int_equal(out.kind, KS_CLUSTER_SANITIZE);
	assert_string_equal(out.family, "gqa_ws");
	assert_string_equal(out.source, in.source);
	assert_int_equal(out.n_params, 1);
	assert_int_equal(out.params[0], 3);
	assert_int_equal(out.deadline_ms, 900000);
	free(bytes);
	ks_cluster_msg_release(&out);

	/* the answer: an outcome object, carried as it is */
	ks_cluster_msg_release(&in);
	ks_cluster_msg_init(&in, KS_CLUSTER_OUTCOME);
	in.job = 12;
	in.outcome = json_pack("{s:s, s:s}", "status", "clean", "why", "");
	ks_cluster_msg_encode(&in, &bytes, &len);
	assert_int_equal(ks_cluster_msg_decode(bytes, len, &out, &err), 0);
	assert_int_equal(out.type, KS_CLUSTER_OUTCOME);
	assert_int_equal(out.job, 12);
	assert_true(json_equal(out.outcome, in.outcome));
	free(bytes);
	ks_cluster_msg_release(&in);
	ks_cluster_msg_release(&out);
}

static void test_malformed(void **state)
{
	(void)state;
	decode_fails("", "not a ksearch message");
	decode_fails("KSF1{}", "not a ksearch message");
	decode_fails("KSD1{\"type\":", "does not parse at byte");
	decode_fails("KSD1[1]", "a message is a list, expected an object");
	decode_fails("KSD1{\"type\":\"launch\"}", "unknown type 'launch'");
	decode_fails("KSD1{\"type\":\"eval\",\"deadline_ms\":5}", "'eval' message without 'job'");
	decode_fails("KSD1{\"type\":\"drop\",\"job\":0}", "'job' is 0, expected 1 to");
	decode_fails("KSD1{\"type\":\"result\",\"job\":2,\"result\":[]}",
		     "'result' is a list, expected an object");
	decode_fails("KSD1{\"type\":\"job\",\"job\":1,\"family\":\"f\",\"path\":\"p\",\"source\":\"s\","
		     "\"deadline_ms\":9,\"evaluate\":false,\"params\":[1,\"2\"]}",
		     "param 1 is a string, expected an integer");
	decode_fails("KSD1{\"type\":\"job\",\"job\":1,\"family\":\"f\",\"path\":\"p\",\"source\":\"s\","
		     "\"deadline_ms\":9,\"evaluate\":false,\"params\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
		     "0,0,0,0,"
		     "0,0,0,0,0,0,0,0,0,0]}",
		     "has 33 params, at most 32");
	decode_fails("KSD1{\"type\":\"evidence\",\"job\":1,\"kind\":\"trace\",\"family\":\"f\"}",
		     "'kind' is another word, expected \"profile\" or \"sanitize\"");
	decode_fails("KSD1{\"type\":\"evidence\",\"job\":1,\"family\":\"f\"}", "'kind' is missing");
	decode_fails(
		"KSD1{\"type\":\"evidence\",\"job\":1,\"kind\":\"profile\",\"family\":\"f\",\"path\":\"p\","
		"\"source\":\"s\",\"deadline_ms\":9,\"params\":{}}",
		"'evidence' message's 'params' is an object, expected a list");
	decode_fails("KSD1{\"type\":\"outcome\",\"job\":4,\"outcome\":\"clean\"}",
		     "'outcome' is a string, expected an object");
	decode_fails("KSD1{\"type\":\"outcome\",\"job\":4}", "'outcome' is missing");
	decode_fails("KSD1{\"type\":\"failed\",\"job\":1,\"error\":\"a\\u0000b\"}",
		     "is not allowed without JSON_ALLOW_NUL");
}

static void test_role(void **state)
{
	char *none[] = { "PATH=/bin", NULL };
	char *ompi[] = { "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3", NULL };
	char *one[] = { "OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_RANK=0", NULL };
	char *bad[] = { "PMI_SIZE=2", "PMI_RANK=2", NULL };
	char *slurm[] = { "SLURM_NTASKS=8", "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", NULL };
	char *ompi_local[] = { "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
			       "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL };
	char *ompi_bad_local[] = { "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
				   "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=2", NULL };
	char *hydra[] = { "PMI_SIZE=8", "PMI_RANK=5", "MPI_LOCALNRANKS=4", "MPI_LOCALRANKID=3", NULL };
	char *slurm_nodes[] = { "SLURM_STEP_NUM_TASKS=7", "SLURM_PROCID=6",
				"SLURM_NODEID=2",	  "SLURM_STEP_TASKS_PER_NODE=2(x2),3",
				"SLURM_LOCALID=2",	  NULL };
	char *slurm_garbled[] = { "SLURM_STEP_NUM_TASKS=7",	    "SLURM_PROCID=6",  "SLURM_NODEID=2",
				  "SLURM_STEP_TASKS_PER_NODE=2(x2", "SLURM_LOCALID=2", NULL };
	struct ks_cluster_role role;

	(void)state;
	ks_cluster_role_detect(&role, none);
	assert_int_equal(role.size, 1);
	ks_cluster_role_detect(&role, ompi);
	assert_int_equal(role.size, 4);
	assert_int_equal(role.rank, 3);
	assert_string_equal(role.launcher, "Open MPI");
	ks_cluster_role_detect(&role, one);
	assert_int_equal(role.size, 1);
	ks_cluster_role_detect(&role, bad); /* a rank outside the size: not an MPI job */
	assert_int_equal(role.size, 1);
	ks_cluster_role_detect(&role, slurm); /* the step's two tasks, not the allocation's eight */
	assert_int_equal(role.size, 2);
	assert_int_equal(role.local_size, 1); /* not told: alone on its host */
	assert_int_equal(role.local_rank, 0);
	ks_cluster_role_detect(&role, ompi_local);
	assert_int_equal(role.local_size, 2);
	assert_int_equal(role.local_rank, 1);
	ks_cluster_role_detect(&role, hydra);
	assert_int_equal(role.rank, 5);
	assert_int_equal(role.local_size, 4);
	assert_int_equal(role.local_rank, 3);
	ks_cluster_role_detect(&role, slurm_nodes); /* node 2 of "2(x2),3": three tasks there */
	assert_int_equal(role.size, 7);
	assert_int_equal(role.local_size, 3);
	assert_int_equal(role.local_rank, 2);
	ks_cluster_role_detect(&role, slurm_garbled); /* a list it cannot read: alone on its host */
	assert_int_equal(role.size, 7);
	assert_int_equal(role.local_size, 1);
	assert_int_equal(role.local_rank, 0);
	ks_cluster_role_detect(&role, ompi_bad_local); /* a local rank outside the local size */
	assert_int_equal(role.size, 4);
	assert_int_equal(role.local_size, 1);
	assert_int_equal(role.local_rank, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_round_trip),
		cmocka_unit_test(test_result_round_trip),
		cmocka_unit_test(test_evidence_round_trip),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_role),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
