"""report_json.py FILE ASSERTION...: checks a run's --report-json file.

Each assertion is PATH=VALUE: PATH names a value by its keys, "/" between
them ("traffic/dp_cp all_reduce/calls"), "#" for an array's length
("step_ms#"), a kernel of "kernels" by its name and shape
("kernels/dt_block_forward[16,64,256,1,0]/calls"); VALUE is a number (compared as a number) or text. Prints
"report ok: N assertions" and exits 0, or names the first that fails and
exits 1 (a file that is not one JSON object fails too)."""
import json
import sys


def lookup(doc, path):
    count = path.endswith("#")
    node = doc
    for key in (path[:-1] if count else path).split("/"):
        if isinstance(node, list) and "[" in key:  # a kernel: name[shape]
            node = {f"{k['kernel']}[{','.join(map(str, k['shape']))}]": k for k in node}
        if not isinstance(node, dict) or key not in node:
            raise KeyError(f"no {key!r} on the way to {path!r}")
        node = node[key]
    return len(node) if count else node


def same(got, want):
    try:
        return float(got) == float(want)
    except (TypeError, ValueError):
        return str(got) == want


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"report: {sys.argv[1]}: {e}")
        return 1
    if not isinstance(doc, dict):
        print(f"report: {sys.argv[1]} is not one JSON object")
        return 1
    for a in sys.argv[2:]:
        path, _, want = a.partition("=")
        try:
            got = lookup(doc, path)
        except KeyError as e:
            print(f"report: {e}")
            return 1
        if not same(got, want):
            print(f"report: {path} is {got!r}, expected {want}")
            return 1
    print(f"report ok: {len(sys.argv) - 2} assertions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
