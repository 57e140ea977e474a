#!/usr/bin/env bash
# Writes (sourced by run_tests.sh): --save, --dump-data, --trace and --ckpt.
#   - a bad destination is refused at start-up, before any training step,
#     naming the flag, the path and the reason;
#   - nothing but a regular file is replaced (/dev/null as root would become
#     a regular file if a save renamed its temporary over it);
#   - a full disk is reported, with the previous file kept and no temporary
#     left; temporaries of interrupted saves are removed.
WR=build/test-writes
rm -rf "$WR"; mkdir -p "$WR"
no_step() { # NAME LOG: the refusal came before training
  if [ -f "$2" ] && ! grep -q '^step' "$2"; then pass "$1: before any training step"
  else fail "$1: before any training step" "$2"; fi
}
wlog() { ls "$LOGS/$(echo "$1" | tr -c 'A-Za-z0-9_.=-' '_')"*.log 2>/dev/null | head -1; }

check "writes: --save /dev/null refused" 2 2 \
  '^error: --save /dev/null: is a character device, not a regular file' -- ./05_dp/dp --steps 3 --save /dev/null
no_step "writes: --save /dev/null" "$(wlog "writes: --save /dev/null refused")"
if [ -c /dev/null ]; then pass "writes: /dev/null is still a character device"
else fail "writes: /dev/null is still a character device" "" "$(ls -l /dev/null)"; fi
check "writes: --dump-data /dev/zero refused" 2 2 \
  '^error: --dump-data /dev/zero: is a character device, not a regular file' -- ./05_dp/dp --steps 3 --dump-data /dev/zero
check "writes: --save into a missing folder refused" 2 2 \
  "^error: --save $WR/nowhere/m.safetensors: its folder $WR/nowhere: No such file or directory" \
  -- ./05_dp/dp --steps 3 --save "$WR/nowhere/m.safetensors"
no_step "writes: --save into a missing folder" "$(wlog "writes: --save into a missing folder refused")"
check "writes: --save naming a folder refused" 2 2 "^error: --save $WR: is a folder; name a file in it" \
  -- ./05_dp/dp --steps 3 --save "$WR"
check "writes: --trace into a missing folder refused" 2 2 \
  "^error: --trace $WR/nowhere/t.json: its folder $WR/nowhere: No such file or directory" \
  -- ./06_fsdp/fsdp --steps 3 --trace "$WR/nowhere/t.json"
: >"$WR/plain"
check "writes: --ckpt naming a file refused" 2 2 "^error: --ckpt $WR/plain: is a regular file; --ckpt names a folder" \
  -- ./09_pp/pp --steps 3 --ckpt "$WR/plain" --save-every 1
check "writes: --ckpt under a missing folder refused" 2 2 "^error: --ckpt $WR/a/b: its folder $WR/a: No such file or directory" \
  -- ./08_fsdp_tp/fsdp_tp --steps 3 --ckpt "$WR/a/b" --save-every 1
check "writes: --trace /dev/full reports the failure" 2 nonzero \
  'error: --trace /dev/full: cannot write it: No space left on device' -- ./05_dp/dp --steps 3 --no-check --trace /dev/full

mkdir -p "$WR/fifo-ck" && mkfifo "$WR/fifo-ck/latest"
check "writes: a FIFO as the checkpoint manifest refused at start-up" 2 2 \
  "^error: --ckpt $WR/fifo-ck: its manifest $WR/fifo-ck/latest is a FIFO, not a regular file" \
  -- ./05_dp/dp --steps 3 --ckpt "$WR/fifo-ck" --save-every 1 --timeout 5

check "writes: --save and --ckpt naming one path refused" 2 2 \
  "^error: --save and --ckpt both name $WR/same: give each its own path" \
  -- ./05_dp/dp --steps 3 --save "$WR/same" --ckpt "$WR/same" --save-every 1
# reading: a FIFO or a device in place of a file is refused, never waited on
mkfifo "$WR/fifo-load"
check "reads: --load of a FIFO refused at once" 2 2 "^error: --load $WR/fifo-load: not a regular file" \
  -- ./05_dp/dp --steps 3 --load "$WR/fifo-load" --timeout 5
check "reads: --load /dev/zero refused" 2 2 "^error: --load /dev/zero: not a regular file" -- ./05_dp/dp --steps 3 --load /dev/zero

# through a symlink: the file it names is replaced, the link stays a link
echo old >"$WR/target.safetensors"; ln -sf target.safetensors "$WR/link.safetensors"
check "writes: --save through a symlink" 2 0 "saved $WR/link.safetensors" -- ./05_dp/dp --steps 3 --no-check --save "$WR/link.safetensors"
if [ -L "$WR/link.safetensors" ] && [ "$(file_size "$WR/target.safetensors")" -gt 100000 ]; then
  pass "writes: the symlink still links, its file holds the model"
else fail "writes: the symlink still links, its file holds the model" "" "$(ls -l "$WR")"; fi

# temporaries of interrupted saves (their pid is gone) are removed; a live one is not
dead=999999999 # above any pid_max
: >"$WR/m.safetensors.tmp.$dead"; : >"$WR/m.safetensors.tmp.$$"
mkdir -p "$WR/ck"; : >"$WR/ck/step-00000002.safetensors.tmp.$dead"
check "writes: stale temporaries removed at start-up" 2 0 \
  "removed $WR/m.safetensors.tmp.$dead, left by an interrupted save" \
  "removed $WR/ck/step-00000002.safetensors.tmp.$dead" \
  -- ./05_dp/dp --steps 3 --no-check --save "$WR/m.safetensors" --ckpt "$WR/ck" --save-every 2
if [ ! -e "$WR/m.safetensors.tmp.$dead" ] && [ -e "$WR/m.safetensors.tmp.$$" ] && ! ls "$WR"/ck/*.tmp.* >/dev/null 2>&1; then
  pass "writes: only the dead temporaries are gone"
else fail "writes: only the dead temporaries are gone" "" "$(ls "$WR" "$WR/ck")"; fi

# A full disk: a small tmpfs (root only; elsewhere skipped, /dev/full above
# still covers the write path).
full=$WR/full
mkdir -p "$full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=256k tmpfs "$full" 2>/dev/null; then
  args=(--steps 4 --no-check --layers 1 --dim 32) # a 32 KiB model
  check "writes: checkpoint on a small disk" 2 0 "checkpoint: step 2 saved" -- ./05_dp/dp "${args[@]}" --ckpt "$full/ck" --save-every 2 --steps 2
  cp "$full/ck/step-00000002.safetensors" "$WR/kept.safetensors"
  echo old >"$full/m.safetensors"
  dd if=/dev/zero of="$full/filler" bs=4k 2>/dev/null # fill it up
  check "writes: --save on a full disk fails, naming it" 2 nonzero \
    "error: --save $full/m.safetensors: cannot write it: No space left on device; any previous file is untouched" \
    -- ./05_dp/dp "${args[@]}" --save "$full/m.safetensors"
  check "writes: --ckpt on a full disk fails, naming it" 2 nonzero "error: --ckpt .*: cannot write it: No space left on device" \
    -- ./05_dp/dp "${args[@]}" --ckpt "$full/ck" --resume --save-every 1
  if [ "$(cat "$full/m.safetensors")" = old ] && cmp -s "$full/ck/step-00000002.safetensors" "$WR/kept.safetensors" \
     && grep -qx 'step-00000002.safetensors' "$full/ck/latest" && ! ls "$full"/*.tmp.* "$full"/ck/*.tmp.* >/dev/null 2>&1; then
    pass "writes: after the failures the old file and checkpoint are intact, no temporary left"
  else fail "writes: after the failures the old file and checkpoint are intact, no temporary left" "" "$(ls -la "$full" "$full/ck")"; fi
  mount -o remount,ro "$full"
  check "writes: --save on a read-only file system refused at start-up" 2 2 \
    "^error: --save $full/new.safetensors: cannot create files in $full: Read-only file system" \
    -- ./05_dp/dp "${args[@]}" --save "$full/new.safetensors"
  umount "$full"
else
  echo "SKIP writes on a full tmpfs: needs root and mount"
fi
rm -rf "$WR"
