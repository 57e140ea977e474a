/* resolve.c: a config made whole before any work (dt_train_resolve): the
 * defaults that depend on other flags, the refusals a run must not start
 * with, and a GPT's text, whose vocabulary sets V (a --load file's
 * metadata may say how it was padded, or spell the tokens of --steps 0).
 * Apart from model.c because it reads files' metadata (safetensors.c),
 * which itself depends on the model's layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

static void gpt_resolve(dt_train_config *c);
/* safetensors.c: a number of a file's metadata, or -1; its vocabulary: 0,
 * -1 for none, -2 (and err) for a malformed one */
int64_t dt_meta_int(const char *path, const char *key);
int dt_meta_vocab(const char *path, dt_vocab *v, char *err, size_t errlen);

static double adamw_lr(const dt_train_config *c) { return c->adamw_lr > 0 ? c->adamw_lr : 0.003; }

const char *dt_lr_help(const dt_train_config *c) {
  static char help[64];
  snprintf(help, sizeof help, "learning rate (0: 0.2 for sgd, %g for adamw)", adamw_lr(c));
  return help;
}

void dt_train_resolve(dt_train_config *c) {
  /* a GPT's --steps 0 saves or samples the initial (or loaded) model; the
   * other lessons train, as the parser's range said before it took 0 */
  if (c->steps == 0 && c->model != DT_GPT)
    dt_fail("--steps: 0 is out of range; it must be between 1 and 1000000");
  if (c->hidden == 0) c->hidden = 4 * c->dim;
  if (c->samples == 0) c->samples = 8 * c->batch;
  if (c->lr == 0) c->lr = c->optimizer[0] == 'a' ? adamw_lr(c) : 0.2;
  if (c->beta2 == 0) c->beta2 = 0.999;
  if (c->samples % c->batch != 0)
    dt_fail("--samples %lld is not a multiple of --batch %lld: every epoch must split into whole "
            "global batches, so that every world size sees the same batches",
            (long long)c->samples, (long long)c->batch);
  dt_set_matmul_inputs(dt_precision_type(c));
  dt_kernels_init(); /* now, not inside the first timed step */
  if (c->resume && dt_precision_type(c) == DT_F16)
    dt_fail("--resume with --precision fp16 is not supported: checkpoints do not hold the loss "
            "scaler's state");
  if ((c->save_every > 0 || c->resume) && !c->ckpt)
    dt_fail("--save-every and --resume need --ckpt DIR, the checkpoint folder");
  if (c->model == DT_MOE && c->topk > c->experts)
    dt_fail("--topk %lld is more than --experts %lld: a token cannot choose more experts than "
            "there are",
            (long long)c->topk, (long long)c->experts);
  if ((c->model == DT_TRANSFORMER || c->model == DT_GPT) && c->dim % c->heads != 0)
    dt_fail("--heads %lld: the width D = %lld does not split into %lld heads; choose --heads "
            "dividing --dim",
            (long long)c->heads, (long long)c->dim, (long long)c->heads);
  if (c->model == DT_GPT) gpt_resolve(c);
  dt_check_outputs(c); /* before any training, not after it */
  /* Every lesson holds the whole model somewhere (rank 0 checks it), so a
   * model larger than the memory left is refused before anything runs. */
  double bytes = 4.0 * (double)dt_model_size(c);
  double available = dt_memory_available();
  if (bytes > available)
    dt_fail("the model needs %.2f GiB for its weights alone (%s x 4 bytes); only %.2f GiB are "
            "available (%s): choose a smaller --layers, --dim or --hidden%s",
            bytes / 1073741824.0,
            c->model == DT_MOE           ? "L x (DE + 2EDH)"
            : c->model == DT_TRANSFORMER ? "L x (4D^2 + 2DH)"
            : c->model == DT_GPT         ? "(V + S + 1) D + L x (2D + 4D^2 + 2DH)"
                                         : "L x 2 x D x H",
            available / 1073741824.0, dt_memory_source(),
            c->model == DT_MOE ? " or --experts" : "");
}

void dt_gpt_defaults(dt_train_config *c) {
  c->model = DT_GPT;
  c->optimizer = "adamw";
  c->adamw_lr = 1e-3;
  c->beta2 = 0.99;
  c->weight_decay = 0.1;
  c->clip = 1.0;
  c->warmup = -1;
  c->text = "README.md";
  c->tokens = "char";
  c->seq = 64;
  c->heads = 4;
  c->batch = 8;
  c->eval_batches = 4;
  c->temperature = 1.0;
}

/* --load FILE --steps 0: nothing trains, so the file fixes the tokens, its
 * vocabulary (characters, bytes or BPE merges) and the V it was padded to, whatever
 * --text and --tokens say; the text is not read. 0 where the file has no
 * vocabulary (a file of another program): then the text's; a malformed one
 * is refused. */
static int file_tokens(const dt_train_config *c, dt_text *t) {
  dt_vocab v = {0};
  char err[240] = "";
  int has = dt_meta_vocab(c->load, &v, err, sizeof err);
  if (has == -2) dt_fail("--load %s: %s", c->load, err);
  if (has != 0) return 0;
  int64_t V = dt_meta_int(c->load, "vocab_size"), m = c->vocab_multiple > 1 ? c->vocab_multiple : 1;
  const char *what = dt_vocab_noun(&v);
  if (V < v.used) V = v.used;
  if (V % m != 0) {
    free(v.chars);
    free(v.pair);
    dt_fail("--load %s: its vocabulary has V = %lld rows (the file's %lld %s), which %lld "
            "tensor-parallel ranks cannot split into equal slices: load it with a --tp that "
            "divides %lld",
            c->load, (long long)V, (long long)v.used, what, (long long)m, (long long)V);
  }
  dt_text_free(t);
  t->vocab = v;
  t->vocab.size = V;
  t->n = dt_meta_int(c->load, "text_tokens"); /* what a --save of it then says */
  if (t->n < 0) t->n = 0;
  char merges[48] = "";
  if (v.merges) snprintf(merges, sizeof merges, " (256 bytes + %lld merges)", (long long)v.merges);
  dt_print0("vocabulary: %s's %lld %s%s, V = %lld (--steps 0: the file's tokens; the text %s is "
            "not read)\n",
            c->load, (long long)v.used, what, merges, (long long)V, c->text);
  return 1;
}

/* --tokens bpe:N's N (0: another --tokens) */
#define BPE_MAX 65536
static int64_t bpe_merges(const char *tokens) {
  if (!tokens || strncmp(tokens, "bpe:", 4) != 0) return 0;
  char *end;
  errno = 0;
  long long n = strtoll(tokens + 4, &end, 10);
  if (tokens[4] < '0' || tokens[4] > '9' || *end || errno || n < 1 || n > BPE_MAX)
    dt_fail("--tokens %s: N, the number of merges, must be a whole number from 1 to %d (e.g. "
            "bpe:512: V = 256 + 512)",
            tokens, BPE_MAX);
  return n;
}

/* The GPT's text (its vocabulary sets the model's V), once per process;
 * the schedule's warm-up. */
static void gpt_resolve(dt_train_config *c) {
  static dt_text text;
  static char loaded[4096];
  int bytes = c->tokens && strcmp(c->tokens, "byte") == 0;
  int64_t merges = bpe_merges(c->tokens);
  char key[4096], err[240] = "";
  if (!c->text) dt_fail("--text FILE: a GPT trains on a text; name one (e.g. --text README.md)");
  snprintf(key, sizeof key, "%s %lld %lld %s", c->tokens, (long long)c->vocab_multiple,
           (long long)c->seq, c->text);
  int from_file = c->load && c->steps == 0 && file_tokens(c, &text);
  if (from_file)
    loaded[0] = '\0';                  /* the next config reads its text again */
  else if (strcmp(key, loaded) != 0) { /* a test may load another */
    dt_text_free(&text);
    if (merges)
      dt_text_load_bpe(&text, c->text, merges, NULL, c->vocab_multiple, c->seq + 1);
    else
      dt_text_load(&text, c->text, bytes, c->vocab_multiple, c->seq + 1);
    snprintf(loaded, sizeof loaded, "%s", key);
  }
  c->corpus = &text;
  int64_t saved = c->load && !from_file ? dt_meta_int(c->load, "vocab_size") : -1;
  if (saved > 0 &&
      saved != text.vocab.size) { /* --load: the V it was padded to where it was saved */
    if (saved < text.vocab.used)
      dt_fail("--load %s: its vocabulary has V = %lld rows, fewer than this text's %lld %s: it was "
              "trained on another vocabulary (another text or --tokens); train on its text and "
              "tokens, or start without --load",
              c->load, (long long)saved, (long long)text.vocab.used, dt_vocab_noun(&text.vocab));
    if (saved % (c->vocab_multiple > 1 ? c->vocab_multiple : 1) != 0)
      dt_fail("--load %s: its vocabulary has V = %lld rows, which this text's %lld tokens padded "
              "to a multiple of %lld cannot be: load it with a --tp that divides %lld",
              c->load, (long long)saved, (long long)text.vocab.used, (long long)c->vocab_multiple,
              (long long)saved);
    text.vocab.size = saved;
    dt_print0("vocabulary: padded to V = %lld, as %s was saved\n", (long long)saved, c->load);
  }
  c->vocab = text.vocab.size;
  if (c->sample && c->top_k > text.vocab.used) { /* said, not echoed as if it chose */
    dt_print0("--top-k %lld: the vocabulary has %lld tokens, so top-k %lld (all of them)\n",
              (long long)c->top_k, (long long)text.vocab.used, (long long)text.vocab.used);
    c->top_k = text.vocab.used;
  }
  if (c->sample && c->prompt) { /* a prompt the vocabulary cannot spell fails now, not at the end */
    size_t n = strlen(c->prompt) + 1;
    int32_t *ids = dt_host_alloc(n, sizeof *ids);
    int64_t k = dt_tokens_encode(&text.vocab, c->prompt, ids, (int64_t)n, err, sizeof err);
    free(ids);
    if (k < 0)
      dt_fail("--prompt: %s: %s %s's%s", err, from_file ? "the file" : "the text",
              from_file ? c->load : c->text,
              from_file ? " (--load --steps 0 samples with the file's tokens)" : "");
  }
  c->schedule_auto = c->decay_steps == 0 && c->warmup < 0;
  if (c->decay_steps == 0) c->decay_steps = c->steps > 0 ? c->steps : 1; /* 0: no step to decay */
  if (c->warmup < 0) c->warmup = c->decay_steps / 10;
  if (c->warmup >= c->decay_steps)
    dt_fail("--warmup %lld: the warm-up must end before the decay does, at step %lld "
            "(--lr-decay-steps, or --steps)",
            (long long)c->warmup, (long long)c->decay_steps);
}
