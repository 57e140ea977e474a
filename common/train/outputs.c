/* outputs.c: the output paths of a training run (--save, --dump-data,
 * --trace, --ckpt), checked at start-up, before any training: a bad
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

/* Temporaries of interrupted saves: NAME.tmp.PID, PID no longer running
 * (this host's pids: a save in progress elsewhere on a shared file system
 * under the same name is a clash of its own). prefix "" means any name. */
static void clean_stale(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return;
  size_t pn = strlen(prefix);
  for (struct dirent *e; (e = readdir(d));) {
    const char *t = pn ? e->d_name + pn : strstr(e->d_name, ".tmp.");
    if (strncmp(e->d_name, prefix, pn) != 0 || !t || strncmp(t, ".tmp.", 5) != 0) continue;
    char *end;
    long pid = strtol(t + 5, &end, 10);
    if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive */
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) == 0) printf("removed %s, left by an interrupted save\n", path);
  }
  closedir(d);
}

/* Can this process create a file in dir? Try it: permissions, a read-only
 * or full file system and a missing folder all show. */
static int probe_dir(const char *dir, char *why, size_t n) {
  struct stat st;
  if (stat(dir, &st) != 0) return snprintf(why, n, "its folder %s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return snprintf(why, n, "%s is %s, not a folder", dir, dt_file_kind(st.st_mode));
  char probe[PATH_MAX + 64];
  snprintf(probe, sizeof probe, "%s/.dt-probe.tmp.%ld", dir, (long)getpid());
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return snprintf(why, n, "cannot create files in %s: %s", dir, strerror(errno));
  close(fd);
  unlink(probe);
  return 0;
}

/* in_place: --trace may write into a device or FIFO; the others replace. */
static int check_file(const char *flag, const char *path, int in_place, char *err, size_t n) {
  char dir[PATH_MAX], base[NAME_MAX + 1], why[PATH_MAX + 128] = "";
  struct stat st;
  if (strlen(path) >= PATH_MAX - 64) {
    snprintf(why, sizeof why, "the path is too long");
  } else if (path[strlen(path) - 1] == '/') {
    snprintf(why, sizeof why, "names a folder; name a file");
  } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(why, sizeof why, "is a folder; name a file in it");
  } else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !in_place) {
    snprintf(why, sizeof why,
             "is %s, not a regular file: %s writes a new file and renames it over the old one, "
             "which would replace it",
             dt_file_kind(st.st_mode), flag);
  } else if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) {
    char real[PATH_MAX];
    dt_split_path(realpath(path, real) ? real : path, dir, sizeof dir, base, sizeof base);
    probe_dir(dir, why, sizeof why);
    if (!why[0]) clean_stale(dir, base);
  }
  if (why[0]) return snprintf(err, n, "%s %s: %s", flag, path, why);
  return 0;
}

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
      probe_dir(c->ckpt, why, sizeof why);
    if (!why[0]) clean_stale(c->ckpt, "");
  } else if (errno != ENOENT) {
    snprintf(why, sizeof why, "%s", strerror(errno));
  } else if (c->save_every > 0) { /* made now, so that a wrong parent shows now */
    dt_split_path(c->ckpt, dir, sizeof dir, base, sizeof base);
    if (!probe_dir(dir, why, sizeof why) && mkdir(c->ckpt, 0777) != 0 && errno != EEXIST)
      snprintf(why, sizeof why, "cannot create the folder: %s", strerror(errno));
  }
  if (why[0]) return snprintf(err, n, "--ckpt %s: %s", c->ckpt, why);
  return 0;
}

void dt_check_outputs(const dt_train_config *c) {
  char err[PATH_MAX + 512] = "";
  if (dt_rank() == 0) { /* the rank that writes them */
    DT_WATCH("checking the output paths (a stalled file system?)");
    const char *flags[4] = {"--save", "--dump-data", "--trace", "--ckpt"};
    const char *paths[4] = {c->save, c->dump_data, c->trace, c->ckpt};
    for (int i = 0; i < 4; i++) /* one would overwrite the other, or find a folder there */
      for (int j = i + 1; j < 4 && !err[0]; j++)
        if (paths[i] && paths[j] && strcmp(paths[i], paths[j]) == 0)
          snprintf(err, sizeof err, "%s and %s both name %s: give each its own path", flags[i],
                   flags[j], paths[i]);
    if (!err[0] && c->save) check_file("--save", c->save, 0, err, sizeof err);
    if (!err[0] && c->dump_data) check_file("--dump-data", c->dump_data, 0, err, sizeof err);
    if (!err[0] && c->trace) check_file("--trace", c->trace, 1, err, sizeof err);
    if (!err[0] && c->ckpt) check_ckpt(c, err, sizeof err);
    dt_watch_done();
    fflush(stdout);
  }
  DT_MPI(MPI_Bcast(err, sizeof err, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (err[0]) dt_fail("%s", err);
}
