#!/usr/bin/env bash
# make fuzz: each harness under libFuzzer for SECONDS, one process, from a
# copy of its committed corpus (the inputs it finds stay in the build folder,
# the committed corpus is not touched). A crash stops it, with the input.
#   bash tests/fuzz/run.sh SECONDS DIR NAME...
set -u
secs=$1 dir=$2; shift 2
status=0
for name in "$@"; do
  work="$dir/corpus-$name" log="$dir/fuzz-$name.log"
  mkdir -p "$work" && cp tests/fuzz/corpus/"$name"/* "$work"/ 2>/dev/null
  echo "fuzz $name: $secs s, corpus $work (from tests/fuzz/corpus/$name), log $log"
  dict=tests/fuzz/$name.dict
  "$dir/fuzz_$name" -max_total_time="$secs" -max_len=8192 -print_final_stats=1 -dict="$dict" \
    -artifact_prefix="$dir/crash-$name-" "$work" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
  echo "fuzz $name: exit $rc, ${execs:-?} executions (${rate:-?}/s), $cov, corpus $(ls "$work" | wc -l | tr -d ' ') inputs"
  if [ $rc -ne 0 ]; then
    status=1
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -n 5
    echo "fuzz $name: fix the reader, then commit the input above to tests/fuzz/corpus/$name/ (make test replays it)"
  fi
done
exit $status
