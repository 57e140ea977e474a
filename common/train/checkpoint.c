/* checkpoint.c: --ckpt DIR --save-every K --resume.
 *
 * A checkpoint holds everything that decides the next step: the weights,
 * AdamW's m and v, the step (the data of step s is a pure function of s,
 * so the step is also the data position), and state a rank keeps for itself
 * (top-k's error-feedback residual: c->rank_state), every rank's, in the same
 * file. Tensors are stored whole, in the layer-major order of dt_save_model,
 * so a checkpoint written at one world size resumes at any other: each rank
 * slices what it owns. Per-rank state is the exception: rank r's residual is
 * what rank r's own gradients left unsent, which no rank of another world
 * size has a counterpart of, so such a checkpoint resumes at its own size.
 *
 * Nothing good is ever overwritten: step k goes to DIR/step-k.safetensors
 * (temp file, fsync, rename), and only then does the manifest DIR/latest,
 * itself replaced atomically, name it. A crash at any moment leaves the
 * manifest pointing at a complete checkpoint. The one before is kept too. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

void dt_save_state(const char *path, const dt_train_config *c, int64_t step, const float *w,
                   const float *m, const float *v, const float *e);
void dt_load_tensors(const char *path, const dt_train_config *c, const char *prefix, float *dst,
                     int64_t *step, char *err, size_t errlen);
int64_t dt_meta_steps(const char *path);
int64_t dt_meta_int(const char *path, const char *key); /* a metadata number, or -1 */

/* The manifest's text is untrusted: it must be exactly the name this file
 * writes, step-NNNNNNNN.safetensors and a newline, the step at most 2^63-1
 * (read digit by digit, refused before it would overflow). */
int64_t dt_manifest_parse(const char *text, size_t n, char *why, size_t whylen) {
  int64_t step = 0;
  size_t i = 5;
  int past = 0, named = n >= 5 && memcmp(text, "step-", 5) == 0;
  for (; named && i < n && text[i] >= '0' && text[i] <= '9' && !past; i++) {
    int d = text[i] - '0';
    past = step > (INT64_MAX - d) / 10;
    step = past ? step : step * 10 + d;
  }
  char name[64];
  int len = snprintf(name, sizeof name, "step-%08lld.safetensors\n", (long long)step);
  if (past) {
    snprintf(why, whylen, "its step is past 2^63-1, the largest there can be");
  } else if (!named || i == 5 || n != (size_t)len || memcmp(text, name, n) != 0) {
    snprintf(why, whylen,
             "it does not hold one line step-NNNNNNNN.safetensors (a checkpoint's name)");
    past = 1;
  }
  return past ? -1 : step;
}

static int64_t manifest_step(const char *dir, char *why, size_t whylen) { /* -1: none */
  char path[4096], text[65];
  int64_t step = -1;
  snprintf(path, sizeof path, "%s/latest", dir);
  int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block, nor count */
  struct stat st;
  if (fd < 0) {
    snprintf(why, whylen, "%s", strerror(errno));
  } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(why, whylen, "not a regular file");
  } else {
    ssize_t n = read(fd, text, sizeof text); /* a name is shorter than text */
    if (n < 0)
      snprintf(why, whylen, "%s", strerror(errno));
    else
      step = dt_manifest_parse(text, (size_t)n, why, whylen);
  }
  if (fd >= 0) close(fd);
  return step;
}

void dt_ckpt_save(const dt_train_config *c, int64_t step, const float *w, const float *m,
                  const float *v, const float *e) {
  char path[4096];
  DT_WATCH("reading the checkpoint manifest (--ckpt)"); /* the writes below watch themselves */
  if (mkdir(c->ckpt, 0777) != 0 && errno != EEXIST)
    dt_fatal(__FILE__, __LINE__, "mkdir --ckpt", strerror(errno));
  char why[128];
  int64_t previous = manifest_step(c->ckpt, why, sizeof why); /* none: delete nothing */
  dt_watch_done();
  snprintf(path, sizeof path, "%s/step-%08lld.safetensors", c->ckpt, (long long)step);
  dt_save_state(path, c, step, w, m, v, c->rank_state ? e : NULL);
  char name[64];
  snprintf(name, sizeof name, "step-%08lld.safetensors\n", (long long)step);
  snprintf(path, sizeof path, "%s/latest", c->ckpt);
  dt_out f; /* replaced atomically like the checkpoint itself */
  dt_out_open(&f, "--ckpt", path);
  dt_out_write(&f, name, strlen(name));
  dt_out_close(&f);
  /* keep this one and the one before; anything older may go */
  DT_WATCH("removing old checkpoints (--ckpt)");
  for (int64_t s = previous - 1; s >= 0 && previous >= 0; s--) {
    snprintf(path, sizeof path, "%s/step-%08lld.safetensors", c->ckpt, (long long)s);
    remove(path);
    if (s < previous - 1000) break; /* steps are close together: do not scan forever */
  }
  dt_watch_done();
  printf("checkpoint: step %lld saved to %s/step-%08lld.safetensors\n", (long long)step, c->ckpt,
         (long long)step);
  fflush(stdout);
}

int64_t dt_ckpt_resume(dt_train_config *c, float *w, float *m, float *v, float *e) {
  char err[600] = "", path[4096];
  DT_WATCH("reading the checkpoint (--resume)");
  char why[128] = "";
  int64_t step = manifest_step(c->ckpt, why, sizeof why), stored = -1;
  if (step < 0)
    snprintf(err, sizeof err, "--resume: no readable manifest %.400s/latest: %s", c->ckpt, why);
  snprintf(path, sizeof path, "%s/step-%08lld.safetensors", c->ckpt, (long long)step);
  int64_t warmup = c->schedule_auto ? dt_meta_int(path, "warmup") : -1;
  int64_t decay = c->schedule_auto ? dt_meta_int(path, "lr_decay_steps") : -1;
  if (!err[0] && warmup >= 0 && decay > 0) { /* the schedule the checkpoint's run set out on */
    c->warmup = warmup;
    c->decay_steps = decay;
  }
  if (!err[0]) dt_load_tensors(path, c, "", w, &stored, err, sizeof err);
  if (!err[0] && stored != step)
    snprintf(err, sizeof err, "%.400s: its metadata says step %lld, the manifest %lld", path,
             (long long)stored, (long long)step);
  if (!err[0] && m) dt_load_tensors(path, c, "optim.exp_avg.", m, NULL, err, sizeof err);
  if (!err[0] && m) dt_load_tensors(path, c, "optim.exp_avg_sq.", v, NULL, err, sizeof err);
  char own[64]; /* the configuration check above holds the world size to the file's */
  snprintf(own, sizeof own, "rank_state.%d.", dt_rank());
  if (!err[0] && c->rank_state) dt_load_tensors(path, c, own, e, NULL, err, sizeof err);
  if (!err[0] && step >= c->steps)
    snprintf(err, sizeof err, "the checkpoint is at step %lld: --steps %lld leaves nothing to do",
             (long long)step, (long long)c->steps);
  dt_watch_done();
  int bad = err[0] != '\0', any = 0;
  DT_MPI(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (any) dt_fail("%s", bad ? err : "--resume failed on another rank");
  c->start_step = step;
  dt_print0("resume: step %lld from %s (weights%s%s%s; configuration and checksum verified)\n",
            (long long)step, path, m ? ", AdamW m and v" : "",
            c->rank_state ? ", each rank's state of " : "", c->rank_state ? c->rank_state : "");
  if (warmup >= 0 && decay > 0)
    dt_print0("resume: the checkpoint's schedule, warm-up %lld steps and the cosine to step %lld "
              "(--warmup and --lr-decay-steps follow it when left out)\n",
              (long long)warmup, (long long)decay);
  int64_t planned = dt_rank() == 0 ? dt_meta_steps(path) : -1;
  if (planned >= 0 && planned != c->steps)
    dt_print0("resume: the checkpoint's run was set for --steps %lld, this one trains to %lld: "
              "fine, the steps so far are the same training\n",
              (long long)planned, (long long)c->steps);
  return step;
}
