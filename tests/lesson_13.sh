# Lesson 13_plan: the cost model. Sourced by tests/run_tests.sh (check() comes
# from tests/lib.sh).
#
# A unit test per formula (formulas.c, compute.c, cost.c), each against the
# figure the lesson prints (its own tests assert the same numbers) or a value
# worked out by hand below; ZeRO's published example; the presets, a user's
# cluster file, the machine file; --search; bad input; and --verify, which
# runs lessons 12, 11, 05, 06 and 09 here and sets their printed bytes,
# memory and step time beside the prediction.
D13=./13_plan/plan
T13=$LOGS/13_plan_files
rm -rf "$T13"
mkdir -p "$T13"
A100="--cluster dgx-a100-80g" # the formulas do not depend on the machine; the times do
# a JSON key and its exact value (the object is the lines from its '{')
j13() { echo "\"$1\": $2[,}]"; }

check "13 --help lists no --optimizer (it trains nothing: not in the kernel matrix)" 0 0 \
  '^  --measure ' '^  --verify ' -- sh -c "$D13 --help | grep -v -- '--optimizer '"

# ---- the lessons' formulas, exactly as they print them ----------------------
# 12_mesh at NP 16 (dp, pp, cp, tp all 2): tests/lesson_12.sh asserts the same
check "13 formula: 12's bytes per axis, dp 2 pp 2 cp 2 tp 2" 0 0 '"tp all_reduce": \[32, 65536\]' \
  '"cp sendrecv": \[32, 65536\]' '"pp sendrecv": \[5, 8192\]' '"dp_cp all_reduce": \[1, 73728\]' \
  -- $D13 --predict --json $A100 --model mesh12 --dp 2 --pp 2 --cp 2 --tp 2
check "13 formula: 12's --zero 1 (06's stage 1 over dp x cp)" 0 0 '"dp_cp all_reduce": \[4, 294912\]' \
  '"dp_cp all_gather": \[4, 147456\]' -- $D13 --predict --json $A100 --model mesh12 --dp 2 --cp 2 --zero 1
# 12's memory at pp 2 x cp 2 x tp 2 (its README's real output): R = 32 rows,
# W = 16, A = 2, Hs = 64, C = 16, L = 2, live 2: activ = (2 x (RD + L(4RW +
# RA + 2RD + 2RHs)) + 2RD + RHs + 4RW + C(W+A) + RA) x 4 = 166272
check "13 formula: 12's memory by kind, pp 2 cp 2 tp 2" 0 0 "$(j13 params 49152)" "$(j13 grads 49152)" \
  "$(j13 optim 98304)" "$(j13 activ 166272)" "$(j13 comm 16384)" "$(j13 data 32768)" \
  -- $D13 --predict --json $A100 --model mesh12 --pp 2 --cp 2 --tp 2
check "13 formula: 12's memory by kind, tp 2 (R = 256)" 0 0 "$(j13 params 98304)" "$(j13 optim 196608)" \
  "$(j13 activ 1290496)" "$(j13 comm 131072)" "$(j13 data 65536)" -- $D13 --predict --json $A100 --tp 2
# 11 at NP 2: R = B S/N = 128, forward L(N-1) + backward L(2N-1) hops of 2RD x 4
check "13 formula: 11's ring, gradients and memory" 0 0 '"cp sendrecv": \[8, 262144\]' \
  '"dp_cp all_reduce": \[1, 98304\]' "$(j13 activ 666112)" "$(j13 comm 131072)" "$(j13 data 16384)" \
  -- $D13 --predict --json $A100 --model cp11 --cp 2
# 05 at NP 2: one all-reduce per tensor, 2L of them, 2(N-1)/N x DH x 4 each
check "13 formula: 05's buckets and memory" 0 0 '"dp_cp all_reduce": \[8, 524288\]' \
  "$(j13 params 524288)" "$(j13 optim 0)" "$(j13 activ 176128)" \
  -- $D13 --predict --json $A100 --model dp05 --dp 2 --opt sgd
# 06 at NP 2, ZeRO-3: S = 2DH/N = 16384; gathers 2L(N-1)S x 4, scatters L(N-1)S x 4
check "13 formula: 06's ZeRO-3" 0 0 '"dp_cp all_gather": \[8, 524288\]' \
  '"dp_cp reduce_scatter": \[4, 262144\]' "$(j13 params 393216)" "$(j13 grads 393216)" \
  -- $D13 --predict --json $A100 --model fsdp06 --dp 2 --zero 3 --opt sgd
check "13 formula: 06's ZeRO-1" 0 0 '"dp_cp all_reduce": \[4, 524288\]' '"dp_cp all_gather": \[4, 262144\]' \
  "$(j13 params 524288)" "$(j13 grads 524288)" -- $D13 --predict --json $A100 --model fsdp06 --dp 2 --zero 1 --opt sgd
# 09 at NP 2, stage 0: its 9 exchanges (1F1B, M = 8), B x D x 4 forward, live 2
check "13 formula: 09's stage 0" 0 0 '"pp sendrecv": \[9, 8192\]' "$(j13 params 262144)" \
  "$(j13 activ 45056)" -- $D13 --predict --json $A100 --model pp09 --pp 2 --opt sgd
# 09's other schedules, priced from 09's own plans (09_pp/plans.c), each figure the one
# 09 prints (tests/lesson_09.sh): interleaved V 2 at NP 4, L 8: stage 0 sends (2V-1)M = 24
# messages of RD x 4 in the 43 sendrecvs of the lockstep, holds 11 chunk-microbatches of
# 9216 B + scratch; its plan 38 slots, 6 idle = 2(N-1)
check "13 formula: 09 --virtual-stages 2 at NP 4, its plan's sendrecvs, bubble slots, activations" 0 0 \
  '"pp sendrecv": \[43, 24576\]' "$(j13 activ 118784)" '"bubble_slots": 6, "slots": 38,' \
  -- $D13 --predict --json $A100 --model pp09 --pp 4 --layers 8 --opt sgd --virtual-stages 2
# ZB-H1 at NP 2, M 8: 16 sendrecvs, 2 microbatches held with B's output gradients
# (2 x (20480 + 4096) + scratch); the plan 25 slots, N-1 = 1 idle: (N-1)/(3M+N-1)
check "13 formula: 09 --schedule zb1 at NP 2, M 8: N-1 idle slots of 3M+N-1" 0 0 '"pp sendrecv": \[16, 8192\]' \
  "$(j13 activ 49152)" '"bubble_slots": 1, "slots": 25,' '"schedule": "zb1"' \
  -- $D13 --predict --json $A100 --model pp09 --pp 2 --opt sgd --schedule zb1
# at M 2 < N 4 09's plan idles 5 of 11 slots, above the paper's N-1 = 3 (zb.h): priced as it runs
check "13 formula: 09 --schedule zb1 at NP 4, M 2: 5 idle slots of 11, 09's plan, not the formula" 0 0 \
  '"bubble_slots": 5, "slots": 11,' "$(j13 activ 114688)" \
  -- $D13 --predict --json $A100 --model pp09 --pp 4 --opt sgd --schedule zb1 --micro 16
# 12 walks 09's interleaved plan: pp 2 tp 2 V 2 as tests/lesson_12.sh prints it
check "13 formula: 12 --pp 2 --tp 2 --virtual-stages 2, 21 sendrecvs, activ 423168" 0 0 \
  '"pp sendrecv": \[21, 98304\]' "$(j13 activ 423168)" '"bubble_slots": 2, "slots": 18,' \
  -- $D13 --predict --json $A100 --model mesh12 --pp 2 --tp 2 --virtual-stages 2
for bad in "pp09 --pp 2 --virtual-stages 2 --schedule gpipe|gpipe with 2 virtual" \
  "pp09 --pp 2 --virtual-stages 2 --schedule zb1|zb1 with 2 virtual" \
  "pp09 --pp 4 --virtual-stages 2|1f1b with 2 virtual .*, 4 layers\) is run by no lesson" \
  "gpt14 --pp 2 --virtual-stages 2|1f1b with 2 virtual .*, 2 layers\) is run by no lesson"; do
  check "13 a schedule no lesson runs refused: ${bad%%|*}" 0 2 "^error: --schedule ${bad#*|}" \
    -- $D13 --predict $A100 --model ${bad%%|*}
done
# 12 and 14 walk 09's ZB-H1 and interleaved plans: each figure as the lesson prints it at NP 2
# (mpirun -np 2 ./12_mesh/mesh --pp 2 --schedule zb1, ./14_gpt/gpt --pp 2 --schedule zb1 and
# --pp 2 --virtual-stages 2 --layers 4, rank 0's report): 8 sendrecvs of ZB-H1's plan, 1 idle
# slot of 13, min(pp, M) = 2 microbatches held with B's kept gradients (12: L(2RD + 3RW), 14:
# L(2RD + RHs + 3RW) floats more a slot); V 2: 21 sendrecvs, 2 idle slots of 18
check "13 formula: 12 --pp 2 --schedule zb1, 8 sendrecvs, activ 730624" 0 0 \
  '"pp sendrecv": \[8, 32768\]' "$(j13 activ 730624)" '"bubble_slots": 1, "slots": 13,' \
  -- $D13 --predict --json $A100 --model mesh12 --pp 2 --schedule zb1
check "13 formula: 14 --pp 2 --schedule zb1, 8 sendrecvs, activ 4166656" 0 0 \
  '"pp sendrecv": \[8, 262144\]' "$(j13 activ 4166656)" '"bubble_slots": 1, "slots": 13,' \
  -- $D13 --predict --json $A100 --model gpt14 --pp 2 --schedule zb1
check "13 formula: 14 --pp 2 --virtual-stages 2 --layers 4, 21 sendrecvs, activ 6353920" 0 0 \
  '"pp sendrecv": \[21, 786432\]' "$(j13 activ 6353920)" '"bubble_slots": 2, "slots": 18,' \
  -- $D13 --predict --json $A100 --model gpt14 --pp 2 --virtual-stages 2 --layers 4
check "13 gpt14 --schedule zb1 --recompute full refused as 14 refuses it" 0 2 \
  "^error: --schedule zb1 keeps each layer's activations until its W runs: 14 runs it without --recompute full" \
  -- $D13 --predict $A100 --model gpt14 --pp 2 --schedule zb1 --recompute full

# 14_gpt (gpt14) at 14's test size (tests/lesson_14.sh's SMALL14: L 2, D 32, S 32, B 8),
# V = README.md's characters (it changes: counted here as 14's tests count them)
# padded to a multiple of tp. tp 2: R = 256 rows, tp's all-reduces 10 of the activations
# (M((4 + 2 recompute)L + first + last) x 2(tp-1)/tp x RD x 4 = 327680 bytes), the loss's
# max (1024) and sums (2048): one row of 14's report JSON, 12 calls of 330752 bytes
G14="--model gpt14 --layers 2 --dim 32 --seq 32 --batch 8"
V13=$(perl -CSD -0777 -ne 'my %s; $s{$_} = 1 for split //; print scalar(keys %s)' README.md)
check "13 formula: 14's tp all-reduces, the vocabulary's among them (tp 2)" 0 0 \
  '"tp all_reduce": \[12, 330752\]' -- $D13 --predict --json $A100 $G14 --tp 2
# --sequence-parallel: all-gathers and reduce-scatters of R/tp rows, (tp-1) Rs D x 4 each;
# the gains' all-reduce, 2(tp-1)/tp (2L + 1) D x 4 = 640 bytes, beside the max and sums
check "13 formula: 14's --sequence-parallel, all-gathers, reduce-scatters, the gains" 0 0 \
  '"tp all_gather": \[10, 163840\]' '"tp reduce_scatter": \[10, 163840\]' \
  '"tp all_reduce": \[3, 3712\]' -- $D13 --predict --json $A100 $G14 --tp 2 --sequence-parallel
# pp 2: M = 4 microbatches of R = 64 rows, stage 0 sends 4 x RD x 4 in 5 exchanges (09's
# plan); the tied wte's gradient all-reduced between the first and last stage, V D x 4
check "13 formula: 14's pp 2, the tied weight's all-reduce (V = $V13)" 0 0 \
  '"pp sendrecv": \[5, 32768\]' "\"pp all_reduce\": \\[1, $((V13 * 32 * 4))\\]" \
  -- $D13 --predict --json $A100 $G14 --pp 2
# NP 1: n = L(4D^2 + 2DH) + VD + (2L + 1)D + SD floats, AdamW 8n bytes; the slot and the
# scratch of 14_gpt/formulas.c (R = 256, the logits [R, V]); the parameters nanoGPT counts, n
n14=$((2 * (4 * 32 * 32 + 2 * 32 * 128) + V13 * 32 + 5 * 32 + 32 * 32))
check "13 formula: 14's memory at NP 1, n = $n14 floats" 0 0 "$(j13 params $((4 * n14)))" \
  "$(j13 grads $((4 * n14)))" "$(j13 optim $((8 * n14)))" "$(j13 comm $((8 * 256 * 32 * 4)))" \
  "$(j13 data $((2 * 256 * 4)))" "\"parameters\": $n14," -- $D13 --predict --json $A100 $G14
check "13 gpt14's V padded to tp as 14 pads it" 0 0 "^model gpt14\\+flags: .* vocab $(((V13 + 3) / 4 * 4)), " \
  -- $D13 --predict $A100 $G14 --tp 4 --heads 4
# every figure 14's run records (its --report-json), equal to the prediction, and the
# kernels its step calls, each at its shape, its calls a step: two meshes that mix
# every axis and feature, at 2 steps (no timing)
cmp14() { # NAME NP "14's flags" "plan's flags"
  local json="$T13/$(echo "$1" | tr -c 'A-Za-z0-9' _).json"
  check "$1: 14 runs" "$2" 0 "every rank's memory equals its formulas: yes" -- ./14_gpt/gpt \
    --layers 2 --dim 32 --seq 32 --batch 8 --sample 0 --eval-every 0 --steps 2 --no-check \
    --report-json "$json" $3
  $D13 --predict --json $A100 $G14 $4 2>&1 | sed -n '/^{/,$p' >"$json.plan"
  if python3 - "$json" "$json.plan" <<'PY'; then pass "$1"; else fail "$1" "$json.plan"; fi
import json, sys
run, plan = (json.load(open(f)) for f in sys.argv[1:3])
n, bad = 0, []
for k, v in run["traffic"].items():  # 14's emb: the first and last stage, 13's pp
    n += 1
    want = plan["traffic"].get("pp all_reduce" if k == "emb all_reduce" else k, [0, 0])
    bad += [] if [v["calls"], v["bytes"]] == want else [f"{k}: {v} against {want}"]
for k, v in run["memory"].items():
    n += 1
    bad += [] if v["measured"] == plan["memory_per_gpu_bytes"][k] else [f"{k}: {v} against {plan['memory_per_gpu_bytes'][k]}"]
def kernels(d):  # {(kernel, shape): calls}
    return {(k["kernel"], tuple(k["shape"])): k["calls"] for k in d["kernels"]}
got, want = kernels(run), kernels(plan)
kbad = [f"{k}: {got.get(k, 0)} a step, predicted {want.get(k, 0)}" for k in sorted(set(got) | set(want)) if got.get(k, 0) != want.get(k, 0)]
print(f"{n} figures, {len(bad)} differ; {len(set(got) | set(want))} kernels, {len(kbad)} differ", *bad, *kbad, sep="\n")
sys.exit(1 if bad or kbad or n < 10 or len(got) < 20 else 0)
PY
}
cmp14 "13 gpt14: every figure and kernel of 14 --pp 2 --tp 2 --sequence-parallel --recompute equals the plan" 4 \
  "--pp 2 --tp 2 --sequence-parallel --recompute" "--pp 2 --tp 2 --sequence-parallel --recompute full"
cmp14 "13 gpt14: every figure and kernel of 14 --dp 2 --cp 2 --zero 1 --split zigzag --schedule gpipe equals the plan" 4 \
  "--dp 2 --cp 2 --zero 1 --split zigzag --schedule gpipe" "--dp 2 --cp 2 --zero 1 --split zigzag --schedule gpipe"
check "13 gpt14 refuses what 14 cannot run" 0 2 '^error: 12 and 14 shard the optimizer alone' \
  -- $D13 --predict $A100 --model gpt14 --dp 2 --zero 2
check "13 gpt14: --sequence-parallel's rows must split over tp" 0 2 \
  '^error: --sequence-parallel: the 6 rows of a microbatch do not split over tp 4' \
  -- $D13 --predict $A100 --model gpt14 --tp 4 --seq 6 --batch 1 --sequence-parallel

# ---- the planner's own formulas, worked out by hand ----------------------------
# GPT-3 175B: L(4D^2 + 2DF + 9D + F) + VD + SD + 2D parameters; model FLOPs
# 6 P T + 12 L D S T with T = 1536 x 2048 tokens (PaLM's)
check "13 formula: GPT-3 175B's parameters and model FLOPs" 0 0 '"parameters": 174604259328,' \
  '"model_flops_per_step": 3.38674e\+18,' -- $D13 --predict --json $A100 --model gpt3-175b --tp 8 --pp 16 --dp 8
# a small GPT block, tp 2, bf16, scores materialised, one microbatch in flight:
# per layer s b (10h + (8h + 4F)/t) + 5 a s^2 b / t = 16(640 + 768) + 2560 = 25088,
# 2 layers, + the logits 4 s b V/t = 3200: 53376. Parameters on the rank:
# 2 x ((4D^2 + 2DF + 3D + F)/2 + 6D) + VD/2 + SD + 2D = 54720: params 2x,
# grads 2x, optim (fp32 master, m, v) 12x
G13="--model gpt --layers 2 --dim 64 --heads 4 --ffn 256 --vocab 100 --seq 16 --batch 4 --precision bf16"
check "13 formula: a GPT block's memory (Korthikanti et al., ZeRO's 2 + 2 + 12)" 0 0 "$(j13 activ 53376)" \
  "$(j13 params 109440)" "$(j13 grads 109440)" "$(j13 optim 656640)" "$(j13 total 928896)" \
  -- $D13 --predict --json $A100 $G13 --tp 2 --attention materialised
# ZeRO-3 over dp 2 (tp 1): 107520 parameters, (G-1)/G x P x 2 bytes = 107520 per
# gather; M = 2 microbatches of one sequence: 2M gathers, M scatters
check "13 formula: ZeRO-3's gathers per microbatch, (n-1)/n of the buffer" 0 0 \
  '"dp_cp all_gather": \[4, 430080\]' '"dp_cp reduce_scatter": \[2, 215040\]' \
  -- $D13 --predict --json $A100 $G13 --dp 2 --zero 3
# the alpha-beta cost of tp's all-reduce on NCCL's ring: 4LM = 32 calls of
# S = s b D x 2 = 2048 bytes: 32 x (8.4 us + 2(n-1) alpha + 2(n-1)/n S beta),
# NCCL's base latency 8.4 us, alpha 3.4 us a step, beta 1/240 GB/s (NCCL's NVLink, A100)
check "13 formula: tp's all-reduces at alpha-beta (the ring, 03, as NCCL runs it)" 0 0 '"tp": 0.000486673,' \
  -- $D13 --predict --json $A100 $G13 --tp 2
# the bubble: (pp-1) microbatches of the other stage (pp 2, M 4: 2 idle slots of 8
# busy, each a quarter of a microbatch), lighter than the slowest (compute + tp + cp
# over M), whose last stage holds the output layer
check "13 formula: the bubble, 09's (pp-1)/(M+pp-1) of the other stages' microbatches" 0 0 -- sh -c "$D13 --predict --json $A100 $G13 --pp 2 \
  --layers 4 --tp 2 | awk '{ gsub(/[{}]/, \"\"); n = split(\$0, kv, \", \")
    for (i = 1; i <= n; i++) { m = split(kv[i], p, \": \"); k = p[m - 1]; gsub(/[ \"]/, \"\", k); v[k] = p[m] } }
  END { o = v[\"other_stages_microbatch_s\"] + 0; w = (2 - 1) * o; d = w - v[\"bubble_s\"]
    own = (v[\"compute_s\"] - v[\"once_s\"] + v[\"tp\"] + v[\"cp\"]) / 4
    if (d < 0) d = -d; exit !(v[\"bubble_s\"] > 0 && d < 1e-5 * w && o < own && v[\"bubble_slots\"] == 2) }'"
# ZeRO's example (Rajbhandari et al. 2020, section 5): 7.5B parameters, Nd = 64,
# mixed-precision Adam: (2 + 2 + 12) x 7.5e9 = 120 GB; 31.4; 16.6; 1.9 GB
z13=0
for want in "120000000000 120.000" "31406250000 31.406" "16640625000 16.641" "1875000000 1.875"; do
  check "13 ZeRO's example, stage $z13: ${want#* } GB a GPU" 0 0 "^    total +${want% *} +${want#* } GB" \
    -- $D13 --params 7.5e9 --dp 64 --zero $z13 --precision bf16 $A100 --predict
  z13=$((z13 + 1))
done

# ---- real runs' features (issue 47), the same small block worked out by hand --------
# selective recomputation keeps no scores: 2 x 16(640 + 768) + 3200 = 48256
check "13 formula: --recompute selective drops the S^2 scores (Korthikanti et al.)" 0 0 "$(j13 activ 48256)" \
  -- $D13 --predict --json $A100 $G13 --tp 2 --attention materialised --recompute selective
# sequence parallelism: the 10h outside tp over tp too: 2 x (16(320 + 768) + 2560) + 3200;
# each all-reduce an all-gather and a reduce-scatter of (n-1)/n s b D x 2 = 1024 bytes
check "13 formula: --sequence-parallel, activations 10h/t, all-gather + reduce-scatter" 0 0 \
  "$(j13 activ 43136)" '"tp all_gather": \[32, 32768\]' '"tp reduce_scatter": \[32, 32768\]' \
  -- $D13 --predict --json $A100 $G13 --tp 2 --attention materialised --sequence-parallel
# GQA, 2 KV heads of 16: L(2D^2 + 2D kv + 2DF + D + 2kv + F + 6D) + VD + SD + 2D = 99200
check "13 formula: --kv-heads 2, grouped-query attention's parameters" 0 0 '"parameters": 99200,' \
  -- $D13 --predict --json $A100 $G13 --tp 2 --kv-heads 2
# llama's block: L(2D^2 + 2D kv + 3DF + 2D) + 2VD + D = 144192
check "13 formula: --mlp swiglu --arch llama, the parameters" 0 0 '"parameters": 144192,' \
  -- $D13 --predict --json $A100 $G13 --tp 2 --mlp swiglu --arch llama
# the vocabulary padded to 128: 28 more rows of D
check "13 formula: --vocab-pad 128, 128 rows in place of 100" 0 0 '"parameters": 109312,' \
  -- $D13 --predict --json $A100 $G13 --tp 2 --vocab-pad 128
# interleaved 1F1B, V = 2 on pp 2, M = 4: stage 0 sends M(2V - 1) = 12 messages of s b D x 2
# in the 21 sendrecvs of 09's plan; the bubble half of the plain schedule's (checked beside it)
check "13 formula: --virtual-stages 2, M(2V-1) messages on the first stage in 09's 21 sendrecvs" 0 0 '"pp sendrecv": \[21, 24576\]' \
  -- $D13 --predict --json $A100 $G13 --layers 8 --pp 2 --virtual-stages 2
b1=$($D13 --predict --json $A100 $G13 --layers 8 --pp 2 | grep -o '"bubble_s": [0-9.e-]*' | cut -d' ' -f2)
b2=$($D13 --predict --json $A100 $G13 --layers 8 --pp 2 --virtual-stages 2 | grep -o '"bubble_s": [0-9.e-]*' | cut -d' ' -f2)
if awk -v a="$b1" -v b="$b2" 'BEGIN { d = a / 2 - b; exit !(a > 0 && (d < 0 ? -d : d) < 1e-5 * a) }'; then
  pass "13 formula: --virtual-stages 2 halves the bubble ($b1 s -> $b2 s)"
else
  fail "13 formula: --virtual-stages 2 halves the bubble ($b1 s -> $b2 s)" ""
fi
# ZB-H1 on the GPT block: min(pp, M) microbatches held, each layer with B's kept gradients,
# s b (2h + (3h + F)/t) x 2 = 16 (128 + 224) x 2 = 11264 B (bf16): 2 x 1 x 11264 more than 1F1B
check "13 formula: --schedule zb1, the kept gradients 1F1B's activations do not hold" 0 0 \
  "$(j13 activ 67840)" -- $D13 --predict --json $A100 $G13 --pp 2 --tp 2 --schedule zb1
check "13 formula: 1F1B beside it, without them" 0 0 \
  "$(j13 activ 45312)" -- $D13 --predict --json $A100 $G13 --pp 2 --tp 2
check "13 uneven stages: 1 + 2 + 2 + 1 of 6 layers" 0 0 '"parameters": 307456,' \
  -- $D13 --predict --json $A100 $G13 --layers 6 --pp 4 --first-stage-layers 1 --last-stage-layers 1
check "13 uneven stages that do not split the layers" 0 2 \
  '^error: the stages do not split the 7 layers: pp 4, the first stage 1, the last 1' \
  -- $D13 --predict $A100 $G13 --layers 7 --pp 4 --first-stage-layers 1 --last-stage-layers 1
check "13 virtual stages that do not split the layers" 0 2 '^error: the stages do not split the 8 layers: .* 3 virtual stages' \
  -- $D13 --predict $A100 $G13 --layers 8 --pp 2 --virtual-stages 3
check "13 key-value heads that do not divide the heads" 0 2 '^error: the 3 key-value heads must divide the 4 heads' \
  -- $D13 --predict $A100 $G13 --kv-heads 3
check "13 the GPT block's features asked of a lesson's model" 0 2 "^error: uneven stages, --sequence-parallel" \
  -- $D13 --predict $A100 --sequence-parallel
check "13 the A100 40GB and H200 presets" 0 0 \
  '^machine dgx-a100-40g .* 4e\+10 B of memory at 1.555e\+12 B/s' -- $D13 --predict --model gpt3-xl --tp 8 --dp 2 --precision bf16 --cluster dgx-a100-40g
check "13 the H200 preset" 0 0 '^machine dgx-h200 .* 1.41e\+11 B of memory at 4.8e\+12 B/s' \
  -- $D13 --predict --model gpt3-xl --tp 8 --dp 2 --precision bf16 --cluster dgx-h200

# ---- --verify-published: every published run expressed, >= 80% within 25% -------------
nruns=$(grep -vc '^#' tools/plan/published.tsv)
[ "$nruns" -ge 20 ] && pass "13 published.tsv holds $nruns runs (20 at least)" ||
  fail "13 published.tsv holds $nruns runs (20 at least)" tools/plan/published.tsv
# 41 runs, each a plan --predict of its own (MPI's start-up each time): more than a check's 120 s
# on a busy machine
TEST_TIMEOUT=300 check "13 --verify-published: every run expressed, at least 80% within 25%" 0 0 \
  "^within 25%: [0-9]+ of $nruns \([0-9]+%\), expressed: $nruns of $nruns" \
  '^  megatron-sc21-1t .* (ok|MISS)$' '^  korthikanti-175b-selective .* % MFU .* (ok|MISS)$' \
  '^  llama3.1-405b-h100-2304 .* (ok|MISS)$' \
  '^CHECK PASSED: --verify-published' -- $D13 --verify-published
# a run the planner refuses fails the check (a refused real run is a failing test)
{ grep '^megatron-sc21-1.7b' tools/plan/published.tsv; grep '^megatron-sc21-1.7b' tools/plan/published.tsv |
  sed 's/^megatron-sc21-1.7b/refused/; s/--tp 1 /--tp 1 --kv-heads 5 /'; } >"$T13/pub.tsv"
check "13 --verify-published: a refused run fails it, its reason shown" 0 1 '^  refused .* REFUSED$' \
  'error: the 5 key-value heads must divide the 24 heads' '^CHECK FAILED: --verify-published' \
  -- $D13 --verify-published --published "$T13/pub.tsv"
# a published MFU beside the plan's, by Megatron's model FLOPs: 22B (L 48, h 6144, B 4,
# s 2048, V 51200) on 8 A100s: 100 x 72 B s l h^2 (1 + s/6h + V/12lh) / (step x 8 x 312e12)
grep '^korthikanti-22b-selective' tools/plan/published.tsv >"$T13/pub_mfu.tsv"
k22=$(cut -f5 "$T13/pub_mfu.tsv")
s22=$($D13 --predict --json --cluster dgx-a100-80g --gpus 8 $k22 | grep -o '"step_time_s": [0-9.e+-]*' | cut -d' ' -f2)
m22=$(awk -v t="$s22" 'BEGIN { B = 4; s = 2048; l = 48; h = 6144; V = 51200
  printf "%.4g", 100 * 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / (t * 8 * 312e12) }')
check "13 --verify-published: Megatron's MFU of the plan, 72 B s l h^2 (1 + s/6h + V/12lh) / (step x GPUs x peak) = $m22%" \
  0 0 "^  korthikanti-22b-selective .* 41.5 % MFU +$m22 " -- $D13 --verify-published --published "$T13/pub_mfu.tsv"
# Megatron's TFLOP/s a GPU (Narayanan et al. 2021, eq. 3, the recomputed forward counted):
# 1.7B (L 24, h 2304, B 512) on 32 A100s: 96 B s l h^2 (1 + s/6h + V/16lh) / step / 32
grep '^megatron-sc21-1.7b' tools/plan/published.tsv >"$T13/pub_tf.tsv"
k17=$(cut -f5 "$T13/pub_tf.tsv")
s17=$($D13 --predict --json --cluster dgx-a100-80g --gpus 32 $k17 | grep -o '"step_time_s": [0-9.e+-]*' | cut -d' ' -f2)
t17=$(awk -v t="$s17" 'BEGIN { B = 512; s = 2048; l = 24; h = 2304; V = 51200
  printf "%.4g", 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / t / 32 / 1e12 }')
check "13 --verify-published: Megatron's TFLOP/s of the plan, 96 B s l h^2 (1 + s/6h + V/16lh) / step / GPUs = $t17" \
  0 0 "^  megatron-sc21-1.7b .* 137 TFLOP/s/GPU +$t17 " -- $D13 --verify-published --published "$T13/pub_tf.tsv"
check "13 --verify-published: a file it cannot read" 0 2 '^error: --published .*nowhere.tsv: cannot read it' \
  -- $D13 --verify-published --published "$T13/nowhere.tsv"
printf 'a\tb\n' >"$T13/pub_bad.tsv"
check "13 --verify-published: a line without its 9 fields" 0 2 '^error: --published: a run needs 9 fields' \
  -- $D13 --verify-published --published "$T13/pub_bad.tsv"

# ---- this machine: --measure, the ring's terms, the machine file, --predict --------
for np in 2 3 4; do
  extra=""
  [ $np = 3 ] && extra="--dp 3 --batch 6"
  check "13 np=$np measure: the ring's terms equal its messages and bytes, residuals printed" $np 0 \
    '^CHECK PASSED: the ring all-reduce.s alpha-beta terms' "wrote $T13/m$np.json" \
    '^  alpha [0-9.]+ us \(the 3 smallest sizes\), beta [0-9.]+ ns/B .*; worst residual [0-9.]+%$' \
    '^  +[0-9.]+ +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%$' '^  the library.s all_reduce by 2\(n-1\) alpha \+ 2\(n-1\)/n S beta: alpha ' \
    -- $D13 --measure --machine "$T13/m$np.json" $extra
done
check "13 predict from the machine file: 12's default mesh at 2 ranks (tp 2)" 0 0 \
  '^mesh: dp 1 x pp 1 x cp 1 x tp 2 = 2' '^machine .*\(machine file .*m2.json' '^  step +[0-9.e+-]+ s \|#' \
  '^    tp +all_reduce +16 +524288 ' -- $D13 --predict --tp 2 --machine "$T13/m2.json"
check "13 the default run (the tour's): measure and predict, a verdict" 2 0 '^the step, predicted' \
  '^CHECK PASSED' -- $D13 --machine "$T13/default.json"
check "13 --json has the interface's fields" 0 0 '"parameters": ' '"step_time_s": ' '"compute_s": ' \
  '"comm_s": \{"tp": ' '"bubble_s": ' '"tokens_per_s": ' '"model_flops_per_step": ' \
  '"hardware_flops_per_step": ' '"mfu": ' '"hfu": ' '"tflops_per_gpu": ' \
  '"memory_per_gpu_bytes": \{"params": [0-9]+, "grads": [0-9]+, "optim": [0-9]+, "activ": [0-9]+, .*"total": [0-9]+\}' \
  '"fits": (true|false)\}' -- $D13 --predict --json --model gpt3-xl --dp 4 --tp 2 $A100

# ---- clusters: the presets, a file of one's own --------------------------------
cat >"$T13/a100.txt" <<'EOF'
# the dgx-a100-80g preset, written out (13_plan/README.md gives each source)
name = my-a100s
gpus_per_node = 8
peak_flops = 312e12          # bf16, dense
gemm_fraction = 0.869
hbm_bytes = 80e9
hbm_bandwidth = 2.039e12
nvlink_bandwidth = 240e9     # per GPU and direction, as NCCL counts it
nvlink_latency = 3.4e-6
ib_bandwidth = 25e9
ib_latency = 14e-6
sms = 108
attention_fraction = 0.50
nics_per_node = 8
EOF
$D13 --predict --json --model gpt3-13b --tp 8 --pp 2 --dp 4 --precision bf16 $A100 2>&1 | sed -n '/^{/,$p' |
  sed 's/"machine": "[^"]*"//' >"$T13/preset.json"
$D13 --predict --json --model gpt3-13b --tp 8 --pp 2 --dp 4 --precision bf16 --cluster "$T13/a100.txt" 2>&1 |
  sed -n '/^{/,$p' | sed 's/"machine": "[^"]*"//' >"$T13/file.json"
if [ -s "$T13/preset.json" ] && cmp -s "$T13/preset.json" "$T13/file.json"; then
  pass "13 a cluster file with the preset's numbers predicts what the preset does"
else
  fail "13 a cluster file with the preset's numbers predicts what the preset does" "$T13/file.json"
fi
check "13 a cluster file's name is shown" 0 0 '^machine my-a100s \(cluster file ' \
  -- $D13 --predict --model gpt3-13b --tp 8 --pp 2 --dp 4 --cluster "$T13/a100.txt"
grep -v '^ib_latency' "$T13/a100.txt" >"$T13/missing.txt"
check "13 a cluster file without a key" 0 2 '^error: --cluster .*missing.txt: no `ib_latency = \.\.\.` line' \
  -- $D13 --predict --model gpt3-13b --cluster "$T13/missing.txt"
printf 'nvlink_speed = 3e11\n' >"$T13/unknown.txt"
check "13 a cluster file with an unknown key" 0 2 '^error: --cluster .*unknown.txt line 1: unknown key' \
  -- $D13 --predict --cluster "$T13/unknown.txt"
printf 'peak_flops = fast\n' >"$T13/bad.txt"
check "13 a cluster file with a value that is not a number" 0 2 \
  '^error: --cluster .*bad.txt line 1: the value must be a positive number' -- $D13 --predict --cluster "$T13/bad.txt"
check "13 no such preset nor file" 0 2 '^error: --cluster dgx-b200: not a preset \(dgx-a100-40g, dgx-a100-80g, dgx-h100-80g, dgx-h200\)' \
  -- $D13 --predict --cluster dgx-b200
check "13 the H100 preset" 0 0 '^machine dgx-h100-80g .* 9.89e\+14 FLOP/s peak x 0.803, 8e\+10 B of memory at 3.35e\+12' \
  -- $D13 --predict --model gpt3-xl --tp 8 --dp 2 --precision bf16 --cluster dgx-h100-80g

# ---- --search: ranked, every rejection explained -----------------------------
check "13 search: GPT-3 175B on 1024 A100s, ranked, rejections with a reason and an example" 0 0 \
  '^search: gpt3-175b on 1024 devices of dgx-a100-80g: [0-9]+ shapes fit, ranked by predicted tokens/s' \
  '^    1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9] ' 'tp beyond a node; e.g. .*tp 16 beyond a node of 8' \
  'memory: more than the device holds; the nearest: .* GB > 80.0 GB' \
  'does not divide .*; e.g. ' '^#1 in full:' \
  -- $D13 --search --model gpt3-175b --precision bf16 --gpus 1024 $A100 --top 5
check "13 search --json" 0 0 '^\{"gpus": 64, "fit": [0-9]+, "top": \[\{"dp": ' \
  -- $D13 --search --json --model gpt3-xl --precision bf16 --gpus 64 $A100 --top 3

# ---- bad input: one message, exit 2 -----------------------------------------------
check "13 bad model" 0 2 '^error: --model gpt5: not a model' -- $D13 --predict --model gpt5 $A100
check "13 tp that does not divide the heads" 0 2 '^error: tp 3 does not divide the heads \(4\)' \
  -- $D13 --predict --tp 3 $A100
check "13 a mesh larger than --gpus" 0 2 '^error: the axes given \(16 ranks\) do not divide 8 ranks' \
  -- $D13 --predict --tp 4 --pp 4 --gpus 8 $A100
check "13 the lessons' models are fp32 without recomputation" 0 2 \
  '^error: the lessons are predicted in fp32 .*, without recomputation' -- $D13 --predict --precision bf16 $A100
check "13 no machine file yet" 0 2 '^error: --machine .*nowhere.json: no machine file: measure this machine first' \
  -- $D13 --predict --machine "$T13/nowhere.json"
check "13 --verify under mpirun" 2 2 '^error: --verify starts mpirun itself' -- $D13 --verify
check "13 --verify --shapes with two texts, neither held: named" 0 2 \
  "^error: --shapes 'nope,nor': no shape of --verify holds it; its lessons: " -- $D13 --verify --shapes nope,nor
check "13 --verify --shapes that no shape holds: named, with the lessons it has" 0 2 \
  "^error: --shapes 'nope': no shape of --verify holds it; its lessons: 12_mesh/mesh, 11_cp/cp, 05_dp/dp, 06_fsdp/fsdp, 09_pp/pp, 14_gpt/gpt$" \
  -- $D13 --verify --shapes nope
check "13 --measure with --cluster" 0 2 '^error: --measure measures this machine, --cluster plans for another' \
  -- $D13 --measure --cluster dgx-a100-80g
check "13 --cluster alone predicts for it, measures nothing" 2 0 '^machine dgx-a100-80g \(preset' \
  -- $D13 --cluster dgx-a100-80g
check "13 measuring a model too large for this machine" 2 2 \
  '^error: --measure times each operation of gpt3-175b at its shapes: [0-9.]+ GB a rank, [0-9.]+ GB here' \
  -- $D13 --measure --model gpt3-175b

# ---- 13's list of a step's kernels, as the lessons count theirs (--report-json) ----
# 09 at pp 2 on stage 0: its 2 blocks in each of 8 microbatches (16 calls each
# way), each microbatch copied into its slot (R D = 4 x 64), the gradients zeroed
# and stepped (2 layers x 2DH = 65536); 06 at ZeRO 2: one SGD call a layer's
# shard (4 x 2DH/2), its fresh layers apart, costed, no kernel; 12 at tp 2: each
# of 11's blocks a block and its merge (4 layers x 8 blocks), its data made on the
# host apart; 14 at tp 2 (its test size, R = 256 rows, half of V13 padded a rank):
# the cross-entropy's three pieces and the embedding's backward each one kernel, the
# positions a sequence at a time (8), the gains stepped apart from the decayed (2L + 1)
check "13 --predict --json: 09's kernels a step on stage 0, as 09 calls them" 0 0 \
  '^  \{"kernel": "dt_block_forward", "shape": \[4, 64, 256, 1, 0\], "calls": 16\},$' \
  '^  \{"kernel": "dt_copy", "shape": \[256, 2, 0, 0, 0\], "calls": 8\},$' \
  '^  \{"kernel": "dt_sgd_step", "shape": \[65536, 0, 0, 0, 0\], "calls": 1\}\],$' \
  -- $D13 --predict --json --cluster dgx-h100-80g --model pp09 --pp 2 --opt sgd
check "13 --predict --json: 06's ZeRO 2 steps each layer's shard; its fresh layers costed, not kernels" 0 0 \
  '^  \{"kernel": "dt_sgd_step", "shape": \[16384, 0, 0, 0, 0\], "calls": 4\}\],$' \
  '^ "costed_not_kernels": \[\{"op": "alloc", "shape": \[32768, 0\], "count": 4, "why": "fresh pages' \
  -- $D13 --predict --json --cluster dgx-h100-80g --model fsdp06 --dp 2 --zero 2 --opt sgd
check "13 --predict --json: 12's kernels at tp 2, 11's blocks each merged, its data apart" 0 0 \
  '^  \{"kernel": "dt_attn_merge", "shape": \[32, 16, 2, 0, 0\], "calls": 32\},$' \
  '^  \{"kernel": "dt_attn_start", "shape": \[256, 16, 2, 0, 0\], "calls": 4\},$' \
  '^ "costed_not_kernels": \[\{"op": "data11", .*"why": "11.s chunks made by a host loop' \
  -- $D13 --predict --json --cluster dgx-h100-80g --model mesh12 --tp 2
Vs13=$(((V13 + 1) / 2))
check "13 --predict --json: 14's kernels at tp 2, each as 14 calls it" 0 0 \
  "^  \\{\"kernel\": \"dt_ce_max\", \"shape\": \\[256, $Vs13, 0, 0, 0\\], \"calls\": 1\\},\$" \
  "^  \\{\"kernel\": \"dt_ce_sumexp\", \"shape\": \\[256, $Vs13, 0, 0, 0\\], \"calls\": 1\\},\$" \
  "^  \\{\"kernel\": \"dt_ce_target\", \"shape\": \\[256, $Vs13, 0, 0, 0\\], \"calls\": 1\\},\$" \
  "^  \\{\"kernel\": \"dt_embed_backward\", \"shape\": \\[256, $Vs13, 32, 0, 0\\], \"calls\": 1\\},\$" \
  '^  \{"kernel": "dt_positions_forward", "shape": \[32, 1, 32, 0, 0\], "calls": 8\},$' \
  '^  \{"kernel": "dt_adamw_step", "shape": \[32, 0, 0, 0, 0\], "calls": 5\},$' \
  -- $D13 --predict --json --cluster dgx-h100-80g $G14 --tp 2

# ---- --verify: the lessons here, predicted beside measured --------------------------
# --verify's own verdict is strict: every shape within 20% (five attempts, the
# later ones after the other shapes). This VM has slow spells of tens of
# seconds to minutes (12_mesh at NP 1: 4.2-4.6 ms a step in one, 2.9-3.0
# outside), in which a shape missed on all five attempts while the model was
# right before and after (13_plan/README.md). So here: every figure equal on
# every shape, no shape off by 2x either way (by the ratio that decided), and
# at most 2 shapes past 20% after their five attempts; a wrong model misses on
# many shapes at once.
verify_judged() { # NAME LOG SHAPES-PATTERN...: the verdict above, read from LOG
  local name=$1 log=$2 off bad_ratio; shift 2
  off=$(grep -c 'TIME OFF' "$log")
  # the ratio that decided: a shape's last attempt (a retry's line comes after
  # the first's), against the machine measured again after the run, if any
  bad_ratio=$(awk '$0 ~ /  (ok|time off|TIME OFF)/ { r = -1
    if (match($0, /after the run: [0-9.]+ ms, [0-9.]+[)]/)) { split(substr($0, RSTART, RLENGTH - 1), a, ", "); r = a[2] + 0 }
    else for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+[.][0-9][0-9]$/) r = $i + 0
    shape = $0; sub(/  +[0-9]+  +[0-9]+ of .*/, "", shape); last[shape] = r }
    END { for (s in last) if (last[s] >= 0 && (last[s] < 0.5 || last[s] > 2)) print s }' "$log" | wc -l)
  local p
  for p in "$@"; do grep -Eq -- "$p" "$log" || { fail "$name" "$log" "output lacks /$p/"; return; }; done
  if grep -q '  FAILED' "$log" || ! grep -Eq '^CHECK (PASSED|FAILED): --verify' "$log" ||
     [ "$off" -gt 2 ] || [ "$bad_ratio" -gt 0 ]; then
    fail "$name" "$log" "figures differ, or $off shape(s) past 20% after every attempt (2 allowed), $bad_ratio ratio(s) beyond 0.5-2"
  else
    pass "$name"
  fi
}
# the verdict itself fails where it must: a third shape past 20%, a ratio of 2.5
printf '  a  2  5 of 5  0.5  0.7  0.71  TIME OFF (again)\n  b  2  5 of 5  0.5  0.7  0.71  TIME OFF (again)\nCHECK FAILED: --verify: x\n' >"$T13/v2.log"
sed 's/^  b /  c /' "$T13/v2.log" | head -1 | cat - "$T13/v2.log" >"$T13/v3.log"
printf '  a  2  5 of 5  2.5  1.0  2.50  ok\nCHECK PASSED: --verify: x\n' >"$T13/vx.log"
printf '  a  2  4 of 5  1.0  1.0  1.00  FAILED\nCHECK FAILED: --verify: x\n' >"$T13/vf.log"
# measured again at once: the ratio against that prediction decides, both ways
printf '  a  2  5 of 5  1.0  2.2  0.45  ok (measured again after the run: 2.1 ms, 0.95)\nCHECK PASSED: --verify: x\n' >"$T13/vm.log"
printf '  a  2  5 of 5  1.0  1.0  1.00  ok (measured again after the run: 2.4 ms, 2.40)\nCHECK PASSED: --verify: x\n' >"$T13/vn.log"
# a shape off 12x on its first attempt (a burst of load) and within 20% on its retry: the retry decides
printf '  a  2  5 of 5  1.3  16.2  0.08  time off: measured and run again after the others (measured again after the run: 1.3 ms, 0.08)\n  a  2  5 of 5  1.2  1.3  0.92  ok (again)\nCHECK PASSED: --verify: x\n' >"$T13/vr.log"
(PASSED=0 FAILED=0; for v in v2 v3 vx vf vm vn vr; do verify_judged "$v" "$T13/$v.log" >/dev/null; done
 [ "$PASSED $FAILED" = "3 4" ]) && pass "13 the verify verdict of make test: 2 shapes off pass; 3, a ratio 2.5, a figure differing fail; the ratio measured again decides, and a retry's" ||
  fail "13 the verify verdict of make test: 2 shapes off pass; 3, a ratio 2.5, a figure differing fail; the ratio measured again decides, and a retry's" ""
V13=$(check_log "13 verify: every figure equal; time within 20% (at most 2 shapes miss after 5 attempts, none by 2x)")
with_timeout -k 5 900 $D13 --verify >"$V13" 2>&1 </dev/null
verify_judged "13 verify: every figure equal; time within 20% (at most 2 shapes miss after 5 attempts, none by 2x)" "$V13" \
  '12_mesh/mesh --tp 2 +2 +1[0-9] of 1[0-9] ' '06_fsdp/fsdp --zero 3 +2 +7 of 7 ' \
  '14_gpt/gpt --tp 2 --sequence-parallel +2 +13 of 13 ' '14_gpt/gpt \(defaults\) +1 +11 of 11 ' \
  '09_pp/pp --virtual-stages 2 +2 +6 of 6 ' '09_pp/pp --schedule zb1 +2 +6 of 6 ' \
  '12_mesh/mesh --pp 2 --virtual-stages 2 +2 +1[0-9] of 1[0-9] ' \
  '12_mesh/mesh --pp 2 --schedule zb1 +2 +1[0-9] of 1[0-9] ' \
  '14_gpt/gpt --pp 2 --virtual-stages 2 --layers 4 +2 +1[0-9] of 1[0-9] ' \
  '14_gpt/gpt --pp 2 --schedule zb1 +2 +1[0-9] of 1[0-9] ' \
  '^      kernels a step: 7 of 7 equal the prediction$' '^      kernels a step: 6 of 6 equal the prediction$' \
  '^      kernels a step: 21 of 21 equal the prediction$' \
  '^      kernels a step: 43 of 43 equal the prediction$' '^      kernels a step: 44 of 44 equal the prediction$' \
  '^      kernels a step: 46 of 46 equal the prediction$' '^      kernels a step: 35 of 35 equal the prediction$' \
  '^      kernels a step: 47 of 47 equal the prediction$' '^      kernels a step: 39 of 39 equal the prediction$'
# the same across emulated nodes with a shaped link: each rank a node of its own,
# 1 Gbit/s between them (tools/cluster.sh), where a step is mostly communication.
# 14's shapes are left out here: across that link its sequence parallelism's
# reduce-scatters of 256-512 KiB take 3x the all-gathers' time in this MPI,
# which 13 does not model yet (it comes at 0.51-0.58: 13_plan/README.md)
if tools/cluster.sh check >/dev/null 2>&1; then
  # one shape for each way a step communicates: dp's all-reduce (05), ZeRO 3's
  # all-gathers and reduce-scatters (06), the pipeline's sendrecvs (09's default
  # plan; interleaving's and ZB-H1's plans are judged on one node above), cp's
  # ring (11), tp's all-reduces of activations (12); the other shapes compose
  # these, and are judged on one node
  q='05_dp,06_fsdp/fsdp --zero 3,09_pp/pp $,11_cp,mesh --tp 2$'
  printf 'MPIRUN="mpirun --hostfile $CLUSTER_HOSTFILE" exec %s --verify --quick --shapes "%s"\n' "$D13" "$q" >"$T13/vq.sh"
  V13=$(check_log "13 verify across emulated nodes, a 1 Gbit/s link: figures equal; time within 20% (at most 2 miss, none by 2x)")
  with_timeout -k 5 900 tools/cluster.sh --nodes 2 --slots 1 --rate 1gbit -- sh "$T13/vq.sh" >"$V13" 2>&1 </dev/null
  verify_judged "13 verify across emulated nodes, a 1 Gbit/s link: figures equal; time within 20% (at most 2 miss, none by 2x)" "$V13" \
    '05_dp/dp \(defaults\) +2 +5 of 5 '
else
  echo "SKIP 13 verify across emulated nodes: $(tools/cluster.sh check 2>&1 | tail -n 1)"
fi
