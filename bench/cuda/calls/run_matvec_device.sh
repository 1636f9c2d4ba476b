#!/bin/bash
# On the GPU machine: run the standalone matvec bench+checker (prebuilt `mvbench`, see
# matvec_bench_standalone.cu for the nvcc line) and print a per-(shape, type) summary:
# old tile kernel vs the current dispatch vs the best direct-kernel launch choice, in % of 4.29 TB/s.
# Usage: run_matvec_device.sh MVBENCH OUT_DIR
set -u
bin=$1; out=$2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null
timeout 220 "$bin" > "$out/mvbench.jsonl" 2> "$out/mvbench.err"; echo "mvbench rc=$?"
grep -v '"ok":true' "$out/mvbench.jsonl" | grep -v '"op":"matvec"' | head -40
python3 - "$out/mvbench.jsonl" <<'PY'
import json, sys
rows = {}
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    if d.get('op') == 'matvec' and 'pct' in d:
        rows.setdefault((d['model'], d['tensor'], d['type']), {})[d['path']] = (d['pct'], d['gb_s'], d['us'])
for k, v in rows.items():
    old, disp = v.get('tile_old'), v.get('dispatch')
    dirs = {p: x for p, x in v.items() if p.startswith('direct')}
    best = max(dirs.items(), key=lambda a: a[1][0]) if dirs else None
    s = ' '.join(k) + '  old %.1f%% (%.0f GB/s)' % (old[0], old[1]) + '  dispatch %.1f%% (%.0f GB/s, %.1f us)' % disp
    if best: s += '  best %s %.1f%%' % (best[0], best[1][0])
    print(s)
PY
tail -3 "$out/mvbench.err"
