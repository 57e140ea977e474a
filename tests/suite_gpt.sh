#!/usr/bin/env bash
# The GPT of common/train (DT_GPT) end to end (sourced by run_tests.sh),
# through tests/gpt_run (the training layer's run in one process, the whole
# model one segment): the check against the yardstick (tiled attention
# against materialised scores) in fp32 with AdamW and SGD and in bf16; the
# vocabulary padded; every bad text refused with one clear line; --save,
# --load (nanoGPT's names, a tied lm_head, another text's vocabulary),
# --dump-data's tokens; a checkpoint resumed bit for bit; evaluation and
# sampling. Its unit tests are tests/test_gpt.c.
GT=build/test-gpt
rm -rf "$GT"; mkdir -p "$GT"
GPT=./tests/gpt_run
small=(--layers 2 --dim 32 --seq 32 --steps 8)

check "gpt: README.md's characters, AdamW, against one process" 1 0 '^model: GPT L=2 D=32' \
  'text README.md: [0-9]+ character tokens' '^CHECK PASSED' -- "$GPT" "${small[@]}"
check "gpt: SGD, against one process" 1 0 'K = max\(B x seq,V,D,H\)' '^CHECK PASSED' -- \
  "$GPT" "${small[@]}" --optimizer sgd --lr 0.3
check "gpt: bf16, against one process" 1 0 '^CHECK PASSED: .* bf16' -- "$GPT" "${small[@]}" --precision bf16
check "gpt: the vocabulary padded to a multiple of 4" 1 0 \
  '^vocabulary: [0-9]+ characters, padded to V = [0-9]+ \(a multiple of 4' '^CHECK PASSED' -- \
  "$GPT" "${small[@]}" --pad 4
check "gpt: bytes as tokens" 1 0 '^model: GPT .* V=256 ' '^text README.md: [0-9]+ byte tokens' '^CHECK PASSED' -- "$GPT" "${small[@]}" --tokens byte
check "gpt: one process only" 2 2 '^error: gpt_run trains in one process' -- "$GPT" "${small[@]}"

# bad texts: one line each, before any step
: >"$GT/empty.txt"
printf 'hello\nwor\377ld\n' >"$GT/latin1.txt"
printf 'abc' >"$GT/short.txt"
{ head -c 4000 README.md; printf '\377\376'; } >"$GT/bytes.txt"
check "gpt: a missing text" 1 2 '^error: --text build/test-gpt/none.txt: No such file' -- \
  "$GPT" "${small[@]}" --text "$GT/none.txt"
check "gpt: an empty text" 1 2 '^error: --text build/test-gpt/empty.txt is empty' -- \
  "$GPT" "${small[@]}" --text "$GT/empty.txt"
check "gpt: a text not UTF-8, and where" 1 2 \
  '^error: --text build/test-gpt/latin1.txt is not UTF-8: byte 9 \(line 2, column 4\) is 0xff.*--tokens byte$' -- \
  "$GPT" "${small[@]}" --text "$GT/latin1.txt"
check "gpt: a text shorter than a window" 1 2 'holds 3 tokens, 2 to train on and 1 to validate: each must hold a window of --seq \+ 1 = 33' -- \
  "$GPT" "${small[@]}" --text "$GT/short.txt"
check "gpt: a directory for a text" 1 2 '^error: --text build/test-gpt: not a regular file' -- \
  "$GPT" "${small[@]}" --text "$GT"
check "gpt: any bytes with --tokens byte" 1 0 '^CHECK PASSED' -- \
  "$GPT" "${small[@]}" --text "$GT/bytes.txt" --tokens byte
check "gpt: a prompt the text cannot spell, before training" 1 2 '^error: --prompt: U\+2211 is not in the vocabulary' -- \
  "$GPT" "${small[@]}" --sample 4 --prompt $'\xe2\x88\x91'
check "gpt: a warm-up past the decay" 1 2 '^error: --warmup 9: the warm-up must end before the decay' -- \
  "$GPT" "${small[@]}" --warmup 9

# files: nanoGPT's names, read back; a tied head; another text's vocabulary
check "gpt: --save and --dump-data" 1 0 "^saved $GT/model.safetensors" -- \
  "$GPT" "${small[@]}" --save "$GT/model.safetensors" --dump-data "$GT/data.safetensors" --no-check
# a safetensors file's header, a line a tensor ("name dtype [shape]") and its metadata's keys
st_header=(python3 -c 'import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); meta = h.pop("__metadata__")
for k, v in h.items(): print(k, v["dtype"], v["shape"])
print("metadata", " ".join(sorted(meta)))')
check "gpt: the file holds nanoGPT's names, layouts and GPTConfig" 0 0 \
  '^transformer.wte.weight F32 \[[0-9]+, 32\]$' '^transformer.wpe.weight F32 \[32, 32\]$' \
  '^transformer.h.1.ln_1.weight F32 \[32\]$' '^transformer.h.1.attn.c_attn.weight F32 \[96, 32\]$' \
  '^transformer.h.1.attn.c_proj.weight F32 \[32, 32\]$' '^transformer.h.1.mlp.c_fc.weight F32 \[128, 32\]$' \
  '^transformer.h.1.mlp.c_proj.weight F32 \[32, 128\]$' '^transformer.ln_f.weight F32 \[32\]$' \
  '^metadata .*block_size .*n_embd n_head n_layer .*vocab vocab_size' -- "${st_header[@]}" "$GT/model.safetensors"
check "gpt: --dump-data holds the tokens [steps, B, S+1]" 0 0 '^tokens I32 \[8, 8, 33\]$' -- \
  "${st_header[@]}" "$GT/data.safetensors"
check "gpt: --load of the saved model" 1 0 '^CHECK PASSED' -- \
  "$GPT" "${small[@]}" --load "$GT/model.safetensors"
check "gpt: --load with another text's vocabulary refused" 1 2 'was trained on another vocabulary \([0-9]+ characters\)' -- \
  "$GPT" "${small[@]}" --load "$GT/model.safetensors" --text CHECKING.md
# nanoGPT's state_dict holds lm_head.weight, the same tensor as wte: accepted
# equal, refused otherwise (gpt_head adds it to a copy)
gpt_head() {
  python3 - "$@" <<'EOF'
import json, struct, sys
src, dst, bump = sys.argv[1], sys.argv[2], float(sys.argv[3])
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
meta = header.pop("__metadata__")
meta.pop("checksum")
wte = header["transformer.wte.weight"]["data_offsets"]
head = bytearray(data[wte[0]:wte[1]])
head[0:4] = struct.pack("<f", struct.unpack("<f", head[0:4])[0] + bump)
header["lm_head.weight"] = dict(header["transformer.wte.weight"], data_offsets=[len(data), len(data) + len(head)])
text = json.dumps(dict(header, __metadata__=meta)).encode()
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data + bytes(head))
EOF
}
if gpt_head "$GT/model.safetensors" "$GT/tied.safetensors" 0 && gpt_head "$GT/model.safetensors" "$GT/untied.safetensors" 1; then
  check "gpt: --load with lm_head.weight equal to wte" 1 0 '^CHECK PASSED' -- \
    "$GPT" "${small[@]}" --load "$GT/tied.safetensors"
  check "gpt: --load with lm_head.weight not wte refused" 1 2 'lm_head.weight is not transformer.wte.weight: this GPT.s head is tied' -- \
    "$GPT" "${small[@]}" --load "$GT/untied.safetensors"
else
  fail "gpt: lm_head.weight added to a copy of the file" "" "python3 failed"
fi

# a checkpoint resumed bit for bit: the schedule's horizon fixed (--lr-decay-steps)
sched=(--layers 2 --dim 32 --seq 32 --warmup 1 --lr-decay-steps 8 --no-check)
check "gpt: 8 steps" 1 0 "saved $GT/full.safetensors" -- "$GPT" "${sched[@]}" --steps 8 --save "$GT/full.safetensors"
check "gpt: 5 steps, checkpointed" 1 0 'checkpoint: step 5 saved' -- \
  "$GPT" "${sched[@]}" --steps 5 --ckpt "$GT/ck" --save-every 5
check "gpt: resumed to 8" 1 0 'resume: step 5' -- \
  "$GPT" "${sched[@]}" --steps 8 --ckpt "$GT/ck" --resume --save "$GT/resumed.safetensors"
if cmp -s "$GT/full.safetensors" "$GT/resumed.safetensors"; then pass "gpt: the resumed run is bit-identical"
else fail "gpt: the resumed run is bit-identical" "" "cmp $GT/full.safetensors $GT/resumed.safetensors differ"; fi
check "gpt: a resume on another schedule refused" 1 2 'trained with --lr-decay-steps 8, this run has --lr-decay-steps 9' -- \
  "$GPT" "${sched[@]}" --lr-decay-steps 9 --steps 8 --ckpt "$GT/ck" --resume

check "gpt: evaluation and a sample" 1 0 '^eval after step 4: train loss [0-9.]+, validation loss [0-9.]+' \
  '^eval after step 8: ' '^sample \(20 tokens, temperature 0.8, top-k 5\):$' '^The ' -- \
  "$GPT" "${small[@]}" --eval-every 4 --eval-batches 2 --sample 20 --prompt 'The ' --temperature 0.8 --top-k 5 --no-check
