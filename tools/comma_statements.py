#!/usr/bin/env python3
"""Statements chained with the comma operator (`a = 1, b = 2;`), which this
project's sources never use: one statement, one line of thought. Prints
FILE:LINE: TEXT for each and exits 1 when there is any.

A rough C reader, enough for this code: comments and strings are blanked,
then each top-level statement of a function body (split at ';' outside
parentheses, brackets and braces) is looked at; a comma at depth 0 in it is
a comma operator unless the statement is a declaration (it starts with a
type) or a for header. Usage: tools/comma_statements.py FILE..."""
import re
import sys

TYPES = re.compile(
    r"^(const |static |unsigned |signed |struct |enum )*"
    r"(void|char|short|int|long|float|double|size_t|u?int(8|16|32|64)_t|dt_[a-z_]+|"
    r"[a-z_]+_t|MPI_[A-Za-z]+|FILE|bucket|buckets|model|fsdp|topk|timeline|stashes|action|"
    r"figures|dt_run|uint16_t)\b[\s*]")


def blank(text):
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + " " * (j - i - 1) + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def statements(code):
    """(offset, text) of each statement inside braces, split at ';'."""
    depth_brace, depth_paren, start = 0, 0, None
    for i, ch in enumerate(code):
        if ch == "{":
            depth_brace += 1
            start = i + 1
        elif ch == "}":
            depth_brace -= 1
            start = i + 1
        elif ch in "([":
            depth_paren += 1
        elif ch in ")]":
            depth_paren -= 1
        elif ch == ";" and depth_paren == 0 and depth_brace > 0 and start is not None:
            yield start, code[start:i]
            start = i + 1
        elif ch == "#" and (i == 0 or code[i - 1] == "\n"):
            start = None  # preprocessor line: skip to the next statement
        elif ch == "\n" and start is None:
            start = i + 1


def strip_heads(s):
    """The statement without its leading if (...)/while (...)/for (...)/else."""
    while True:
        m = re.match(r"(else\s+)?(if|while|for|switch)\s*\(", s) or re.match(r"(else|do)\b\s*", s)
        if not m:
            return s
        if not s[m.end() - 1] == "(":
            s = s[m.end():]
            continue
        depth, i = 0, m.end() - 1
        for i in range(m.end() - 1, len(s)):
            depth += s[i] == "("
            depth -= s[i] == ")"
            if depth == 0:
                break
        s = s[i + 1 :].lstrip()


def top_level_comma(stmt):
    depth = 0
    for ch in stmt:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            return True
    return False


def main(paths):
    found = 0
    for path in paths:
        text = open(path, encoding="utf-8").read()
        code = blank(text)
        for off, stmt in statements(code):
            s = stmt.strip()
            body = strip_heads(s)
            if not body or TYPES.match(body) or body.startswith("return ("):
                continue
            if body.startswith(",") or body.startswith("\\"):
                continue  # a declaration's continuation, a macro's line
            if re.fullmatch(r"\(void\)\s*\w+(\s*,\s*\(void\)\s*\w+)*", body):
                continue  # (void)a, (void)b: unused parameters, one thought
            if top_level_comma(body):
                line = text.count("\n", 0, off + len(stmt) - len(stmt.lstrip())) + 1
                print(f"{path}:{line}: {' '.join(s.split())[:100]}")
                found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
