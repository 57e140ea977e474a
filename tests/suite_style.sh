#!/usr/bin/env bash
# Style (sourced by run_tests.sh): no statement is chained with the comma
# operator (`a = 1, b = 2;`) in any lesson or common source
# (tools/comma_statements.py does the looking). The check is also shown to
# fail once, on a statement planted in a copy, so that it cannot pass by
# default, and to leave alone the commas that are not statements.
ST=build/test-style
rm -rf "$ST"; mkdir -p "$ST"
style_sources=([0-9][0-9]_*/*.c common/*/*.c common/*/*.cu)

# passes on exit 0 with nothing printed: a report with exit 0 is a failure too
check "style: no comma-chained statement in the ${#style_sources[@]} lesson and common sources" 0 0 -- \
  bash -c 'out=$(python3 tools/comma_statements.py "$@" 2>&1); rc=$?; printf "%s" "$out"; [ -z "$out" ] || exit 2; exit $rc' \
  style "${style_sources[@]}"

# --- the check fails on a planted chain, and only on it ---
# inside main of a copy of lesson 01: the commas of a declaration, a for
# header, a call's arguments and (void)a, (void)b are no comma operator
# statements; the planted assignment is
cp 01_send_recv/send_recv.c "$ST/send_recv.c"
main_line=$(grep -n '^int main(' "$ST/send_recv.c" | cut -d: -f1)
sed_inplace "${main_line}a\\
  {\\
    int a = 1, b = 2, i, j;\\
    for (i = 0, j = 0; i < a; i++, j++) printf(\"%d %d\\\\n\", i, j);\\
    printf(\"%d, %d\\\\n\", a, b);\\
    (void)a, (void)b;\\
    a = 1, b = 2;\\
  }" "$ST/send_recv.c"
planted=$((main_line + 6))
if [ -n "$main_line" ] && sed -n "${planted}p" "$ST/send_recv.c" | grep -qx '    a = 1, b = 2;'; then
  check "style: a planted 'a = 1, b = 2;' in a copy of 01's main is reported, and nothing else" 0 1 \
    "^$ST/send_recv.c:$planted: a = 1, b = 2\$" '^reports: 1$' -- \
    bash -c 'out=$(python3 tools/comma_statements.py "$1" 2>&1); rc=$?; printf "%s\n" "$out";
      echo "reports: $(printf "%s" "$out" | grep -c .)"; exit $rc' style "$ST/send_recv.c"
else
  fail "style: the planted statement sits at line $planted of $ST/send_recv.c" "" "no 'int main(' in 01_send_recv/send_recv.c, or sed failed"
fi
