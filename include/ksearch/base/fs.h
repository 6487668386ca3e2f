/*
 * fs.h - folders and whole files: reading one whole (bounded), writing one
 * whole (atomically), and making folders.
 */
#ifndef KSEARCH_FS_H
#define KSEARCH_FS_H

#include <stddef.h>

#include "ksearch/base/error.h"

/* Read a whole file, NUL-terminated; *size excludes the NUL.  A folder fails as such. */
int ks_read_file(const char *path, char **data, size_t *size, struct ks_error *err);
/*
 * The same, refusing a file of more than max bytes after reading max + 1
 * of them (so /dev/zero or /dev/urandom fail at once), with the limit
 * named in the message.
 */
int ks_read_file_max(const char *path, size_t max, char **data, size_t *size, struct ks_error *err);

/*
 * mkdir -p: dir and every missing folder above it (mode 0777, less the
 * umask).  -1 naming the folder that could not be made, or dir when it
 * exists and is not a folder.
 */
int ks_mkdir_p(const char *dir, struct ks_error *err);

/*
 * Write len bytes of data to path through "<path>.tmp.<pid>" and a
 * rename, so a reader finds the old file or the whole new one, never a
 * part.  On -1 the temporary file is gone and path untouched.
 */
int ks_write_file_atomic(const char *path, const void *data, size_t len, struct ks_error *err);

#endif
