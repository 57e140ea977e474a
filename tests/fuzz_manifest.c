/* fuzz_manifest.c: the checkpoint manifest's reader (common/train/
 * checkpoint.c) on arbitrary bytes, under AddressSanitizer and
 * UndefinedBehaviorSanitizer. libFuzzer drives it in `make fuzz`;
 * tests/fuzz/replay.c replays the committed corpus in `make test`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[128] = "", name[64];
  int64_t step = dt_manifest_parse((const char *)data, size, why, sizeof why);
  if (step < 0 && !why[0]) abort(); /* a refusal says why */
  /* accepted: exactly the name the writer writes for that step */
  int n = snprintf(name, sizeof name, "step-%08lld.safetensors\n", (long long)step);
  if (step >= 0 && ((size_t)n != size || memcmp(name, data, size) != 0)) abort();
  return 0;
}
