#!/usr/bin/env bash
# The lessons across emulated nodes. Runs inside tools/cluster.sh, which
# provides the nodes, CLUSTER_HOSTFILE and the Open MPI settings:
#   tools/cluster.sh --nodes 2 --slots 2 -- bash tests/cluster_tests.sh 2x2
# SET: quick (a few lessons, small: the loopback fallback), 2x2 (every lesson,
# and 03 and 05 with ranks mapped round-robin and split unevenly), 3x1 (03
# and 05 on three nodes of one rank). Prints PASS/FAIL lines and the summary;
# exit 1 if any failed. Every mpirun goes through the hostfile.
set -u
cd "$(dirname "$0")/.."
SET=${1:?usage: cluster_tests.sh quick|2x2|3x1}
LOGS=${LOGS:-build/test-logs}/cluster
source tests/lib.sh
[ -n "${CLUSTER_HOSTFILE:-}" ] || { echo "cluster_tests.sh runs inside tools/cluster.sh"; exit 2; }
MPIRUN="mpirun --hostfile $CLUSTER_HOSTFILE"
CORES=64 # the slots come from the hostfile (tools/cluster.sh allows oversubscription)

# The banner names every node and its ranks: the real hostnames on netns
# nodes; on loopback nodes every node has the machine's own name.
host() { if [ "$CLUSTER_MODE" = netns ]; then echo "node$1"; else echo '[^ :]+'; fi; }
on_nodes() { # on_nodes NP "0-1" "2-3" ...: the banner's node list
  local np=$1 i=0 list=""
  shift
  for r in "$@"; do list+="${list:+, }$(host $i): $r" i=$((i + 1)); done
  echo "$np ranks on $# nodes \($list\)"
}
PASS='^CHECK PASSED'
B22=$(on_nodes 4 0-1 2-3)
tag="cluster $CLUSTER_MODE $SET"

case $SET in
quick)
  check "$tag: 03 hierarchical over the real nodes, bytes across nodes exact" 4 0 "$B22" \
    'flat ring +[0-9.]+ +3145728   M x 2\(N-1\)/N x S = 3145728' \
    'hierarchical +[0-9.]+ +2097152   M x 2\(M-1\)/M x S = 2097152' 'both variants: 0' "$PASS" \
    -- ./03_all_reduce/all_reduce --min-bytes 1M --max-bytes 1M --iters 3 --hierarchical
  check "$tag: 05 hierarchical gradient all-reduce" 4 0 "$B22" \
    'across nodes +bytes sent per leader per step 524288, formula 2\(M-1\)/M x P x 4 = 524288 \(a flat all-reduce: 2\(N-1\)/N x P x 4 = 786432 per rank\)' \
    "$PASS" -- ./05_dp/dp --steps 3 --hierarchical
  check "$tag: 07 tensor parallel" 4 0 "$B22" "$PASS" -- ./07_tp/tp --steps 3
  ;;
2x2)
  check "$tag: 01 send/recv" 4 0 "$B22" "$PASS" -- ./01_send_recv/send_recv --max-bytes 1M
  check "$tag: 02 broadcast" 4 0 "$B22" "$PASS" -- ./02_broadcast/broadcast --max-bytes 1M
  check "$tag: 03 all-reduce, hierarchical over the real nodes" 4 0 "$B22" \
    'flat ring +[0-9.]+ +3145728   M x 2\(N-1\)/N x S = 3145728' \
    'hierarchical +[0-9.]+ +2097152   M x 2\(M-1\)/M x S = 2097152' 'both variants: 0' "$PASS" \
    -- ./03_all_reduce/all_reduce --max-bytes 1M --iters 3 --hierarchical
  check "$tag: 04 sampler" 4 0 "$B22" "$PASS" -- ./04_sampler/sampler
  check "$tag: 05 data parallel" 4 0 "$B22" \
    'bytes sent per rank per step 786432, formula 2\(N-1\)/N x P x 4 = 786432' "$PASS" -- ./05_dp/dp --steps 5
  check "$tag: 05 hierarchical gradient all-reduce" 4 0 "$B22" \
    'inside node 0 \(2 ranks\) 16 reduce \+ broadcast calls/step, rank 0 sent 524288 bytes/step' \
    'across nodes +bytes sent per leader per step 524288, formula 2\(M-1\)/M x P x 4 = 524288 ' \
    "$PASS" -- ./05_dp/dp --steps 5 --hierarchical
  check "$tag: 06 fsdp" 4 0 "$B22" "$PASS" -- ./06_fsdp/fsdp --steps 5
  check "$tag: 07 tensor parallel" 4 0 "$B22" "$PASS" -- ./07_tp/tp --steps 5
  check "$tag: 08 fsdp + tp" 4 0 "$B22" "$PASS" -- ./08_fsdp_tp/fsdp_tp --steps 5
  check "$tag: 09 pipeline" 4 0 "$B22" "$PASS" -- ./09_pp/pp --steps 5
  # any lesson this file does not name (a new NN_name/ folder): its own
  # check, on the short run its tour.flags name where its defaults are long
  for dir in [0-9][0-9]_*/; do
    bin=./${dir%/}/${dir#*_}
    bin=${bin%/}
    grep -qE -- "$bin( |$)" "${BASH_SOURCE[0]}" && continue
    # shellcheck disable=SC2046 # tour.flags: the words of a short run
    [ -x "$bin" ] && check "$tag: ${dir%/}" 4 0 "$B22" "$PASS" -- "$bin" $(cat "${dir}tour.flags" 2>/dev/null)
  done
  # Ranks dealt round-robin: each node holds ranks that are not neighbours,
  # so every edge of the flat ring crosses between nodes (4 edges).
  MPIRUN="mpirun --hostfile $CLUSTER_HOSTFILE --map-by node"
  BRR=$(on_nodes 4 0,2 1,3)
  check "$tag: 03 hierarchical, ranks round-robin over the nodes" 4 0 "$BRR" \
    'flat ring +[0-9.]+ +6291456   4 edges x 2\(N-1\)/N x S = 6291456' \
    'hierarchical +[0-9.]+ +2097152   M x 2\(M-1\)/M x S = 2097152' 'both variants: 0' "$PASS" \
    -- ./03_all_reduce/all_reduce --max-bytes 1M --iters 3 --hierarchical --no-sweep
  check "$tag: 05 hierarchical, ranks round-robin over the nodes" 4 0 "$BRR" "$PASS" \
    -- ./05_dp/dp --steps 5 --hierarchical
  # Three ranks on two nodes of two slots: node0 gets two, node1 one.
  MPIRUN="mpirun --hostfile $CLUSTER_HOSTFILE"
  B21=$(on_nodes 3 0-1 2)
  check "$tag: 03 hierarchical, uneven split 2 + 1" 3 0 "$B21" \
    'hierarchical +[0-9.]+ +2097152   M x 2\(M-1\)/M x S = 2097152' 'both variants: 0' "$PASS" \
    -- ./03_all_reduce/all_reduce --max-bytes 1M --iters 3 --hierarchical
  check "$tag: 05 hierarchical, uneven split 2 + 1" 3 0 "$B21" \
    'across nodes +bytes sent per leader per step 524288, formula 2\(M-1\)/M x P x 4 = 524288 \(a flat all-reduce: 2\(N-1\)/N x P x 4, rounded down per call = 699048 per rank\)' \
    "$PASS" -- ./05_dp/dp --steps 5 --batch 24 --hierarchical
  ;;
3x1)
  B31=$(on_nodes 3 0 1 2)
  check "$tag: 03 hierarchical, three nodes of one rank" 3 0 "$B31" \
    'flat ring +[0-9.]+ +3145728   M x 2\(N-1\)/N x S = 3145728' \
    'hierarchical +[0-9.]+ +3145728   M x 2\(M-1\)/M x S = 3145728' 'both variants: 0' "$PASS" \
    -- ./03_all_reduce/all_reduce --max-bytes 768K --min-bytes 768K --iters 3 --hierarchical
  # 8 tensors of 65536 B; 2 x 2/3 x 65536 = 87381.33 rounds down in each
  # call: 8 x 87381 = 699048 per rank, flat or among the 3 leaders. A node of
  # one rank reduces and broadcasts nothing: no call at all.
  check "$tag: 05 data parallel, three nodes of one rank" 3 0 "$B31" \
    'bytes sent per rank per step 699048, formula 2\(N-1\)/N x P x 4, rounded down per call = 699048$' \
    "$PASS" -- ./05_dp/dp --steps 5 --batch 24
  check "$tag: 05 hierarchical, three nodes of one rank" 3 0 "$B31" \
    'inside node 0 \(1 rank\) 0 reduce \+ broadcast calls/step, rank 0 sent 0 bytes/step \(one rank: nothing to reduce or broadcast\)' \
    'across nodes +bytes sent per leader per step 699048, formula 2\(M-1\)/M x P x 4, rounded down per call = 699048 \(a flat all-reduce: 2\(N-1\)/N x P x 4, rounded down per call = 699048 per rank\)' \
    "$PASS" -- ./05_dp/dp --steps 5 --batch 24 --hierarchical
  ;;
*) echo "cluster_tests.sh: unknown set '$SET' (quick, 2x2, 3x1)"; exit 2 ;;
esac
summary
