#!/bin/bash
# ncu17: turn the source-page CSVs of call 1 (ncu -i X.ncu-rep --page source --csv --print-source sass > src_TAG.csv)
# into docs/measurements/2026-12-04-h200-ncu17-call1-sass.txt: per-kernel samples by instruction class, by loop region
# (split at the wgmma groups), the top 60 SASS lines, and ffn_down's loop body. Usage: run_ncu17_analyse.sh DIR (holding
# src_fd.csv src_gu.csv src_qkv.csv src_ssm.csv); prints to stdout. Runs here (python3 only).
set -eu
cd "$1"
P=$(mktemp -d)
cat > $P/an2.py <<'PY'
import csv,sys
def load(f):
    r=list(csv.reader(open(f))); h=r[1]
    rows=[dict(zip(h,x)) for x in r[2:] if len(x)==len(h)]
    st=[c for c in h if c.startswith('stall_') and 'Not Issued' not in c]
    out=[]
    for i,x in enumerate(rows):
        s=int(x['Warp Stall Sampling (All Samples)'] or 0); e=int(x['Instructions Executed'] or 0)
        d={c[6:]:int(x[c] or 0) for c in st}
        d['gmma_arrive']=s-sum(d.values())
        out.append((i,e,s,x['Source'].strip(),d))
    return out
if __name__=='__main__':
    rows=load(sys.argv[1]); pat=sys.argv[2].split(',')
    for i,e,s,op,d in rows:
        if e and any(p in op for p in pat):
            top=sorted(((v,k) for k,v in d.items() if v),reverse=True)[:3]
            print(f"{i:5d} {e:8d} {s:5d} {op[:60]:60s} {' '.join(f'{k}:{v}' for v,k in top)}")
PY
cat > $P/an3.py <<'PY'
import sys,collections,re
from an2 import load
def cat(op):
    o=re.sub(r'^@!?U?P\w+\s+','',op).split()[0]
    base=o.split('.')[0]
    if base in('HGMMA',) or o.startswith('WARPGROUP.ARRIVE'): return 'wgmma issue (HGMMA, arrive)'
    if o.startswith('WARPGROUP.DEPBAR'): return 'wgmma wait (DEPBAR)'
    if base=='HMMA': return 'mins mma.sync (HMMA)'
    if base in('SYNCS',) or base=='BRA' or base=='BSSY' or base=='ISETP' or base=='S2R' or base=='WARPSYNC': return 'mbarrier wait / loop control'
    if base.startswith('U') or base=='R2UR': return 'uniform (descriptors, slot addr)'
    if base in('LOP3','SHF','PRMT','HFMA2','HMUL2','HADD2'): return 'dequant + scales (LOP3/SHF/PRMT/H*2)'
    if base=='LDS': return 'LDS (codes, header, block sums)'
    if base in('FFMA','FMUL'): return 'fp32 epilogue (FFMA)'
    return 'other int (IMAD/LEA/MOV...)'
for f in sys.argv[1:]:
    rows=load(f)
    tot=sum(r[2] for r in rows); cnt=collections.Counter(r[1] for r in rows if r[1])
    loopn=max((n for n in cnt if cnt[n]>100),key=lambda n:cnt[n])
    print(f"== {f}: samples {tot}, instructions executed {sum(r[1] for r in rows)}, loop body = lines executed {loopn} times: {cnt[loopn]} instructions per warp per block")
    C=collections.defaultdict(lambda:[0,0,collections.Counter()])
    lo=min(r[0] for r in rows if r[1]==loopn); hi=max(r[0] for r in rows if r[1]==loopn)
    for i,e,s,op,d in rows:
        if e==loopn: k=cat(op); C[k][0]+=1
        elif i<lo: k='(before the loop)'
        elif i>hi and i<6500: k='(after the loop: store_acc, split reduction)'
        else: k='(other: retry loops, rare paths)'
        C[k][1]+=s; C[k][2].update(d)
    for k,(n,s,d) in sorted(C.items(),key=lambda x:-x[1][1]):
        top=', '.join(f'{r} {v}' for r,v in d.most_common(4) if v)
        print(f"  {k:48s} instr/iter {n:4d}  samples {s:5d} ({100*s/tot:4.1f}%)  {top}")
PY
cat > $P/reg.py <<'PY'
import sys,collections
from an2 import load
def regions(f):
    rows=load(f); tot=sum(r[2] for r in rows)
    cnt=collections.Counter(r[1] for r in rows if r[1]); loopn=max((n for n in cnt if cnt[n]>100),key=lambda n:cnt[n])
    L=[r for r in rows if r[1]==loopn]
    # boundaries: first HGMMA after each WARPGROUP.ARRIVE
    arr=[r[0] for r in L if r[3].startswith('WARPGROUP.ARRIVE')]
    dep0=[r[0] for r in L if 'DEPBAR.LE gsb0, 0x0' in r[3]][0]
    hm=[r[0] for r in L if r[3].startswith('HMMA')][0]
    wait=[r[0] for r in L if 'SYNCS.PHASECHK' in r[3]][0]
    b=[L[0][0],wait+2]+arr+[hm,dep0,dep0+1,L[-1][0]+1]
    names=['loop head + full-barrier wait','header LDS + scales + build q0 (tensor idle)','q0 wgmmas issued; build q1','q1 issued; wait1; build q2','q2 issued; wait1; build q3','q3 issued (+descs); up to the mins','mins HMMA + their FFMA + last HGMMAs','wait_group 0','epilogue FFMA, empty arrive, loop branch']
    print(f"== {f}: {tot} samples; loop {sum(r[2] for r in L)}")
    for k in range(len(b)-1):
        seg=[r for r in L if b[k]<=r[0]<b[k+1]]
        s=sum(r[2] for r in seg); d=collections.Counter()
        for r in seg: d.update(r[4])
        print(f"  {names[k]:50s} lines {b[k]}-{b[k+1]-1} instr {len(seg):4d} samples {s:5d} ({100*s/tot:4.1f}%)  "+', '.join(f'{x} {v}' for x,v in d.most_common(4) if v))
for f in sys.argv[1:]: regions(f)
PY
cat > $P/top.py <<'PY'
import sys
from an2 import load
names={'fd':'block_kernel<2,false,true> ffn_down 4096x12288 B=64 (launch 37 of the <2> kernel)','gu':'block_kernel<3,false,true> ffn_gate_up 24576x4096 B=64 (launch 37 of the <3> kernel)','qkv':'block_kernel<2,false,true> attn_qkv 8192x4096 B=64 (launch 99)','ssm':'block_kernel<2,false,true> ssm_out 4096x4096 B=64 (launch 161)'}
for k in ['fd','gu','qkv','ssm']:
    rows=load(f'src_{k}.csv'); tot=sum(r[2] for r in rows)
    print(f"\n==== {names[k]}: {tot} warp-state samples (All Samples), top 60 SASS lines by samples")
    print("  line = SASS index in the function; exec = warp-level instructions executed; gmma_arrive = samples minus the CSV's stall columns (ncu's 'warpgroup_arrive', absent from the source page CSV)")
    for i,e,s,op,d in sorted(rows,key=lambda r:-r[2])[:60]:
        top=' '.join(f'{r}:{v}' for r,v in sorted(d.items(),key=lambda x:-x[1]) if v)
        print(f"{i:5d} exec {e:6d} {s:4d} {100*s/tot:4.1f}%  {op[:64]:64s} {top}")
print("\n==== ffn_down (fd): the whole loop body (lines executed 12288 = 1024 warps x 12 blocks), in SASS order")
rows=load('src_fd.csv')
for i,e,s,op,d in rows:
    if e==12288:
        top=' '.join(f'{r}:{v}' for r,v in sorted(d.items(),key=lambda x:-x[1]) if v)
        print(f"{i:5d} {s:4d}  {op[:70]:70s} {top}")
PY
echo "# ncu17 call 1: per-SASS-line warp stall samples (ncu 2025.3.1 --section SourceCounters, --page source --csv --print-source sass), H200, main a8ee74e"
echo "# per-kernel summary by instruction class (bench/cuda/NOTES.md # ncu17 says how the classes are made):"
PYTHONPATH=$P python3 $P/an3.py src_fd.csv src_gu.csv src_qkv.csv src_ssm.csv
echo "# per loop region (SASS index ranges split at WARPGROUP.ARRIVE / the first HMMA / wait_group 0):"
PYTHONPATH=$P python3 $P/reg.py src_fd.csv src_gu.csv src_qkv.csv src_ssm.csv
PYTHONPATH=$P python3 $P/top.py
rm -rf "$P"
