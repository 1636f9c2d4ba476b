// Host emulation of matvec_stream_q6.cuh (decode7): the producer's 16-byte aligned row windows in a stage,
// stage_q6 (digits of x, the per-parity element order, the -32 x digit sums of the C operand), item_q6 (the
// lane's 4-byte loads from the stage with an alignment check, the lane-3 PRMT of odd blocks, the A bytes from
// ql / qh, the B masks, the scale-byte PRMT with sign replication), mma m16n8k32 u8 x s8 built from the PTX
// fragment layouts, the IMAD running sums and the epilogue, the warp-to-super-block map and the quad / warp
// reductions, vs a float64 Q6_K dot product. Checks the lane / element mapping without a GPU:
//   g++ -O2 -std=c++17 -o /tmp/emu6 bench/cuda/emu/stream_q6_emu.cpp && /tmp/emu6   (worst error ~1e-8)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

static float h2f(uint16_t h) {
  uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? std::ldexp((float)m, -24) : std::ldexp((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
}
static uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {  // PRMT default mode incl. sign replication
  uint8_t b[8];
  for (int i = 0; i < 4; i++) { b[i] = x >> (8 * i); b[4 + i] = y >> (8 * i); }
  uint32_t r = 0;
  for (int i = 0; i < 4; i++) {
    const uint32_t n = (s >> (4 * i)) & 15;
    uint8_t v = b[n & 7];
    if (n & 8) v = (v & 0x80) ? 0xFF : 0;
    r |= (uint32_t)v << (8 * i);
  }
  return r;
}
static uint32_t funnel_r(uint32_t lo, uint32_t hi, int sh) { return sh ? (uint32_t)((((uint64_t)hi << 32) | lo) >> sh) : lo; }
static int g_bad_align = 0;
static uint32_t lds32(const uint8_t* base, int64_t off) {
  if (off % 4) g_bad_align++;
  uint32_t v;
  memcpy(&v, base + off, 4);
  return v;
}
static uint32_t pack_s8(int a, int b, int c, int d) {
  return (uint32_t)(a & 0xFF) | ((uint32_t)(b & 0xFF) << 8) | ((uint32_t)(c & 0xFF) << 16) | ((uint32_t)d << 24);
}

int run(int rows, int nb, int kc, uint64_t seed, double& worst) {
  const int kBB = 210;
  std::mt19937_64 rng(seed);
  const int64_t rb = (int64_t)nb * kBB;
  std::vector<uint8_t> W(rows * rb + 16);
  for (auto& b : W) b = rng();
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < nb; b++) {
      uint16_t d = 0x2400 | (rng() & 0x3ff);
      if (rng() & 1) d |= 0x8000;
      memcpy(&W[r * rb + b * kBB + 208], &d, 2);
    }
  std::normal_distribution<float> nd;
  std::vector<float> x(nb * 256);
  for (auto& v : x) v = nd(rng) * std::pow(10.f, (float)(rng() % 5) - 2);
  std::vector<double> ref(rows, 0), mag(rows, 0);
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < nb; b++) {
      const uint8_t* p = &W[r * rb + b * kBB];
      uint16_t d16;
      memcpy(&d16, p + 208, 2);
      const double d = h2f(d16);
      for (int e = 0; e < 256; e++) {
        const int n = e / 128, t = (e / 32) % 4, l = e % 32;
        const uint8_t qlb = p[64 * n + 32 * (t % 2) + l];
        const int low = t < 2 ? (qlb & 15) : (qlb >> 4);
        const int high = (p[128 + 32 * n + l] >> (2 * t)) & 3;
        const int q = (low | (high << 4)) - 32;
        const double w = d * (double)(int8_t)p[192 + e / 16] * q;
        ref[r] += w * x[b * 256 + e];
        mag[r] += std::fabs(w * x[b * 256 + e]);
      }
    }
  // stage_q6
  std::vector<uint32_t> B(nb * 8 * 16 * 2);
  std::vector<int32_t> C(nb * 8 * 4 * 2);
  std::vector<float> inv(nb);
  for (int b = 0; b < nb; b++) {
    float mx = 0;
    for (int i = 0; i < 256; i++) mx = std::fmax(mx, std::fabs(x[b * 256 + i]));
    int ex = 0;
    if (mx > 0) { std::frexp(mx, &ex); ex = std::max(ex, -90); }
    const float s = std::ldexp(1.f, 30 - ex);
    inv[b] = std::ldexp(1.f, ex - 30);
    int sums[8][4][2][4] = {};  // [m][t][lh][digit] before the quad reduction
    int dgl[8][4][4][8];
    const int odd = b & 1;
    for (int lane = 0; lane < 32; lane++) {
      const int m = lane >> 2, t = lane & 3, p0 = 4 * t + 2 * odd, p1 = p0 + 16;
      for (int i = 0; i < 8; i++) {
        const int l = ((i < 4 ? p0 : p1) + (i & 3)) & 31;
        const float v = x[b * 256 + 32 * m + l];
        int r = (int)std::nearbyint(v * s);
        for (int k = 3; k > 0; k--) { const int dd = (int)(int8_t)(r & 0xFF); dgl[m][t][k][i] = dd; r = (r - dd) >> 8; }
        dgl[m][t][0][i] = r;
        if (std::abs(r) > 127) std::printf("digit0 overflow\n");
        for (int k = 0; k < 4; k++) sums[m][t][l >> 4][k] += dgl[m][t][k][i];
      }
      for (int k = 0; k < 4; k++) {
        const int idx = (b * 8 + m) * 16 + k * 4 + t;
        B[2 * idx] = pack_s8(dgl[m][t][k][0], dgl[m][t][k][1], dgl[m][t][k][2], dgl[m][t][k][3]);
        B[2 * idx + 1] = pack_s8(dgl[m][t][k][4], dgl[m][t][k][5], dgl[m][t][k][6], dgl[m][t][k][7]);
      }
    }
    for (int m = 0; m < 8; m++)
      for (int t = 0; t < 4; t++) {
        int ps[2][2] = {};  // stage_q6_u's packed pairs (digit 2k low, 2k + 1 high), summed over the quad
        for (int u = 0; u < 4; u++) for (int h = 0; h < 2; h++) for (int k = 0; k < 2; k++) ps[h][k] += sums[m][u][h][2 * k] + sums[m][u][h][2 * k + 1] * 65536;
        const int pk = ps[t >> 1][t & 1];
        const int c0 = (int)(int16_t)(pk & 0xFFFF), c1 = (pk - c0) / 65536;
        C[2 * ((b * 8 + m) * 4 + t)] = -32 * c0;
        C[2 * ((b * 8 + m) * 4 + t) + 1] = -32 * c1;
      }
  }
  // plan: pitch 16 mod 32
  int pitch = (kc * kBB + 14 + 15) / 16 * 16;
  if (pitch % 32 == 0) pitch += 16;
  const int nchunk = (nb + kc - 1) / kc, nrg = (rows + 15) / 16;
  std::vector<double> y(rows, 0);
  for (int rg = 0; rg < nrg; rg++) {
    float yw[8][32][2] = {};  // [warp][lane][k]
    for (int c = 0; c < nchunk; c++) {
      const int kb0 = c * kc, n = std::min(kc, nb - kb0);
      std::vector<uint8_t> st(16 * pitch + 64, 0xCD);
      for (int L = 0; L < 16; L++) {  // producer lanes
        const int row = std::min(rg * 16 + L, rows - 1);
        const int64_t src = (int64_t)row * rb + (int64_t)kb0 * kBB;
        const int o = (int)(src & 15);
        const uint32_t bytes = (uint32_t)((o + n * kBB + 15) & ~15);
        if ((src - o) % 16 || bytes % 16 || bytes > (uint32_t)pitch || (src - o) + bytes > (int64_t)W.size()) {
          std::printf("bad window\n");
          return 1;
        }
        memcpy(&st[L * pitch], &W[src - o], bytes);
      }
      for (int warp = 0; warp < 8; warp++)
        for (int G = kb0 >> 3; G <= (kb0 + n - 1) >> 3; G++) {
          const int kb = 8 * G + (warp ^ (G & 1));
          if (kb < kb0 || kb >= kb0 + n) continue;
          const int q = kb - kb0;
          const bool odd = kb & 1;
          // per lane registers
          uint32_t A[32][8][4], Bf[32][8][2];
          int Cf[32][8][2], scv[32][8][2];
          float dv[32][2];
          for (int lane = 0; lane < 32; lane++) {
            const int g = lane >> 2, t = lane & 3;
            uint32_t Wd[2][4][2], H[2][2][2], sw[2][4];
            const int o = 4 * t + (odd ? 2 : 0);
            const uint32_t sel3 = t == 3 ? 0x7610u : 0x3210u;
            for (int k = 0; k < 2; k++) {
              const int rowk = std::min(rg * 16 + g + 8 * k, rows - 1);
              const int64_t off = (g + 8 * k) * pitch + (int)(((int64_t)rowk * rb + (int64_t)kb0 * kBB) & 15) + q * kBB;
              const uint8_t* base = st.data();
              for (int r = 0; r < 6; r++) {
                const int64_t rbo = off + 32 * r;
                const uint32_t s0 = lds32(base, rbo + o);
                uint32_t s1 = lds32(base, rbo + 16 + o);
                if (odd) s1 = byte_perm(s1, lds32(base, rbo - 2), sel3);
                if (r < 4) { Wd[k][r][0] = s0; Wd[k][r][1] = s1; } else { H[k][r - 4][0] = s0; H[k][r - 4][1] = s1; }
              }
              if (odd) {
                uint32_t s5[5];
                for (int i = 0; i < 5; i++) s5[i] = lds32(base, off + 190 + 4 * i);
                for (int i = 0; i < 4; i++) sw[k][i] = funnel_r(s5[i], s5[i + 1], 16);
                dv[lane][k] = h2f(s5[4] >> 16);
              } else {
                for (int i = 0; i < 4; i++) sw[k][i] = lds32(base, off + 192 + 4 * i);
                if ((off + 208) % 2) g_bad_align++;
                uint16_t dd;
                memcpy(&dd, base + off + 208, 2);
                dv[lane][k] = h2f(dd);
              }
            }
            const bool hi_cols = g >= 4;
            const uint32_t e0 = 0xFFFFFFFFu, e1 = 0u, o0 = t == 3 ? 0x0000FFFFu : 0xFFFFFFFFu, o1 = t == 3 ? 0xFFFF0000u : 0u;
            uint32_t mk0 = odd ? o0 : e0, mk1 = odd ? o1 : e1;
            if (hi_cols) { mk0 = ~mk0; mk1 = ~mk1; }
            const uint32_t lh = t >> 1;
            uint32_t sel[2];
            for (int qo = 0; qo < 2; qo++) { const uint32_t bi = 2u * qo + lh; sel[qo] = bi | ((bi | 8u) * 0x1110u); }
            for (int nn = 0; nn < 2; nn++)
              for (int Q = 0; Q < 4; Q++) {
                const int m = 4 * nn + Q;
                uint32_t a[2][2];
                for (int k = 0; k < 2; k++)
                  for (int j = 0; j < 2; j++) {
                    const uint32_t w = Wd[k][2 * nn + (Q & 1)][j], h = H[k][nn][j];
                    const uint32_t nib = Q < 2 ? (w & 0x0F0F0F0Fu) : ((w >> 4) & 0x0F0F0F0Fu);
                    const uint32_t hb = (Q == 0 ? h << 4 : Q == 1 ? h << 2 : Q == 2 ? h : h >> 2) & 0x30303030u;
                    a[k][j] = nib | hb;
                  }
                A[lane][m][0] = a[0][0]; A[lane][m][1] = a[1][0]; A[lane][m][2] = a[0][1]; A[lane][m][3] = a[1][1];
                const int bidx = kb * 128 + m * 16 + (g & 3) * 4 + t;
                Bf[lane][m][0] = B[2 * bidx] & mk0;
                Bf[lane][m][1] = B[2 * bidx + 1] & mk1;
                const int cidx = kb * 32 + m * 4 + t;
                Cf[lane][m][0] = C[2 * cidx];
                Cf[lane][m][1] = C[2 * cidx + 1];
                scv[lane][m][0] = (int)byte_perm(sw[0][2 * nn + (Q >> 1)], 0, sel[Q & 1]);
                scv[lane][m][1] = (int)byte_perm(sw[1][2 * nn + (Q >> 1)], 0, sel[Q & 1]);
              }
          }
          int R[32][4] = {};
          for (int m = 0; m < 8; m++) {
            int64_t Am[16][32], Bm[32][8], Cm[16][8];
            for (int lane = 0; lane < 32; lane++) {
              const int g = lane >> 2, t = lane & 3;
              for (int ri = 0; ri < 4; ri++)
                for (int e = 0; e < 4; e++) {
                  const int row = (ri & 1) ? g + 8 : g, col = 4 * t + e + (ri >= 2 ? 16 : 0);
                  Am[row][col] = (A[lane][m][ri] >> (8 * e)) & 0xFF;  // u8
                }
              for (int ri = 0; ri < 2; ri++)
                for (int e = 0; e < 4; e++) Bm[4 * t + e + (ri ? 16 : 0)][g] = (int8_t)((Bf[lane][m][ri] >> (8 * e)) & 0xFF);
              Cm[g][2 * t] = Cf[lane][m][0]; Cm[g][2 * t + 1] = Cf[lane][m][1];
              Cm[g + 8][2 * t] = Cf[lane][m][0]; Cm[g + 8][2 * t + 1] = Cf[lane][m][1];
            }
            int64_t D[16][8];
            for (int i = 0; i < 16; i++)
              for (int j = 0; j < 8; j++) {
                D[i][j] = Cm[i][j];
                for (int k = 0; k < 32; k++) D[i][j] += Am[i][k] * Bm[k][j];
              }
            for (int lane = 0; lane < 32; lane++) {
              const int g = lane >> 2, t = lane & 3;
              const int64_t c4[4] = {D[g][2 * t], D[g][2 * t + 1], D[g + 8][2 * t], D[g + 8][2 * t + 1]};
              for (int i = 0; i < 4; i++) {
                const int64_t v = R[lane][i] + (int64_t)scv[lane][m][i >> 1] * c4[i];
                if (v > INT32_MAX || v < INT32_MIN) std::printf("int32 overflow\n");
                R[lane][i] = (int)v;
              }
            }
          }
          for (int lane = 0; lane < 32; lane++) {
            const int t = lane & 3;
            const float wa = (t & 1) ? 256.f : 16777216.f, wb = (t & 1) ? 1.f : 65536.f;
            for (int k = 0; k < 2; k++) {
              const float f = std::fma((float)R[lane][2 * k], wa, (float)R[lane][2 * k + 1] * wb);
              yw[warp][lane][k] = std::fma(dv[lane][k] * inv[kb], f, yw[warp][lane][k]);
            }
          }
        }
    }
    for (int warp = 0; warp < 8; warp++)
      for (int g = 0; g < 8; g++)
        for (int k = 0; k < 2; k++) {
          const int row = rg * 16 + g + 8 * k;
          if (row >= rows) continue;
          float v = 0;
          for (int t = 0; t < 4; t++) v += yw[warp][4 * g + t][k];
          y[row] += v;
        }
  }
  for (int r = 0; r < rows; r++) worst = std::max(worst, std::fabs(y[r] - ref[r]) / mag[r]);
  return 0;
}

int main() {
  struct S { int rows, nb, kc; };
  const S ss[] = {{16, 2, 2}, {19, 4, 2}, {33, 6, 4}, {21, 16, 8}, {17, 20, 8}, {40, 14, 8}, {18, 18, 16}, {16, 34, 6}};
  double all = 0;
  int seed = 1;
  for (const S& s : ss) {
    double w = 0;
    if (run(s.rows, s.nb, s.kc, seed++, w)) return 1;
    std::printf("rows %d nb %d kc %d: worst |y - ref| / sum|w x| = %.3g\n", s.rows, s.nb, s.kc, w);
    all = std::max(all, w);
  }
  std::printf("misaligned 4-byte loads: %d; worst %.3g\n", g_bad_align, all);
  return (g_bad_align || !(all < 1e-6)) ? 1 : 0;
}
