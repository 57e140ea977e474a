#!/usr/bin/env bash
# --report-json FILE (sourced by run_tests.sh): the figures a run prints, as
# data (common/comm/report.c), which 13_plan's --verify reads in place of
# the printed columns.
#   - each lesson kind writes one JSON object whose numbers are the ones it
#     prints: traffic per axis beside its formula, memory by kind, every
#     step's time and loss, the bubble, the verdict;
#   - a bad destination is refused at start-up, as every output is; a path
#     that another output names is refused.
RJ=build/test-report
rm -rf "$RJ"; mkdir -p "$RJ"
rj() { # NAME FILE ASSERTION...: the file holds what the assertions say
  local name=$1 file=$2; shift 2
  check "$name" 0 0 '^report ok' -- python3 tests/report_json.py "$file" "$@"
}

# 05 at NP 2 (tests/lesson_05.sh asserts the same printed numbers)
check "report: 05 np=2 writes its figures" 2 0 \
  'all-reduce calls/step +8 +bytes sent per rank per step 524288, formula 2\(N-1\)/N x P x 4 = 524288' \
  '^CHECK PASSED' -- ./05_dp/dp --report-json "$RJ/05.json"
rj "report: 05's JSON holds what it printed" "$RJ/05.json" lesson=05_dp ranks=2 backend=cpu \
  verdict=PASSED "traffic/dp_cp all_reduce/calls=8" "traffic/dp_cp all_reduce/bytes=524288" \
  "traffic/dp_cp all_reduce/formula=524288" memory/params/measured=524288 \
  memory/params/formula=524288 memory/activ/measured=176128 memory/activ/formula=176128 \
  'step_ms#=30' 'loss#=30'
# its last step's kernels (common/comm/opcount.c), the check's own set aside: each
# block's forward and backward L = 4 times, the gradients zeroed (P = 131072),
# each tensor's all-reduce averaged (2L calls of D x H), the step; the blocks'
# matmuls and ReLUs are theirs, not counted again (7 entries, no dt_matmul)
rj "report: 05's JSON: the kernels of a step, the outermost calls" "$RJ/05.json" 'kernels#=7' \
  'kernels/dt_block_forward[16,64,256,1,0]/calls=4' 'kernels/dt_block_backward[16,64,256,1,0]/calls=4' \
  'kernels/dt_zero[131072,1,0,0,0]/calls=1' 'kernels/dt_scale[16384,2,1,0,0]/calls=8' \
  'kernels/dt_make_batch[16,64,0,0,0]/calls=1' 'kernels/dt_sgd_step[131072,0,0,0,0]/calls=1' \
  'kernels/dt_mse_forward_backward[1024,0,0,0,0]/calls=1' kernels_lost=0
# the last step's loss as printed, to its six decimals
loss30=$(sed -n 's/^step   30\/30  loss \([0-9.]*\) .*/\1/p' "$(check_log "report: 05 np=2 writes its figures")")
if [ -n "$loss30" ] && python3 -c "import json,sys; d=json.load(open('$RJ/05.json')); sys.exit(abs(d['loss'][29] - $loss30) > 5e-7)"; then
  pass "report: 05's last loss in the JSON is the printed $loss30"
else
  fail "report: 05's last loss in the JSON is the printed one" "" "printed '${loss30:-none}'"
fi
check "report: 05 --no-check says so" 2 0 '' -- ./05_dp/dp --steps 3 --no-check --report-json "$RJ/05n.json"
rj "report: 05 --no-check: verdict not checked" "$RJ/05n.json" "verdict=not checked" 'step_ms#=3'

# a pipeline: its stage's bytes and memory (rank 0's), the bubble beside its formula
check "report: 09 np=2 writes its figures" 2 0 '^CHECK PASSED' -- \
  ./09_pp/pp --optimizer adamw --steps 4 --report-json "$RJ/09.json"
rj "report: 09's JSON: pp bytes, memory, bubble formula (N-1)/(M+N-1)" "$RJ/09.json" \
  "traffic/pp sendrecv/bytes=8192" "traffic/pp sendrecv/formula=8192" memory/optim/measured=524288 \
  memory/optim/formula=524288 bubble/formula=0.1111111111111111 verdict=PASSED \
  'kernels/dt_block_forward[4,64,256,1,0]/calls=16' 'kernels/dt_copy[256,2,0,0,0]/calls=8' \
  'kernels/dt_adamw_step[65536,0,0,0,0]/calls=1'

# 10's mixture of experts: its router's and its exchange's kernels counted as
# the others' (each of L = 4 layers once a step: R = 16 tokens a rank, D = 64,
# E = 8 experts, top k = 2); the experts' blocks' rows follow the routing
check "report: 10 np=2 writes its kernels" 2 0 '^step +2/2 ' -- \
  ./10_ep/ep --steps 2 --no-check --report-json "$RJ/10.json"
rj "report: 10's JSON: the router's kernels, each a call a layer" "$RJ/10.json" kernels_lost=0 \
  'kernels/dt_router_forward[16,64,8,2,0]/calls=4' 'kernels/dt_router_gates[16,8,2,0,0]/calls=4' \
  'kernels/dt_moe_dispatch_rows[16,2,64,0,0]/calls=4' 'kernels/dt_moe_combine[16,2,64,0,0]/calls=4' \
  'kernels/dt_moe_aux[16,8,0,0,0]/calls=4' 'kernels/dt_moe_gate_backward[16,2,64,0,0]/calls=4' \
  'kernels/dt_moe_combine_backward[16,2,64,0,0]/calls=4' \
  'kernels/dt_router_backward[16,64,8,2,0]/calls=4'

# the mesh: every axis's row of its table
check "report: 12 np=2 --tp 2 writes its figures" 2 0 '^CHECK PASSED' -- \
  ./12_mesh/mesh --tp 2 --steps 3 --report-json "$RJ/12.json"
# (tests/lesson_12.sh asserts the printed row: 16 calls, 524288 bytes)
rj "report: 12's JSON: tp all-reduces, memory by kind" "$RJ/12.json" lesson=12_mesh \
  "traffic/tp all_reduce/calls=16" "traffic/tp all_reduce/bytes=524288" \
  "traffic/tp all_reduce/formula=524288" \
  "traffic/dp_cp all_reduce/calls=0" memory/comm/formula=131072 memory/data/measured=65536

# the lessons before training: their verdict, and 03's rows
check "report: 03 np=2 writes its rows" 2 0 '^CHECK PASSED' -- \
  ./03_all_reduce/all_reduce --min-bytes 4K --max-bytes 4K --report-json "$RJ/03.json"
rj "report: 03's JSON: the ring's row and the verdict" "$RJ/03.json" lesson=03_all_reduce \
  "all_reduce/ring 4096/sent_max=4096" "all_reduce/ring 4096/formula=4096" \
  "all_reduce/ring 4096/wrong=0" verdict=PASSED
check "report: 01 np=2 writes its verdict" 2 0 '^CHECK PASSED' -- \
  ./01_send_recv/send_recv --max-bytes 1K --report-json "$RJ/01.json"
rj "report: 01's JSON: the verdict" "$RJ/01.json" lesson=01_send_recv verdict=PASSED

# bad destinations: refused before anything runs
check "report: --report-json into a missing folder refused" 2 2 \
  "^error: --report-json $RJ/nowhere/r.json: its folder $RJ/nowhere: No such file or directory" \
  -- ./05_dp/dp --steps 3 --report-json "$RJ/nowhere/r.json"
check "report: --report-json naming a folder refused" 2 2 \
  "^error: --report-json $RJ: is a folder; name a file in it" -- ./02_broadcast/broadcast --report-json "$RJ"
check "report: --report-json and --save on one path refused" 2 2 \
  "^error: --save and --report-json both name $RJ/same: give each its own path" \
  -- ./06_fsdp/fsdp --steps 3 --save "$RJ/same" --report-json "$RJ/same"
rm -rf "$RJ"
