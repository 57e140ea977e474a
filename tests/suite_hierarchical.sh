#!/usr/bin/env bash
# 03_all_reduce --ranks-per-node K (issue 7): the hierarchical all-reduce is
# correct, and the bytes crossing emulated node boundaries equal the
# formulas: flat ring M x 2(N-1)/N x S, hierarchical M x 2(M-1)/M x S.
A03=./03_all_reduce/all_reduce
check "03 hierarchical np=4, 2 nodes of 2: bytes across nodes exact" 4 0 \
  'flat ring +[0-9.]+ +50331648   M x 2\(N-1\)/N x S = 50331648' \
  'hierarchical +[0-9.]+ +33554432   M x 2\(M-1\)/M x S = 33554432' \
  'both variants: 0' 'CHECK PASSED' -- "$A03" --min-bytes 16M --max-bytes 16M --iters 2 --ranks-per-node 2
check "03 hierarchical np=4, 4 nodes of 1 (every rank a leader): same bytes as the ring" 4 0 \
  'flat ring +[0-9.]+ +6291456 ' 'hierarchical +[0-9.]+ +6291456 ' 'CHECK PASSED' \
  -- "$A03" --min-bytes 1M --max-bytes 1M --iters 2 --ranks-per-node 1
check "03 hierarchical np=4, 1 node of 4: nothing crosses" 4 0 \
  'flat ring +[0-9.]+ +0   M x 2' 'hierarchical +[0-9.]+ +0   M x 2' 'CHECK PASSED' \
  -- "$A03" --min-bytes 1M --max-bytes 1M --iters 2 --ranks-per-node 4
check "03 hierarchical np=3, odd count, 3 nodes of 1" 3 0 'both variants: 0' 'CHECK PASSED' \
  -- "$A03" --count 1001 --iters 2 --ranks-per-node 1
check "03 --ranks-per-node must divide NP" 4 2 'error: --ranks-per-node 3 does not divide the 4 ranks' \
  -- "$A03" --ranks-per-node 3
check "03 hierarchical np=2, 2 nodes of 1" 2 0 'flat ring +[0-9.]+ +8388608 ' 'hierarchical +[0-9.]+ +8388608 ' \
  'CHECK PASSED' -- "$A03" --min-bytes 4M --max-bytes 4M --iters 2 --ranks-per-node 1
check "03 --no-sweep: the comparison alone, bytes exact" 4 0 \
  'flat ring +[0-9.]+ +3145728   M x 2\(N-1\)/N x S = 3145728' \
  'CHECK PASSED: flat ring and hierarchical all-reduce, every element on every rank vs the exact sum, and bytes across nodes vs the exact predictions: 0 problem' \
  -- "$A03" --max-bytes 1M --iters 2 --ranks-per-node 2 --no-sweep
check "03 --no-sweep needs a hierarchy" 2 2 'error: --no-sweep leaves only the hierarchical comparison' \
  -- "$A03" --no-sweep
check "03 --hierarchical and --ranks-per-node are exclusive" 2 2 'error: --hierarchical uses the real nodes' \
  -- "$A03" --hierarchical --ranks-per-node 1
