#!/usr/bin/env bash
# The readers of files from disk on the committed fuzz corpus (sourced by
# run_tests.sh). tests/fuzz_safetensors.c and tests/fuzz_manifest.c are built
# with the readers under AddressSanitizer and UndefinedBehaviorSanitizer and
# run by tests/fuzz/replay.c on every input of tests/fuzz/corpus/NAME/ (issue
# 30's INT64_MAX data offset among them, and each crash make fuzz ever found):
# no libFuzzer needed. Then the same corpus is shown to catch the bug of
# issue 30, planted back into a copy of safetensors.c.
FZ=build/test-fuzz
rm -rf "$FZ"; mkdir -p "$FZ"
fuzz_make() { ${MAKE:-make} -s --no-print-directory BACKEND="${BACKEND:-cpu}" "$@"; }
if ! echo 'int main(void) { return 0; }' | ${MPICC:-mpicc} -fsanitize=address,undefined -x c - -o "$FZ/probe" 2>"$FZ/probe.log"; then
  echo "SKIP fuzz corpus: ${MPICC:-mpicc} cannot build with -fsanitize=address,undefined ($(head -n 1 "$FZ/probe.log"))"
else
  for name in safetensors manifest; do
    n=$(ls "tests/fuzz/corpus/$name" | wc -l | tr -d ' ')
    check "fuzz corpus: the $name reader on its $n inputs under ASan+UBSan" 0 0 "^replayed $n inputs: no sanitizer report, no failed check\$" -- \
      bash -c "$(declare -f fuzz_make); fuzz_make build/fuzz/replay_$name >/dev/null && build/fuzz/replay_$name tests/fuzz/corpus/$name"
  done
  # issue 30's check, as it was: signed sums of the file's offsets
  cp common/train/safetensors.c "$FZ/safetensors.c"
  perl -0pi -e 's/off\[0\] > off\[1\] \|\| off\[1\] > data_size \|\| off\[1\] - off\[0\] != bytes/old_range_check(off[0], off[1], bytes, len, 8 + len + data_size)/;
    s/^static void read_tensor\(/static int old_range_check(long long begin, long long end, long long n, long long len, long long size) {\n  return end - begin != n || begin < 0 || 8 + len + end > size;\n}\nstatic void read_tensor(/m' "$FZ/safetensors.c"
  if cmp -s common/train/safetensors.c "$FZ/safetensors.c"; then
    fail "fuzz corpus: the planted overflow" "" "the substitution no longer matches common/train/safetensors.c: update it in tests/suite_fuzz.sh"
  else
    # the end offset plus where the data starts, 8 + the header's length
    at=$((8 + $(od -An -tu8 -N8 tests/fuzz/corpus/safetensors/offset-int64max | tr -d ' ')))
    check "fuzz corpus: catches issue 30's signed overflow planted back into safetensors.c" 0 nonzero \
      'offset-int64max$' "runtime error: signed integer overflow: 9223372036854775807 \\+ $at cannot be represented" -- \
      bash -c "$(declare -f fuzz_make); fuzz_make FUZZ_DIR=$FZ FUZZ_READERS='$FZ/safetensors.c common/train/checkpoint.c' $FZ/replay_safetensors >/dev/null &&
        for f in tests/fuzz/corpus/safetensors/*; do echo \"input \$f\"; $FZ/replay_safetensors \"\$f\" || exit \$?; done"
  fi
fi

# The same hostile inputs through the program: one line naming the file and
# what is wrong, exit 2, and the checkpoint folder left as it was (a refused
# --resume with --save-every writes nothing over it).
seed_run=(--layers 2 --dim 4 --hidden 8 --batch 4 --samples 8 --optimizer adamw --lr 0.01 --no-check)
mkdir -p "$FZ/ck"
cp tests/fuzz/corpus/safetensors/offset-int64max "$FZ/ck/step-00000002.safetensors"
printf 'step-00000002.safetensors\n' >"$FZ/ck/latest"
(cd "$FZ/ck" && cksum latest step-00000002.safetensors) >"$FZ/ck.before"
check "hostile file: --resume of issue 30's INT64_MAX data offset refused, naming the file" 2 2 \
  "^error: $FZ/ck/step-00000002.safetensors: \"layers.0.w1\"'s data range \[9223372036854775679, 9223372036854775807\) is wrong or past the end \(truncated file\?\): the file holds 1536 bytes of data\$" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --ckpt "$FZ/ck" --resume --save-every 1
if (cd "$FZ/ck" && cksum latest step-00000002.safetensors) | cmp -s - "$FZ/ck.before" && [ "$(ls "$FZ/ck" | wc -l)" -eq 2 ]; then
  pass "hostile file: the refused --resume wrote nothing into $FZ/ck"
else
  fail "hostile file: the refused --resume wrote nothing into $FZ/ck" "" "$(ls -l "$FZ/ck")"
fi
check "hostile file: --load of issue 30's INT64_MAX data offset refused" 2 2 \
  "^error: --load $FZ/ck/step-00000002.safetensors: \"layers.0.w1\"'s data range \[9223372036854775679, 9223372036854775807\) is wrong" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --load "$FZ/ck/step-00000002.safetensors"
check "hostile file: --load of a data offset past 2^64 refused" 2 2 \
  "^error: --load tests/fuzz/corpus/safetensors/offset-past-uint64: tensor \"layers.0.w1\" holds a number past 2\^63-1\$" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --load tests/fuzz/corpus/safetensors/offset-past-uint64
check "hostile file: --load of a header length of 2^64-1 refused" 2 2 \
  "^error: --load tests/fuzz/corpus/safetensors/header-length-uint64max: not a safetensors file \(header length 18446744073709551615, file 2768 bytes; at most 64 MiB of header\)\$" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --load tests/fuzz/corpus/safetensors/header-length-uint64max
cp tests/fuzz/corpus/safetensors/step-past-uint64 "$FZ/ck/step-00000002.safetensors"
check "hostile file: --resume of a step past 2^64 refused" 2 2 "^error: $FZ/ck/step-00000002.safetensors: the metadata's step is not a whole number from 0 to 2\^63-1\$" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --ckpt "$FZ/ck" --resume
cp tests/fuzz/corpus/manifest/step-past-int64 "$FZ/ck/latest"
check "hostile file: a manifest naming a step past 2^63-1 refused" 2 2 \
  "^error: --resume: no readable manifest $FZ/ck/latest: its step is past 2\^63-1, the largest there can be\$" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --ckpt "$FZ/ck" --resume
cp tests/fuzz/corpus/manifest/unpadded "$FZ/ck/latest"
check "hostile file: a manifest not in the written form refused" 2 2 \
  "^error: --resume: no readable manifest $FZ/ck/latest: it does not hold one line step-NNNNNNNN.safetensors \(a checkpoint's name\)\$" \
  -- ./05_dp/dp "${seed_run[@]}" --steps 4 --ckpt "$FZ/ck" --resume
