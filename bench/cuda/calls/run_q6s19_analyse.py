# q6s19: summaries of ncu's source page (ncu -i X.ncu-rep --page source --csv --print-source sass > src_TAG.csv) of the
# Q6_K stream kernel: stall samples by reason and by instruction class, the top lines, and (--exec) the samples per
# execution count (the SASS lines executed N times: 2112 = once per consumer warp, 12288 = once per stage and consumer
# warp, 6144 = the item bodies of one parity, 345452 = the xfull spin loop). Usage: python3 run_q6s19_analyse.py CSV...
import collections, csv, re, sys

def load(f):
    r = list(csv.reader(open(f)))
    hi = next(i for i, x in enumerate(r) if any('Warp Stall Sampling (All Samples)' in c for c in x))
    h = r[hi]
    rows = [dict(zip(h, x)) for x in r[hi + 1:] if len(x) == len(h)]
    st = [c for c in h if c.startswith('stall_') and 'Not Issued' not in c]
    iv = lambda v: int(float(v or 0))
    return [(i, iv(x['Instructions Executed']), iv(x['Warp Stall Sampling (All Samples)']), x['Source'].strip(),
             {c[6:]: iv(x[c]) for c in st}) for i, x in enumerate(rows)]

def cat(op):
    o = re.sub(r'^@!?U?P\w+\s+', '', op).split()
    base = o[0].split('.')[0] if o else ''
    if base in ('IMMA', 'HMMA'): return 'mma'
    if base == 'SYNCS': return 'mbarrier (SYNCS)'
    if base == 'LDS': return 'LDS'
    if base in ('LOP3', 'SHF', 'PRMT'): return 'LOP3/SHF/PRMT'
    if base in ('IMAD', 'IADD3', 'LEA'): return 'IMAD/IADD3/LEA'
    if base in ('FFMA', 'FMUL', 'FADD', 'I2FP', 'F2I', 'HADD2'): return 'fp32/convert'
    if base in ('BRA', 'BSSY', 'BSYNC', 'ISETP', 'WARPSYNC', 'BAR', 'YIELD', 'EXIT', 'S2R', 'S2UR', 'CS2R'): return 'control/sync'
    if base.startswith('U') or base == 'R2UR': return 'uniform'
    return 'other'

for f in sys.argv[1:]:
    rows = load(f)
    tot = sum(r[2] for r in rows)
    ex = sum(r[1] for r in rows)
    print(f"== {f}: {tot} stall samples, {ex} warp instructions executed, {len(rows)} SASS lines")
    R = collections.Counter()
    for r in rows: R.update(r[4])
    print("  by reason: " + ', '.join(f"{k} {v} ({100 * v / tot:.1f}%)" for k, v in R.most_common(10) if v))
    C = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for i, e, s, op, d in rows:
        k = cat(op); C[k][0] += e; C[k][1] += s; C[k][2].update(d)
    for k, (e, s, d) in sorted(C.items(), key=lambda x: -x[1][1]):
        print(f"  {k:18s} executed {e:8d} ({100 * e / ex:4.1f}%) samples {s:5d} ({100 * s / tot:4.1f}%)  " +
              ', '.join(f'{r} {v}' for r, v in d.most_common(3) if v))
    n = collections.Counter(); S = collections.Counter(); D = collections.defaultdict(collections.Counter)
    ops = collections.defaultdict(collections.Counter)
    for i, e, s, op, d in rows:
        n[e] += 1; S[e] += s; D[e].update(d)
        ops[e][re.sub(r'^@!?U?P\w+\s+', '', op).split()[0].split('.')[0] if op else ''] += 1
    print("  samples by execution count of the line:")
    for e in sorted(n, key=lambda e: -S[e])[:10]:
        print(f"    exec {e:7d}: {n[e]:5d} lines, samples {S[e]:5d} ({100 * S[e] / tot:4.1f}%)  " +
              ', '.join(f'{k} {v}' for k, v in D[e].most_common(5) if v))
    print("  ops of the lines executed 6144 times (the two parities' item bodies): " +
          ', '.join(f'{k} {v}' for k, v in ops[6144].most_common(14)))
    print("  top 25 lines:")
    for i, e, s, op, d in sorted(rows, key=lambda r: -r[2])[:25]:
        print(f"    {i:5d} exec {e:7d} {s:5d} {100 * s / tot:4.1f}%  {op[:58]:58s} " +
              ' '.join(f'{k}:{v}' for k, v in sorted(d.items(), key=lambda x: -x[1])[:3] if v))
