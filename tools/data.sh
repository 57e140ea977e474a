#!/usr/bin/env bash
# `make data`: the tiny Shakespeare text (char-rnn's, as nanoGPT's
# shakespeare_char prepares it) into data/shakespeare.txt, for 14_gpt:
#   mpirun -np 4 ./14_gpt/gpt --text data/shakespeare.txt --sample 300
# Its size and SHA-256 are checked before it takes its name, so a cut or
# changed download never stands in for it. `make test` never needs it (its
# runs train on the repository's own README.md). Offline, it says so and
# how to train on any UTF-8 file with --text instead.
# DATA_URL and DATA_DIR override the source and the folder (the tests use
# them to try the offline and the wrong-file paths).
set -u
url=${DATA_URL:-https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt}
dir=${DATA_DIR:-data}
want_bytes=1115394
want_sha=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
dest=$dir/shakespeare.txt

sha256() { # GNU coreutils, or macOS's shasum
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}
# why FILE: empty when FILE is the text, else what is wrong with it
why() {
  local bytes sha
  bytes=$(($(wc -c <"$1")))
  [ "$bytes" = "$want_bytes" ] || { echo "$bytes bytes, not $want_bytes"; return; }
  sha=$(sha256 "$1")
  [ "$sha" = "$want_sha" ] || echo "SHA-256 $sha, not $want_sha"
}
offline() {
  echo "make data: could not download $url ($1)."
  echo "  Offline? 14_gpt trains on any UTF-8 text: mpirun -np 4 ./14_gpt/gpt --text FILE"
  echo "  (its default, README.md, is in every checkout), or copy the tiny Shakespeare text"
  echo "  ($want_bytes bytes, SHA-256 $want_sha)"
  echo "  to $dest from a machine that has it, and run make data again to check it."
}

mkdir -p "$dir" || exit 2
if [ -f "$dest" ]; then
  bad=$(why "$dest")
  if [ -z "$bad" ]; then
    echo "make data: $dest is here ($want_bytes bytes, SHA-256 checked)"
    exit 0
  fi
  echo "make data: $dest is not the tiny Shakespeare text ($bad): fetching it again"
fi
part=$dest.part
rm -f "$part"
if command -v curl >/dev/null 2>&1; then
  err=$(curl -fsSL --connect-timeout 10 --max-time 120 -o "$part" "$url" 2>&1)
elif command -v wget >/dev/null 2>&1; then
  err=$(wget -q -T 10 -O "$part" "$url" 2>&1)
else
  err="neither curl nor wget is installed"
  false
fi
rc=$?
if [ $rc -ne 0 ] || ! [ -s "$part" ]; then
  rm -f "$part"
  offline "${err:-exit code $rc}"
  exit 2
fi
bad=$(why "$part")
if [ -n "$bad" ]; then
  rm -f "$part"
  echo "make data: $url is not the tiny Shakespeare text: $bad; nothing kept"
  exit 1
fi
mv "$part" "$dest"
echo "make data: $dest ($want_bytes bytes, SHA-256 checked)"
echo "  train on it: mpirun -np 4 ./14_gpt/gpt --text $dest --sample 300"
