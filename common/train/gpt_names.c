/* gpt_names.c: the GPT's tensors under nanoGPT's names and layouts, for
 * files alone (--save, --load; safetensors.c reads and writes them). The
 * array the run trains keeps each matrix as the math multiplies it (x W,
 * W [in, out]); nanoGPT's state_dict keeps nn.Linear's [out, in], and
 * stacks q, k and v into one c_attn. The head is tied to wte: nanoGPT's
 * lm_head.weight is the same tensor, left out here. */
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

int64_t dt_gpt_file_tensors(const dt_train_config *c) { return 3 + 6 * c->layers; }

/* File tensor i: wte, wpe; per layer ln_1, attn.c_attn (Wq, Wk, Wv),
 * attn.c_proj (Wo), ln_2, mlp.c_fc (W1), mlp.c_proj (W2); ln_f. */
dt_file_tensor dt_gpt_file_tensor(const dt_train_config *c, int64_t i) {
  dt_file_tensor f = {.parts = 1};
  int64_t last = 2 + 6 * c->layers, l = (i - 2) / 6, j = (i - 2) % 6;
  static const char *names[6] = {"ln_1", "attn.c_attn", "attn.c_proj",
                                 "ln_2", "mlp.c_fc",    "mlp.c_proj"};
  static const int first[6] = {0, 1, 4, 5, 6, 7}; /* the layer's tensor each starts with */
  if (i < 2 || i == last) {
    f.part[0] = i < 2 ? i : dt_gpt_tensor(c->layers, 0);
    snprintf(f.name, sizeof f.name, "transformer.%s.weight",
             i == 0   ? "wte"
             : i == 1 ? "wpe"
                      : "ln_f");
  } else {
    f.part[0] = dt_gpt_tensor(l, first[j]);
    f.parts = j == 1 ? 3 : 1; /* c_attn: q, k, v stacked */
    for (int p = 1; p < f.parts; p++) f.part[p] = f.part[0] + p;
    f.transpose = j != 0 && j != 3;
    snprintf(f.name, sizeof f.name, "transformer.h.%lld.%s.weight", (long long)l, names[j]);
  }
  dt_tensor x = dt_model_tensor(c, f.part[0]);
  f.ndim = x.vector ? 1 : 2;
  f.shape[0] = x.vector ? x.cols : f.parts * (f.transpose ? x.cols : x.rows);
  f.shape[1] = x.vector ? 1 : f.transpose ? x.rows : x.cols;
  return f;
}

/* Between the model's array and the file's layout: out is the file
 * tensor's shape[0] x shape[1] floats (to_file), or in (from it). */
static void convert(const dt_train_config *c, const dt_file_tensor *f, float *model, float *file,
                    int to_file) {
  float *at = file;
  for (int p = 0; p < f->parts; p++) {
    dt_tensor x = dt_model_tensor(c, f->part[p]);
    for (int64_t i = 0; i < x.rows; i++)
      for (int64_t j = 0; j < x.cols; j++) {
        float *m = model + x.at + i * x.cols + j,
              *e = at + (f->transpose ? j * x.rows + i : i * x.cols + j);
        if (to_file)
          *e = *m;
        else
          *m = *e;
      }
    at += x.rows * x.cols;
  }
}

void dt_gpt_file_pack(const dt_train_config *c, const dt_file_tensor *f, const float *model,
                      float *out) {
  convert(c, f, (float *)model, out, 1); /* reads model only */
}

void dt_gpt_file_unpack(const dt_train_config *c, const dt_file_tensor *f, const float *in,
                        float *model) {
  convert(c, f, model, (float *)in, 0); /* reads in only */
}
