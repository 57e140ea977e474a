#!/usr/bin/env bash
# `make sanitize`: every lesson built with AddressSanitizer and
# UndefinedBehaviorSanitizer (in $1), run at NP=2 and NP=4 with small inputs.
# A sanitizer report, a failed check or a timeout fails it. Leaks are
# reported too, except those inside Open MPI itself (tests/lsan.supp).
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
BIN=$1
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:fast_unwind_on_malloc=0
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Open MPI unloads its plugins at MPI_Finalize, which turns their leak
# reports into "<unknown module>" that no suppression can name: keep them.
export OMPI_MCA_mca_base_component_disable_dlclose=1
MPIRUN="$MPIRUN -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS -x OMPI_MCA_mca_base_component_disable_dlclose"
TEST_TIMEOUT=300

# A lesson that trains (its --help lists --steps and --dim: 05-09, and a new
# NN_name/ folder copied from one) runs 3 steps of a small model; any other
# new lesson runs with its defaults.
small_args() { # enough to run every code path, small enough for a sanitizer
  case $1 in
    01_send_recv) echo "--max-bytes 256K --msg-bytes 64K" ;;
    02_broadcast|03_all_reduce) echo "--max-bytes 256K" ;;
    *) [ "$("$2" --help 2>/dev/null | grep -cE '^  --(steps|dim) ')" -eq 2 ] && echo "--steps 3 --dim 32" ;;
  esac
}

for dir in [0-9][0-9]_*/; do
  lesson=${dir%/}
  exe=$BIN/$lesson/${lesson#*_} # NN_name/name, as the Makefile builds it
  [ -x "$exe" ] || continue
  for np in 2 4; do
    check "sanitize $lesson np=$np" "$np" 0 'CHECK PASSED' -- "$exe" $(small_args "$lesson" "$exe")
    if grep -Eq 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$(check_log "sanitize $lesson np=$np")"; then
      fail "sanitize $lesson np=$np: a sanitizer report" "$(check_log "sanitize $lesson np=$np")"
    fi
  done
done
for t in "$BIN"/tests/test_*; do
  check "sanitize $(basename "$t") np=2" 2 0 'UNIT PASSED' -- "$t"
done
summary
