#!/usr/bin/env bash
# Hostile input (sourced by run_tests.sh): every flag of every lesson, read
# from its own --help, is given empty, non-numeric, negative, overflowing and
# absurd values. Each must give exit 2 and an "error: --flag ..." line from
# rank 0: no crash, no hang, no attempt to allocate the impossible. Zero and
# huge-but-parseable values must either be refused the same way or run to a
# clean finish (one process where the lesson takes one, the rest of the
# flag list never read by it). Flags every training lesson shares (and --comm, --timeout)
# are the same code, so they are driven through 05_dp once.
HOSTILE_TIMEOUT=${HOSTILE_TIMEOUT:-60}

hostile_flags() { # "flag kind" per line, from --help
  "$1" --help 2>/dev/null | awk '/^  --/ { print $1, ($2 ~ /^(N|X|BYTES|TEXT)$/ || $2 ~ /\|/) ? $2 : "FLAG" }'
}

hostile_lesson() {
  local bin=$1 np=$2 skip=$3 lesson; lesson=$(basename "$(dirname "$bin")")
  local flag kind v launch seen=""
  # zero and huge values run as one process where the lesson allows it (no
  # mpirun to start: a fifth of the time), else at np ranks
  "$bin" --help 2>/dev/null | grep -q '(N >= 1)$' && launch="" || launch=$(mpirun_cmd "$np")
  while read -r flag kind; do
    [[ " $skip " == *" $flag "* ]] && continue
    local bad=() maybe=() neg=-1
    # a -1 the help gives a meaning, "(-1: ...)", is a value, not hostile
    "$bin" --help 2>/dev/null | grep -q -- "^  $flag .*(-1: " && neg=-2
    case $kind in
      N|BYTES) bad=("" "abc" "$neg" "12abc" "1e999" "99999999999999999999" "0x10" " 5"); maybe=(0 99999999999) ;;
      X) bad=("" "abc" "-1" "12abc" "1e999" "nan" "inf" "-inf"); maybe=(0 99999999999) ;;
      TEXT) bad=("") ;;
      *\|*) bad=("" "bogus" "${kind%%|*}x") ;;
      *) continue ;;
    esac
    # Every number goes through one parser (common/comm/cli.c): its whole list
    # of malformed values is given to each flag of 05 (the shared ones) and to
    # the first flag of each kind elsewhere; the other flags get what their own
    # table entry decides (empty, not a number, below the range).
    case $kind in N | BYTES | X)
      if [ "$lesson" != 05_dp ] && [[ " $seen " == *" $kind "* ]]; then bad=("" "abc" "$neg"); fi
      seen="$seen $kind" ;;
    esac
    for v in "${bad[@]}"; do
      TEST_TIMEOUT=$HOSTILE_TIMEOUT check "hostile $lesson $flag '$v' refused" 0 2 "^error: $flag" -- "$bin" "$flag" "$v"
    done
    for v in "${maybe[@]}"; do
      local log="$LOGS/hostile-$lesson$flag-$v.log"
      # shellcheck disable=SC2046 # tour.flags: a short run of a lesson whose defaults train for a minute
      with_timeout -k 5 "$HOSTILE_TIMEOUT" $launch "$bin" $(cat "$(dirname "$bin")/tour.flags" 2>/dev/null) "$flag" "$v" --no-check >"$log" 2>&1 </dev/null # mpirun would read the flag list
      local rc=$?
      if [ $rc -eq 0 ] || { [ $rc -eq 2 ] && grep -q "^error: " "$log"; }; then
        pass "hostile $lesson $flag $v: exit $rc$( [ $rc -eq 2 ] && echo ", $(grep -m1 '^error: ' "$log" | cut -c1-70)")"
      else
        fail "hostile $lesson $flag $v" "$log" "exit $rc: neither a clean run nor a clean refusal"
      fi
    done
  done < <(hostile_flags "$bin")
}

hostile_unknown() { # stray words and flags
  local bin=$1 lesson; lesson=$(basename "$(dirname "$bin")")
  check "hostile $lesson stray argument" 0 2 "^error: unexpected argument 'oops'" -- "$bin" oops
  check "hostile $lesson missing value" 0 2 "needs a value" -- "$bin" "$( hostile_flags "$bin" | awk '$2 != "FLAG" { print $1; exit }')"
  check "hostile $lesson flag with a value it does not take" 0 2 "takes no value" -- "$bin" --help=1
}

SHARED=$(hostile_flags ./05_dp/dp | awk '{ print $1 }' | tr '\n' ' ')
for dir in [0-9][0-9]_*/; do # every lesson, a new NN_name/ folder too
  lesson=${dir%/}
  bin=./$lesson/${lesson#*_}
  [ -x "$bin" ] || continue
  np=2
  [ "$lesson" = 05_dp ] && skip="--no-check --help" || skip="$SHARED"
  [ "$lesson" = 01_send_recv ] && skip="$skip --deadlock"
  hostile_lesson "$bin" "$np" "$skip"
  hostile_unknown "$bin"
done

# Integers are parsed exactly, never through a double: the largest seed is
# stored as itself, seeds 2^53 and 2^53+1 are different models, and a value
# past the range (or a size suffix that overflows) is refused.
HI=build/test-hostile-int
rm -rf "$HI"; mkdir -p "$HI"
check "hostile int: --seed INT64_MAX trains and is saved exactly" 2 0 "saved $HI/max.safetensors" \
  -- ./05_dp/dp --steps 1 --no-check --seed 9223372036854775807 --save "$HI/max.safetensors"
check "hostile int: the saved seed is 9223372036854775807" 0 0 '"seed":"9223372036854775807"' \
  -- head -c 4096 "$HI/max.safetensors"
check "hostile int: --seed 2^53" 2 0 "saved" -- ./05_dp/dp --steps 1 --no-check --seed 9007199254740992 --save "$HI/a.safetensors"
check "hostile int: --seed 2^53+1" 2 0 "saved" -- ./05_dp/dp --steps 1 --no-check --seed 9007199254740993 --save "$HI/b.safetensors"
if [ -s "$HI/a.safetensors" ] && [ -s "$HI/b.safetensors" ] && ! cmp -s "$HI/a.safetensors" "$HI/b.safetensors"; then
  pass "hostile int: seeds 2^53 and 2^53+1 give different models"
else fail "hostile int: seeds 2^53 and 2^53+1 give different models" "" "the two saved models are identical (or missing)"; fi
check "hostile int: --seed 2^63 refused" 0 2 \
  '^error: --seed: 9223372036854775808 is out of range; it must be between 0 and 9223372036854775807$' \
  -- ./05_dp/dp --seed 9223372036854775808
check "hostile int: a size suffix that overflows is refused" 0 2 \
  '^error: --max-bytes: 9999999999999G is out of range; it must be between' \
  -- ./03_all_reduce/all_reduce --max-bytes 9999999999999G
rm -rf "$HI"
