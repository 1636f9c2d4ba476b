// Host emulation of matvec_stream.cuh's integer form (decode6): stage_i8 digits, item_i8 lane loads, mma m16n8k32
// u8 x s8 built from the PTX fragment layouts, the IMAD scales and the epilogue, vs a float64 Q4_K dot product
// (16 rows, 3 super-blocks). Checks the lane / element mapping without a GPU:
//   g++ -O2 -o /tmp/emu bench/cuda/emu/stream_i8_emu.cpp && /tmp/emu   (prints the worst relative error, ~1e-8)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <random>
#include <vector>
static float h2f(uint16_t h){ // fp16 -> float
  uint32_t s=(h>>15)&1,e=(h>>10)&31,m=h&1023; float v;
  if(e==0) v=std::ldexp((float)m,-24); else v=std::ldexp((float)(m|1024),e-25);
  return s?-v:v;}
static void pair_scales(const uint32_t* h,int c,uint32_t&sc,uint32_t&mn){ // h[0..3] = uint4 x,y,z,w
  int sh=16*(c&1); uint32_t A=h[1]>>sh,B=h[2]>>sh,C=h[3]>>sh;
  if(c<2){sc=A&0x3F3F;mn=B&0x3F3F;} else {sc=(C&0x0F0F)|((A>>2)&0x3030); mn=((C>>4)&0x0F0F)|((B>>2)&0x3030);} }
static void ref_scale(const uint8_t* q,int j,int&d,int&m){ if(j<4){d=q[j]&63;m=q[j+4]&63;} else {d=(q[j+4]&0xF)|((q[j-4]>>6)<<4); m=(q[j+4]>>4)|((q[j]>>6)<<4);} }
int main(){
  std::mt19937 rng(5); const int nb=3, R=16;
  std::vector<uint8_t> W(R*nb*144); for(auto&b:W) b=rng();
  for(int r=0;r<R;r++)for(int b=0;b<nb;b++){uint8_t*p=&W[(r*nb+b)*144]; uint16_t d=0x2400|(rng()&0x3ff), dm=0x2000|(rng()&0x3ff); if(rng()&1)d|=0x8000; memcpy(p,&d,2);memcpy(p+2,&dm,2);}
  std::normal_distribution<float> nd; std::vector<float> x(nb*256); for(auto&v:x) v=nd(rng)*std::pow(10.f,(float)(rng()%5)-2);
  // reference
  double ref[R], mag[R];
  for(int r=0;r<R;r++){ref[r]=0;mag[r]=0; for(int b=0;b<nb;b++){const uint8_t*p=&W[(r*nb+b)*144]; uint16_t d16,m16; memcpy(&d16,p,2);memcpy(&m16,p+2,2); double d=h2f(d16),dm=h2f(m16);
    for(int j=0;j<8;j++){int sc,mn; ref_scale(p+4,j,sc,mn); for(int i=0;i<32;i++){int q=(p[16+32*(j/2)+i]>>(4*(j&1)))&15; double w=d*sc*q-dm*mn; ref[r]+=w*x[b*256+32*j+i]; mag[r]+=std::fabs(w*x[b*256+32*j+i]);}}}}
  // stage_i8
  std::vector<uint32_t> B((nb+1)*8*16*2,0); std::vector<float> sx(nb*8), inv(nb);
  for(int b=0;b<nb;b++){ float m=0; for(int i=0;i<256;i++) m=std::fmax(m,std::fabs(x[b*256+i])); int ex=0; if(m>0){std::frexp(m,&ex); ex=std::max(ex,-90);} float s=std::ldexp(1.f,30-ex); inv[b]=std::ldexp(1.f,ex-34);
    for(int lane=0;lane<32;lane++){ float v[8]; for(int i=0;i<8;i++) v[i]=x[b*256+8*lane+i];
      int dg[4][8]; for(int i=0;i<8;i++){ int r=(int)std::nearbyint(v[i]*s); for(int k=3;k>0;k--){int d=(int)(int8_t)(r&0xFF); dg[k][i]=d; r=(r-d)>>8;} dg[0][i]=r; if(std::abs(r)>127) printf("digit0 overflow\n");}
      for(int k=0;k<4;k++){ uint32_t w0=0,w1=0; for(int i=0;i<4;i++){w0|=(uint32_t)(dg[k][i]&0xFF)<<(8*i); w1|=(uint32_t)(dg[k][4+i]&0xFF)<<(8*i);} int idx=((b*8+lane/4)*16 + k*4 + lane%4); B[2*idx]=w0;B[2*idx+1]=w1; }
    }
    for(int j=0;j<8;j++){float ss=0; for(int i=0;i<32;i++) ss+=x[b*256+32*j+i]; sx[b*8+j]=ss;}
  }
  // item_i8 per lane, with mma emulated from fragments
  double y[R]={0};
  for(int kb=0;kb<nb;kb++){
    // per lane registers
    uint32_t h[32][2][4], w[32][2][4][2];
    for(int lane=0;lane<32;lane++){int g=lane/4,t=lane%4; for(int k=0;k<2;k++){const uint8_t*row=&W[((g+8*k)*nb+kb)*144]; memcpy(h[lane][k],row,16); for(int p=0;p<4;p++) memcpy(w[lane][k][p],row+16+32*p+8*t,8);}}
    int re[32][4]={{0}}, ro[32][4]={{0}};
    for(int p=0;p<4;p++) for(int odd=0;odd<2;odd++){
      // build A[16][32], Bm[32][8] from fragments
      int64_t A[16][32], Bm[32][8];
      uint32_t M = odd?0xF0F0F0F0u:0x0F0F0F0Fu;
      for(int lane=0;lane<32;lane++){int g=lane/4,t=lane%4;
        uint32_t a[4]={w[lane][0][p][0]&M, w[lane][1][p][0]&M, w[lane][0][p][1]&M, w[lane][1][p][1]&M};
        for(int ri=0;ri<4;ri++) for(int e=0;e<4;e++){int row=(ri&1)?g+8:g; int col=4*t+e+((ri>=2)?16:0); A[row][col]=(a[ri]>>(8*e))&0xFF;}
        const uint32_t* bb = g<4 ? &B[2*((kb*8+2*p+odd)*16 + g*4 + t)] : &B[2*((nb*8)*16 + (2*p+odd)*16 + t)];
        for(int ri=0;ri<2;ri++) for(int e=0;e<4;e++){int krow=4*t+e+(ri?16:0); Bm[krow][g]=(int8_t)((bb[ri]>>(8*e))&0xFF);} }
      int64_t C[16][8]; for(int i=0;i<16;i++)for(int n=0;n<8;n++){C[i][n]=0; for(int k=0;k<32;k++) C[i][n]+=A[i][k]*Bm[k][n];}
      for(int lane=0;lane<32;lane++){int g=lane/4,t=lane%4; int c[4]={(int)C[g][2*t],(int)C[g][2*t+1],(int)C[g+8][2*t],(int)C[g+8][2*t+1]};
        uint32_t sc[2],mn; for(int k=0;k<2;k++) pair_scales(h[lane][k],p,sc[k],mn);
        for(int i=0;i<4;i++){uint32_t scp=sc[i>>1]; if(!odd) re[lane][i]+=(int)(scp&0xFF)*c[i]; else ro[lane][i]+=(int)(scp>>8)*c[i];}}
    }
    for(int lane=0;lane<32;lane++){int g=lane/4,t=lane%4; float wa=t==0?16777216.f:t==1?256.f:0.f, wb=t==0?65536.f:t==1?1.f:0.f; float is=inv[kb];
      for(int k=0;k<2;k++){uint32_t sc,mn; pair_scales(h[lane][k],t,sc,mn); float d=h2f(h[lane][k][0]&0xFFFF), dmin=h2f(h[lane][k][0]>>16);
        float f=std::fma((float)(16*re[lane][2*k]+ro[lane][2*k]),wa,(float)(16*re[lane][2*k+1]+ro[lane][2*k+1])*wb);
        float mins=std::fma((float)(mn&0xFF),sx[kb*8+2*t],(float)((mn>>8)&0xFF)*sx[kb*8+2*t+1]);
        y[g+8*k]+=std::fma(d*is,f,-dmin*mins);}}
  }
  double worst=0; for(int r=0;r<R;r++) worst=std::max(worst,std::fabs(y[r]-ref[r])/mag[r]);
  printf("worst rel err %.3g (y0 %.6g ref %.6g)\n",worst,y[0],ref[0]);
}
