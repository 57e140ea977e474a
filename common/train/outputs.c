/* outputs.c: the output paths of a training run (--save, --dump-data,
 * --trace, --ckpt; and --report-json, which dt_init checked alone, against
 * them), checked at start-up, before any training: a bad
 * destination is refused naming the flag, the path and the reason, and the
 * temporaries of interrupted saves are cleaned up (common/comm's files.c
 * writes the files). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

static int check_ckpt(const dt_train_config *c, char *err, size_t n) {
  char why[PATH_MAX + 128] = "", dir[PATH_MAX], base[NAME_MAX + 1];
  struct stat st;
  if (strlen(c->ckpt) >= PATH_MAX - 64) {
    snprintf(why, sizeof why, "the path is too long");
  } else if (stat(c->ckpt, &st) == 0) {
    char latest[PATH_MAX + 16];
    snprintf(latest, sizeof latest, "%s/latest", c->ckpt);
    if (!S_ISDIR(st.st_mode))
      snprintf(why, sizeof why, "is %s; --ckpt names a folder", dt_file_kind(st.st_mode));
    else if (stat(latest, &st) == 0 && !S_ISREG(st.st_mode))
      snprintf(why, sizeof why, "its manifest %s is %s, not a regular file", latest,
               dt_file_kind(st.st_mode));
    else if (c->save_every > 0)
      dt_probe_dir(c->ckpt, why, sizeof why);
    if (!why[0]) dt_clean_stale(c->ckpt, "");
  } else if (errno != ENOENT) {
    snprintf(why, sizeof why, "%s", strerror(errno));
  } else if (c->save_every > 0) { /* made now, so that a wrong parent shows now */
    dt_split_path(c->ckpt, dir, sizeof dir, base, sizeof base);
    if (!dt_probe_dir(dir, why, sizeof why) && mkdir(c->ckpt, 0777) != 0 && errno != EEXIST)
      snprintf(why, sizeof why, "cannot create the folder: %s", strerror(errno));
  }
  if (why[0]) return snprintf(err, n, "--ckpt %s: %s", c->ckpt, why);
  return 0;
}

void dt_check_outputs(const dt_train_config *c) {
  char err[PATH_MAX + 512] = "";
  if (dt_rank() == 0) { /* the rank that writes them */
    DT_WATCH("checking the output paths (a stalled file system?)");
    const char *flags[5] = {"--save", "--dump-data", "--trace", "--ckpt", "--report-json"};
    const char *paths[5] = {c->save, c->dump_data, c->trace, c->ckpt, dt_report_path()};
    for (int i = 0; i < 5; i++) /* one would overwrite the other, or find a folder there */
      for (int j = i + 1; j < 5 && !err[0]; j++)
        if (paths[i] && paths[j] && strcmp(paths[i], paths[j]) == 0)
          snprintf(err, sizeof err, "%s and %s both name %s: give each its own path", flags[i],
                   flags[j], paths[i]);
    if (!err[0] && c->save) dt_check_output_file("--save", c->save, 0, err, sizeof err);
    if (!err[0] && c->dump_data)
      dt_check_output_file("--dump-data", c->dump_data, 0, err, sizeof err);
    if (!err[0] && c->trace) dt_check_output_file("--trace", c->trace, 1, err, sizeof err);
    if (!err[0] && c->ckpt) check_ckpt(c, err, sizeof err);
    dt_watch_done();
    fflush(stdout);
  }
  DT_MPI(MPI_Bcast(err, sizeof err, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (err[0]) dt_fail("%s", err);
}
