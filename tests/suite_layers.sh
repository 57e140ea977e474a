#!/usr/bin/env bash
# Layers (sourced by run_tests.sh): common is the communication layer
# (common/comm, libdtcomm.a: what lessons 01-04 need) with the training layer
# (common/train, libdttrain.a) above it, and inside each layer calls only go
# down (tests/layers.sh does the looking). Each rule is also shown to fail
# once, on a violation planted in a copy, so that none passes by default.
LY=build/test-layers
LB=build/${BACKEND:-cpu}
rm -rf "$LY"; mkdir -p "$LY"
comm_lessons=(0[1-4]_*/*.c)

check "layers: no file of common/comm, nor lessons 01-04, includes a training header" 0 0 -- \
  bash tests/layers.sh includes common/comm common/train "${comm_lessons[@]}"
check "layers: libdtcomm.a needs nothing that libdttrain.a defines" 0 0 -- \
  bash tests/layers.sh below "$LB/libdtcomm.a" "$LB/libdttrain.a"
check "layers: no circle between the files of common/comm" 0 0 -- bash tests/layers.sh circles "$LB/libdtcomm.a"
check "layers: no circle between the files of common/train" 0 0 -- bash tests/layers.sh circles "$LB/libdttrain.a"

# 13_plan, the cost model, beneath lesson 14 and beneath its own tool
# (tools/plan, which fills the model's table of the lessons' kinds): it
# includes neither, needs no symbol of the tool, and no two of their files
# need each other
check "layers: no file of 13_plan includes 14_gpt's or tools/plan's headers" 0 0 -- \
  bash tests/layers.sh beneath 13_plan 14_gpt tools
rm -f "$LY/model13.a" "$LY/tool13.a" "$LY/plan13.a"
objs13=$(${MAKE:-make} -s --no-print-directory BACKEND="${BACKEND:-cpu}" print-lesson-objs-13 2>/dev/null)
model13=$(tr ' ' '\n' <<<"$objs13" | grep '/13_plan/') tool13=$(tr ' ' '\n' <<<"$objs13" | grep '/tools/plan/')
if [ -n "$model13" ] && [ -n "$tool13" ] && ar rcs "$LY/model13.a" $model13 &&
  ar rcs "$LY/tool13.a" $tool13 && ar rcs "$LY/plan13.a" $model13 $tool13; then
  check "layers: 13_plan's objects need nothing that tools/plan's define" 0 0 -- \
    bash tests/layers.sh below "$LY/model13.a" "$LY/tool13.a"
  check "layers: no circle between the files of 13_plan and tools/plan" 0 0 -- \
    bash tests/layers.sh circles "$LY/plan13.a"
else
  fail "layers: 13_plan's and tools/plan's objects archive" "" "ar failed in $LY (is 13 built?)"
fi

# lessons 01-04 link with the comm library alone (and, on cpu, without BLAS)
extra_libs=$(${MAKE:-make} -s --no-print-directory BACKEND="${BACKEND:-cpu}" -f Makefile -f - <<<'print-ldlibs: ; @echo $(LDLIBS)' print-ldlibs 2>/dev/null)
extra_libs=${extra_libs//-lopenblas/}
for d in 0[1-4]_*/; do
  d=${d%/}
  check "layers: $d links with libdtcomm.a alone" 0 0 -- \
    ${MPICC:-mpicc} "$LB/$d"/*.o "$LB/libdtcomm.a" -o "$LY/${d}" $extra_libs
done

# --- each rule fails on a planted violation ---
cp -r common/comm "$LY/comm"
echo '#include "train.h"' >>"$LY/comm/nodes.c"
check "layers: a comm file including train.h is caught" 0 1 'nodes.c:[0-9]+:#include "train.h"' -- \
  bash tests/layers.sh includes "$LY/comm" common/train
check "layers: a lesson including train.h is caught" 0 1 'send_recv.c:[0-9]+:#include "train.h"' -- \
  bash -c "cp 01_send_recv/send_recv.c $LY/send_recv.c && echo '#include \"train.h\"' >>$LY/send_recv.c &&
    bash tests/layers.sh includes common/comm common/train $LY/send_recv.c"
check "layers: a cost-model file including 14_gpt is caught" 0 1 'cost.c:[0-9]+:#include "14_gpt/formulas.h"' -- \
  bash -c "mkdir -p $LY/13_plan && cp 13_plan/cost.c $LY/13_plan/ && echo '#include \"14_gpt/formulas.h\"' >>$LY/13_plan/cost.c &&
    bash tests/layers.sh beneath $LY/13_plan 14_gpt tools"
printf 'void dt_matmul(void);\nvoid planted_up(void) { dt_matmul(); }\n' >"$LY/up.c"
printf 'void planted_b(void);\nvoid planted_a(void) { planted_b(); }\n' >"$LY/a.c"
printf 'void planted_a(void);\nvoid planted_b(void) { planted_a(); }\n' >"$LY/b.c"
if cc -c "$LY/up.c" -o "$LY/up.o" && cc -c "$LY/a.c" -o "$LY/a.o" && cc -c "$LY/b.c" -o "$LY/b.o" &&
  cp "$LB/libdtcomm.a" "$LY/up.a" && ar rcs "$LY/up.a" "$LY/up.o" &&
  cp "$LB/libdtcomm.a" "$LY/circle.a" && ar rcs "$LY/circle.a" "$LY/a.o" "$LY/b.o"; then
  check "layers: a comm object calling dt_matmul is caught" 0 1 'up.o needs dt_matmul, defined by libdttrain.a' -- \
    bash tests/layers.sh below "$LY/up.a" "$LB/libdttrain.a"
  check "layers: two comm objects calling each other are caught" 0 1 'circle: a.o <-> b.o' -- \
    bash tests/layers.sh circles "$LY/circle.a"
else
  fail "layers: the planted objects build" "" "cc or ar failed in $LY"
fi
check "layers: 05_dp does not link with libdtcomm.a alone (the link check can fail)" 0 nonzero 'undefined reference to .dt_' -- \
  ${MPICC:-mpicc} "$LB/05_dp"/*.o "$LB/libdtcomm.a" -o "$LY/05_dp" $extra_libs
