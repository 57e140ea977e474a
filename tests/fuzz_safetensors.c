/* fuzz_safetensors.c: the safetensors reader (common/train/safetensors.c)
 * on arbitrary bytes, under AddressSanitizer and UndefinedBehaviorSanitizer.
 * libFuzzer drives it in `make fuzz`; tests/fuzz/replay.c replays the
 * committed corpus in `make test`. Each input is read the three ways the
 * program reads a file: --resume's weights (with the step and the config
 * check), --resume's optimizer state (a prefix) and --load. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* The run that wrote tests/fuzz/corpus/safetensors/seed-checkpoint (see
 * tests/fuzz/seeds.py): matching it lets mutations get past the config
 * check to the tensors' entries and data. */
#define L 2
#define D 4
#define H 8
static const dt_train_config config = {.layers = L,
                                       .dim = D,
                                       .hidden = H,
                                       .batch = 4,
                                       .steps = 2,
                                       .samples = 8,
                                       .seed = 1,
                                       .data_seed = 2,
                                       .lr = 0.01,
                                       .weight_decay = 0.01,
                                       .clip = 0,
                                       .optimizer = "adamw",
                                       .precision = "fp32"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char path[] = "fuzz.safetensors";
  const char *prefixes[3] = {"", "optim.exp_avg.", ""};
  static float dst[2 * L * D * H];
  static unsigned char none[1]; /* fmemopen refuses an empty buffer */
  for (int mode = 0; mode < 3; mode++) {
    char err[600] = "";
    int64_t step = -2;
    FILE *f = fmemopen(size ? (void *)data : none, size ? size : 1, "rb");
    if (!f) abort();
    dt_read_tensors(f, size, path, &config, prefixes[mode], dst, mode == 0 ? &step : NULL, err,
                    sizeof err);
    fclose(f);
    /* a refusal names the file (a different config is not a bad file) */
    if (err[0] && !strstr(err, path) && !strstr(err, "the checkpoint was trained with")) {
      fprintf(stderr, "message without the file's name: %s\n", err);
      abort();
    }
    for (int j = 0; !err[0] && j < 2 * L * D * H; j++)
      if (!isfinite(dst[j])) abort();              /* accepted data is finite */
    if (!err[0] && mode == 0 && step < 0) abort(); /* accepted: a step was read */
  }
  return 0;
}
