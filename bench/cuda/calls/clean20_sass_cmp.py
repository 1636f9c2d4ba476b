# clean20: per-kernel SASS of two binaries (cuobjdump -sass, -res-usage): instruction counts, whether the instruction
# text is identical, and the resource usage, for the kernels whose mangled names contain one of the given words.
import hashlib, re, subprocess, sys
def short(n): return re.sub(r"_GLOBAL__N__[0-9a-f]{8}_(\d+_\w+?)_[0-9a-f]{8}", r"_GLOBAL__N__X_\1_X", n)
co, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
words = sys.argv[4:]
def sass(path):
    out = subprocess.run([co, "-sass", path], capture_output=True, text=True).stdout
    funcs, cur = {}, None
    for l in out.splitlines():
        m = re.match(r"\s*Function : (\S+)", l)
        if m:
            cur = short(m.group(1)); funcs[cur] = []; continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", l)
        if cur and m: funcs[cur].append(m.group(1).strip())
    return funcs
def res(path):
    out = subprocess.run([co, "-res-usage", path], capture_output=True, text=True).stdout
    r, cur = {}, None
    for l in out.splitlines():
        m = re.match(r"\s*Function (\S+):", l)
        if m: cur = short(m.group(1)); continue
        if cur and "REG:" in l: r[cur] = " ".join(w for w in l.split() if w.split(":")[0] in ("REG", "STACK", "SHARED", "LOCAL")); cur = None
    return r
so, sn, ro, rn = sass(old), sass(new), res(old), res(new)
for w in words:
    for n in sorted(set(so) | set(sn)):
        if w not in n: continue
        a, b = so.get(n), sn.get(n)
        ha = hashlib.md5("\n".join(a).encode()).hexdigest()[:8] if a else "-"
        hb = hashlib.md5("\n".join(b).encode()).hexdigest()[:8] if b else "-"
        print(f"{n}: old {len(a) if a else '-'} ({ha}; {ro.get(n, '-')}) new {len(b) if b else '-'} ({hb}; {rn.get(n, '-')})"
              + (" IDENTICAL" if a and b and a == b else ""))
