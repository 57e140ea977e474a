/* files.c: every file a run writes (--save, --dump-data, --trace, --ckpt).
 *
 * Three promises. A bad destination is refused at start-up, before any
 * training, naming the flag, the path and the reason (common/train's
 * outputs.c, which knows the flags). Nothing but a regular
 * file is ever replaced: a file is written to a temporary beside it, synced
 * and renamed over it, and rename would turn /dev/null (as root) or a FIFO
 * into a regular file, so those are refused (--trace alone writes into a
 * device or FIFO in place, replacing nothing). Every write, flush, sync and
 * close is checked, and a failure leaves the previous file untouched. */
#define _XOPEN_SOURCE 700 /* realpath, kill */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm_internal.h"

const char *dt_file_kind(mode_t m) {
  return S_ISREG(m)    ? "a regular file"
         : S_ISDIR(m)  ? "a folder"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISSOCK(m) ? "a socket"
                       : "an unknown kind of file";
}

/* dir and base of path ("out.st" -> ".", "out.st") */
void dt_split_path(const char *path, char *dir, size_t dn, char *base, size_t bn) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(dir, dn, ".");
    snprintf(base, bn, "%s", path);
  } else if (slash == path) {
    snprintf(dir, dn, "/");
    snprintf(base, bn, "%s", slash + 1);
  } else {
    snprintf(dir, dn, "%.*s", (int)(slash - path), path);
    snprintf(base, bn, "%s", slash + 1);
  }
}

/* Temporaries of interrupted saves: NAME.tmp.PID, PID no longer running
 * (this host's pids: a save in progress elsewhere on a shared file system
 * under the same name is a clash of its own). prefix "" means any name. */
void dt_clean_stale(const char *dir, const char *prefix) {
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
int dt_probe_dir(const char *dir, char *why, size_t n) {
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
int dt_check_output_file(const char *flag, const char *path, int in_place, char *err, size_t n) {
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
    dt_probe_dir(dir, why, sizeof why);
    if (!why[0]) dt_clean_stale(dir, base);
  }
  if (why[0]) return snprintf(err, n, "%s %s: %s", flag, path, why);
  return 0;
}

static void give_up(dt_out *o, int err) {
  if (o->f) {
    fclose(o->f);
    o->f = NULL;
  }
  if (!o->in_place) unlink(o->tmp);
  fprintf(stderr, "[rank %d] error: %s %s: cannot write it: %s; %s\n", dt_rank(), o->flag, o->shown,
          strerror(err),
          o->in_place ? "the output is incomplete" : "any previous file is untouched");
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  abort();
}

void dt_out_open(dt_out *o, const char *flag, const char *path) {
  memset(o, 0, sizeof *o);
  o->flag = flag;
  o->shown = path;
  snprintf(o->what, sizeof o->what, "writing %s %s", flag, path);
  DT_WATCH(o->what); /* a stalled file system or a FIFO nobody reads */
  struct stat st;
  char real[PATH_MAX];
  /* through a symlink to its file, so the rename replaces the file, not the link */
  snprintf(o->path, sizeof o->path, "%s", realpath(path, real) ? real : path);
  int exists = stat(o->path, &st) == 0;
  o->in_place = exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
  if (o->in_place && strcmp(flag, "--trace") != 0) {
    fprintf(stderr, "[rank %d] error: %s %s: is %s, not a regular file; refusing to replace it\n",
            dt_rank(), flag, path, dt_file_kind(st.st_mode));
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (o->in_place) {
    o->f = fopen(o->path, "w");
  } else {
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", o->path, (long)getpid());
    unlink(o->tmp); /* whatever a crash left under this name, even a FIFO */
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    o->f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (fd >= 0 && !o->f) close(fd);
  }
  if (!o->f) give_up(o, errno);
}

void dt_out_write(dt_out *o, const void *buf, size_t bytes) {
  if (bytes && fwrite(buf, 1, bytes, o->f) != bytes) give_up(o, errno ? errno : EIO);
}

void dt_out_printf(dt_out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vfprintf(o->f, fmt, ap);
  va_end(ap);
  if (n < 0) give_up(o, errno ? errno : EIO);
}

void dt_out_close(dt_out *o) {
  errno = 0;
  if (fflush(o->f) != 0) give_up(o, errno ? errno : EIO);
  if (!o->in_place && fsync(fileno(o->f)) != 0) give_up(o, errno);
  int rc = fclose(o->f);
  o->f = NULL;
  if (rc != 0) give_up(o, errno ? errno : EIO);
  if (!o->in_place) {
    if (rename(o->tmp, o->path) != 0) give_up(o, errno);
    char dir[PATH_MAX], base[NAME_MAX + 1]; /* make the rename itself durable */
    dt_split_path(o->path, dir, sizeof dir, base, sizeof base);
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
      fsync(fd);
      close(fd);
    }
  }
  dt_watch_done();
}
