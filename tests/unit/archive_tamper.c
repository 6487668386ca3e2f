/*
 * archive_tamper.c - a helper for the CLI tests: replaces one record of an
 * archive behind ksearch's back, as a disk error or a hand edit would, so
 * that a command meeting a record that does not read can be tested.
 *
 *   archive_tamper DIR ID VALUE
 *
 * DIR is the archive's folder (ROOT/OP/GPU, where data.mdb is); ID the
 * record's id; VALUE the bytes stored in its place in the "candidates"
 * database (its key: the id as 8 bytes, most significant first).
 */
#include <errno.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *what, int rc)
{
	fprintf(stderr, "archive_tamper: %s: %s\n", what, mdb_strerror(rc));
	return 1;
}

int main(int argc, char **argv)
{
	unsigned char key[8];
	unsigned long long id;
	char *end;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = { sizeof(key), key }, v;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: archive_tamper DIR ID VALUE\n");
		return 2;
	}
	errno = 0;
	id = strtoull(argv[2], &end, 10);
	if (errno || *end || end == argv[2]) {
		fprintf(stderr, "archive_tamper: '%s' is not a record id\n", argv[2]);
		return 2;
	}
	for (int i = 0; i < 8; i++)
		key[i] = (unsigned char)(id >> (56 - 8 * i));
	v.mv_size = strlen(argv[3]);
	v.mv_data = argv[3];
	if ((rc = mdb_env_create(&env)))
		return die("mdb_env_create", rc);
	mdb_env_set_maxdbs(env, 16);
	if ((rc = mdb_env_open(env, argv[1], 0, 0644)))
		return die(argv[1], rc);
	if ((rc = mdb_txn_begin(env, NULL, 0, &txn)))
		return die("mdb_txn_begin", rc);
	if ((rc = mdb_dbi_open(txn, "candidates", 0, &dbi)))
		return die("the candidates database", rc);
	if ((rc = mdb_put(txn, dbi, &k, &v, 0)))
		return die("mdb_put", rc);
	if ((rc = mdb_txn_commit(txn)))
		return die("mdb_txn_commit", rc);
	mdb_env_close(env);
	return 0;
}
