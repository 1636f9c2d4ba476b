#!/bin/bash
# Session 26: the three short commands run on the warm H100 after go_min.sh (run records; each was one `run` call, in
# devf16 with b.tar.xz unpacked and the 9B synth still in /tmp/dsv). They found that the 9B synth's logits are NaN in
# every row after a 512-token prompt prefilled in the default fast mode (f16 GEMM inputs), finite with --precise and
# after 4-token prompts (the step path), and measured x16's logit error where the logits are finite.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
X=$PWD/gpu-bundle/deltaserve
# 1. go_min.sh's dumps: NaN / inf counts
python3 -c "
import numpy as np
for f in ['/tmp/dsv/l0.bin','/tmp/dsv/l1.bin']:
    a=np.fromfile(f,np.float32); print(f, a.size, 'nan', int(np.isnan(a).sum()), 'inf', int(np.isinf(a).sum()))"
# 2. 4-token and 512-token prompts (fast prefill), default vs x16
for p in 4 512; do
  for e in DS_DEFAULT=1 DS_MVB_X16=1; do
    timeout 30 env $e $X cuda-bench -m /tmp/dsv/m9B.gguf --tg 2 --reps 1 --select 0 --batch 64 --prompt $p \
      --dump-logits /tmp/dsv/s_${p}_$e.bin 2>&1 | grep -E "digest|^decode|rror"
  done
done
# 3. 512-token prompts with the fp32 prefill (--precise), default vs x16, 8 decode steps
for e in DS_DEFAULT=1 DS_MVB_X16=1; do
  timeout 40 env $e $X cuda-bench -m /tmp/dsv/m9B.gguf --tg 8 --reps 1 --select 0 --batch 64 --prompt 512 --ctx 1024 \
    --precise --dump-logits /tmp/dsv/p_$e.bin 2>&1 | grep -E "digest|^decode|^prefill|rror"
done
# (each pair compared with numpy: NaN counts, then max / rms |diff|, logit std, argmax agreement over the finite entries)
