#!/usr/bin/env python3
"""Per-kernel PTX opcode counts: checks that a refactor of device code leaves what it compiles to unchanged.

Usage: compile the translation unit to PTX before and after the change with the build's flags (e.g. `nvcc
-arch=compute_90a -ptx -O3 -DNDEBUG -DDS_HAVE_CUDA=1 -DDS_HAVE_SM90A=1 -I src --expt-relaxed-constexpr -std=c++20
src/cuda/matvec.cu -o before.ptx`), then run `tools/ptx_opcodes.py before.ptx after.ptx [--filter SUBSTR]`. It
splits each file per .entry (kernel), counts the instructions per opcode (the first token of an instruction line
with its suffixes, e.g. ld.shared.u32; labels, directives, declarations, braces, comments and predicate guards such
as @%p1 are skipped) and compares the counts per kernel, so register numbers and label names may differ. It also
compares each kernel's static shared memory (its own .shared declarations and the module-scope ones it names, by
name and size). Exits 0 when both files have the same kernels and all match, else 1 after listing the
differences. With one file it prints each kernel's instruction count. Where it holds, a stronger check is that
`nvcc -arch=sm_90a -cubin` (same flags) gives byte-identical cubins before and after (`cmp`).
"""
import argparse
import collections
import re
import sys

ENTRY = re.compile(r"^\.(?:visible\s+|weak\s+)*\.entry\s+([\w$.]+)")
SHARED = re.compile(r"^\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$.]+(?:\[\d*\])?)")
WORD = re.compile(r"[\w$.]+")


def parse(path):
    """{kernel: (Counter of opcodes, sorted shared declarations)} of one PTX file."""
    with open(path) as f:
        lines = [l.split("//", 1)[0].strip() for l in f]
    module_shared = {}  # function-scope __shared__ variables of device functions are module-scope in PTX
    for code in lines:
        m = SHARED.match(code)
        if m:
            module_shared[m.group(1).split("[")[0]] = m.group(1)
    kernels = {}
    name = None
    for code in lines:
        if name is None:
            m = ENTRY.match(code)
            if m:
                name, ops, shared, depth, opened = m.group(1), collections.Counter(), set(), 0, False
            continue
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        m = SHARED.match(code)
        if m:
            shared.add(m.group(1))
        body = code.strip("{} ")
        if body and not body.startswith((".", "$")) and not body.endswith(":") and not body.endswith(")"):
            toks = body.split()
            if toks[0].startswith("@"):
                toks = toks[1:]
            if toks:
                ops[toks[0].rstrip(";")] += 1
        for w in WORD.findall(body):
            if w in module_shared:
                shared.add(module_shared[w])
        if opened and depth <= 0:
            kernels[name] = (ops, sorted(shared))
            name = None
    return kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?")
    ap.add_argument("--filter", default="", help="only the kernels whose mangled name contains this")
    args = ap.parse_args()
    kb = {k: v for k, v in parse(args.before).items() if args.filter in k}
    if not args.after:
        for k, (ops, _) in sorted(kb.items()):
            print(f"{sum(ops.values()):7d}  {k}")
        return 0
    ka = {k: v for k, v in parse(args.after).items() if args.filter in k}
    bad = 0
    for k in sorted(set(kb) | set(ka)):
        if k not in kb or k not in ka:
            print(f"ONLY IN {'before' if k in kb else 'after'}: {k}")
            bad += 1
            continue
        (ob, sb), (oa, sa) = kb[k], ka[k]
        diffs = [(op, ob[op], oa[op]) for op in sorted(set(ob) | set(oa)) if ob[op] != oa[op]]
        if sb != sa:
            diffs.append(("shared", " ".join(sb), " ".join(sa)))
        if diffs:
            bad += 1
            print(f"DIFFERS: {k}")
            for op, b, a in diffs:
                print(f"    {op}: {b} -> {a}")
    print(f"{len(set(kb) & set(ka))} kernels compared, {bad} differ" + (f" (filter {args.filter!r})" if args.filter else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
