/* replay.c: runs a fuzz harness's LLVMFuzzerTestOneInput on every file of
 * the folders (or files) it is given, without libFuzzer: `make test` replays
 * the committed corpus with any compiler that has AddressSanitizer and
 * UndefinedBehaviorSanitizer. A sanitizer report or an abort fails it. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay(const char *path) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    exit(1);
  }
  uint8_t *data = malloc(st.st_size ? (size_t)st.st_size : 1); /* its bytes: ASan sees overreads */
  if (!data || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) exit(1);
  fclose(f);
  LLVMFuzzerTestOneInput(data, (size_t)st.st_size);
  free(data);
  return 1;
}

int main(int argc, char **argv) {
  int n = 0;
  for (int i = 1; i < argc; i++) {
    DIR *d = opendir(argv[i]);
    if (!d) {
      n += replay(argv[i]);
      continue;
    }
    for (struct dirent *e; (e = readdir(d));) {
      char path[4096];
      struct stat st;
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) n += replay(path);
    }
    closedir(d);
  }
  printf("replayed %d inputs: no sanitizer report, no failed check\n", n);
  return 0;
}
