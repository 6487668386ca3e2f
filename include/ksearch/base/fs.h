/*
 * fs.h - folders and whole files: the two things three writers (the
 * archive, the export, the device profile cache) each did by hand.
 */
#ifndef KSEARCH_FS_H
#define KSEARCH_FS_H

#include <stddef.h>

#include "ksearch/base/error.h"

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
