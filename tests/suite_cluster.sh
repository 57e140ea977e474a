#!/usr/bin/env bash
# Lessons across emulated nodes (tools/cluster.sh), sourced by run_tests.sh
# (make test, so CI) and by run_cluster.sh (make test-cluster, this suite
# alone): every lesson on 2 nodes x 2 ranks, 03 and 05 mapped round-robin,
# split 2 + 1, and on 3 nodes x 1 rank (about 20 s on a 2-core VM). Where the
# machine forbids network namespaces that part says "skipped: <reason>"; the
# quick set runs on loopback nodes in any case. The skip and fallback paths
# themselves are tested by forcing the check to fail (CLUSTER_DENY), and a
# run killed with SIGKILL or SIGTERM must leave nothing behind.
CLUSTER=tools/cluster.sh

# processes whose command line matches an ERE (BSD pgrep has no -c)
count_procs() { echo $(($(pgrep -f -- "$1" | wc -l))); }

# cluster_run NAME CLUSTER_OPTIONS... -- CMD: run CMD on emulated nodes and
# count its PASS/FAIL lines as this suite's own.
cluster_run() {
  local name=$1 log="$LOGS/cluster-$(printf '%s' "$1" | tr -c 'A-Za-z0-9_.=-' '_').log" rc line
  shift
  with_timeout -k 5 900 "$CLUSTER" "$@" >"$log" 2>&1
  rc=$?
  while IFS= read -r line; do
    case $line in
    "PASS "*) pass "${line#PASS }" ;;
    "FAIL "*) fail "${line#FAIL }" ;;
    "    "*) echo "$line" ;; # a failure's log tail and reason
    esac
  done <"$log"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$name" "$log" "timed out: $CLUSTER $*"
  elif ! grep -Eq '^[0-9]+ passed, [0-9]+ failed$' "$log"; then fail "$name" "$log" "exit code $rc, no summary: $CLUSTER $*"
  fi
}

# ---- the skip and fallback paths, forced ---------------------------------------------
check "cluster: check says 'skipped: <reason>' and exits 77 when namespaces are refused" 0 77 \
  '^cluster: skipped: namespaces refused by CLUSTER_DENY \(forced by the test\)$' \
  -- env CLUSTER_DENY="forced by the test" "$CLUSTER" check
check "cluster: a shaped link without namespaces is a skip (77), not a failure" 0 77 \
  '^cluster: skipped: namespaces refused by CLUSTER_DENY' \
  -- env CLUSTER_DENY="forced by the test" "$CLUSTER" --rate 1gbit -- true
check "cluster: bad options are refused" 0 2 "^cluster: --nodes 'x': a whole number" \
  -- "$CLUSTER" --nodes x -- true
CLUSTER_DENY="forced by the test" cluster_run "loopback fallback" --mode auto --nodes 2 --slots 2 \
  -- bash tests/cluster_tests.sh quick
if grep -q 'falling back to loopback nodes' "$LOGS/cluster-loopback_fallback.log"; then
  pass "cluster: --mode auto falls back to loopback nodes when namespaces are refused"
else
  fail "cluster: --mode auto falls back to loopback nodes when namespaces are refused" "$LOGS/cluster-loopback_fallback.log"
fi

# ---- on network namespaces, where the machine allows them ------------------------------
if why=$("$CLUSTER" check 2>&1); then
  echo "$why"
  cluster_run "netns 2x2" --nodes 2 --slots 2 -- bash tests/cluster_tests.sh 2x2
  cluster_run "netns 3x1" --nodes 3 --slots 1 -- bash tests/cluster_tests.sh 3x1

  # Killed mid-run (SIGKILL, or SIGTERM as timeout sends it), the launcher
  # takes every process of the run with it, and with the last process the
  # namespaces, interfaces, qdiscs and mounts; the marker makes this run's
  # processes findable.
  for sig in KILL TERM; do
    marker="sleep 86$$"
    "$CLUSTER" --nodes 2 --slots 2 --rate 200mbit -- \
      mpirun --hostfile /run/cluster/hostfile -np 4 sh -c "$marker" >/dev/null 2>&1 &
    launcher=$!
    for _ in $(seq 50); do [ "$(count_procs "^$marker\$")" = 4 ] && break; sleep 0.2; done
    started=$(count_procs "^$marker\$")
    kill -$sig "$launcher"
    wait "$launcher" 2>/dev/null
    for _ in $(seq 25); do pgrep -f "^$marker\$" >/dev/null || break; sleep 0.2; done
    left=$(count_procs "^$marker\$")
    if [ "$started" = 4 ] && [ "$left" = 0 ] && ! grep -q cluster-run /proc/mounts; then
      pass "cluster: killed with SIG$sig mid-run, nothing is left (4 ranks running, then 0)"
    else
      fail "cluster: killed with SIG$sig mid-run, nothing is left" "" \
        "ranks running before the kill: $started (want 4), after: $left (want 0)"
      stray=$(pgrep -f "^$marker\$") && kill -9 $stray 2>/dev/null
    fi
  done
else
  echo "SKIP cluster on network namespaces: ${why#cluster: }"
  echo "     (the lessons ran on loopback nodes above: correctness only, one hostname, no shaped link)"
fi
