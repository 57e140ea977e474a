#!/usr/bin/env bash
# Style (sourced by run_tests.sh): no statement is chained with the comma
# operator (`a = 1, b = 2;`) in any lesson or common source
# (tools/comma_statements.py does the looking). The check is also shown to
# fail once, on a statement planted in a copy, so that it cannot pass by
# default, and to leave alone the commas that are not statements.
ST=build/test-style
rm -rf "$ST"; mkdir -p "$ST"
style_sources=([0-9][0-9]_*/*.c common/*/*.c common/*/*.cu)

# passes on exit 0 with nothing printed: a report with exit 0 is a failure too
check "style: no comma-chained statement in the ${#style_sources[@]} lesson and common sources" 0 0 -- \
  bash -c 'out=$(python3 tools/comma_statements.py "$@" 2>&1); rc=$?; printf "%s" "$out"; [ -z "$out" ] || exit 2; exit $rc' \
  style "${style_sources[@]}"

# --- the check fails on a planted chain, and only on it ---
# inside main of a copy of lesson 01: the commas of a declaration, a for
# header, a call's arguments and (void)a, (void)b are no comma operator
# statements; the planted assignment is
cp 01_send_recv/send_recv.c "$ST/send_recv.c"
main_line=$(grep -n '^int main(' "$ST/send_recv.c" | cut -d: -f1)
sed_inplace "${main_line}a\\
  {\\
    int a = 1, b = 2, i, j;\\
    for (i = 0, j = 0; i < a; i++, j++) printf(\"%d %d\\\\n\", i, j);\\
    printf(\"%d, %d\\\\n\", a, b);\\
    (void)a, (void)b;\\
    a = 1, b = 2;\\
  }" "$ST/send_recv.c"
planted=$((main_line + 6))
if [ -n "$main_line" ] && sed -n "${planted}p" "$ST/send_recv.c" | grep -qx '    a = 1, b = 2;'; then
  check "style: a planted 'a = 1, b = 2;' in a copy of 01's main is reported, and nothing else" 0 1 \
    "^$ST/send_recv.c:$planted: a = 1, b = 2\$" '^reports: 1$' -- \
    bash -c 'out=$(python3 tools/comma_statements.py "$1" 2>&1); rc=$?; printf "%s\n" "$out";
      echo "reports: $(printf "%s" "$out" | grep -c .)"; exit $rc' style "$ST/send_recv.c"
else
  fail "style: the planted statement sits at line $planted of $ST/send_recv.c" "" "no 'int main(' in 01_send_recv/send_recv.c, or sed failed"
fi

# --- GCC 12 for arm64: Debian 12's GCC 12.2 for arm64 stops with an internal
# compiler error vectorizing an fmax reduction over floats widened to double
# at -O3 (make test-arm64 met it in three unit tests). The tests' running
# maxima take unit_max (tests/unit.h); where the cross compiler is here,
# every source compiles with it, and a planted reduction is shown to fail.
check "style: no running maximum with fmax in the unit tests (unit_max, tests/unit.h)" 0 0 -- \
  bash -c '! grep -nE "\<([A-Za-z_][A-Za-z0-9_]*) = fmaxf?\(\1," tests/*.c'
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
  check "style: every C source compiles with GCC for arm64 at -O3 (tests/cross_arm64.sh)" 0 0 \
    '^[0-9]+ sources compiled by aarch64-linux-gnu-gcc' -- bash tests/cross_arm64.sh
  printf '#include <math.h>\ndouble worst(const float *b, long n) {\n  double w = 0;\n  for (long i = 0; i < n; i++) w = fmax(w, fabs(b[i]));\n  return w;\n}\n' >"$ST/fmax.c"
  check "style: GCC for arm64 is the compiler that stops at a planted fmax reduction" 0 1 \
    "^FAIL $ST/fmax.c\$" 'internal compiler error' -- bash tests/cross_arm64.sh "$ST/fmax.c"
else
  echo "SKIP style: GCC for arm64 at -O3: no aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu; make test-arm64 builds with it)"
fi

# --- the kernels counted alike on both backends (common/comm/opcount.h) ---
# each backend's file of kernels opens every entry point with the same
# DT_OP(name, shape) line, so what the cpu's tests and --verify see of a
# step's kernels is what a GPU counts; a line changed on one side fails it
for pair in comm/kernels_cpu.c:comm/kernels.cu train/kernels_cpu.c:train/kernels.cu \
  train/attention.c:train/attention_kernels.cu; do
  check "style: common/${pair%%:*} and common/${pair#*:} count the same kernels at the same shapes" 0 0 -- \
    bash -c 'a=$(grep -o "DT_OP(.*);" "$1" | sort); [ -n "$a" ] && diff <(printf "%s\n" "$a") <(grep -o "DT_OP(.*);" "$2" | sort)' \
    style "common/${pair%%:*}" "common/${pair#*:}"
done
