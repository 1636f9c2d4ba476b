# Host emulation of mvd::Q3K / mvd::Q5K (src/cuda/matvec_direct.cuh, kq21), statement by statement (loads with
# their alignment and allocation-end checks, realign8, __byte_perm, the scale bit tricks), against ggml's reference
# dequantization (formats.md §5.7 / §5.9) on rows of 1, 3 and 5 blocks (Q3_K rows at every 8-byte misalignment).
# Written because this machine has no GPU: run with python3; prints the worst |err| / sum|w x| per type (float64
# sums: ~1e-16 when the decode is right; a wrong bit gives ~1e-1). Keep it in step with the CUDA code.
import random, struct
M=0xffffffff
def u32(buf,a): return struct.unpack_from('<I',buf,a)[0]
def ldg64(buf,a,end):
    assert a%8==0 and a+8<=end, (a,end); return (u32(buf,a),u32(buf,a+4))
def ldg128(buf,a,end):
    assert a%16==0 and a+16<=end; return tuple(u32(buf,a+4*i) for i in range(4))
def fsr(lo,hi,sh): return (((hi<<32)|lo)>>(sh&31))&M
def realign8(a,b,mis):
    hi=mis&4
    w0=a[1] if hi else a[0]; w1=b[0] if hi else a[1]; w2=b[1] if hi else b[0]
    sh=(mis&3)*8
    return (fsr(w0,w1,sh),fsr(w1,w2,sh))
def bperm(x,y,s):
    by=[(x>>(8*i))&255 for i in range(4)]+[(y>>(8*i))&255 for i in range(4)]
    return sum(by[(s>>(4*i))&7]<<(8*i) for i in range(4))
def bf(w,I,off): return float(((w>>(8*I))&255))-off
def h2f(h): return struct.unpack('<e',struct.pack('<H',h&0xffff))[0]
def q4k_finish(h,c,lo,hi,xlo,xhi):
    sh=16*(c&1); A=(h[1]>>sh)&M; B=(h[2]>>sh)&M; C=(h[3]>>sh)&M
    if c<2: sc=A&0x3F3F; mn=B&0x3F3F
    else:
        sc=(C&0x0F0F)|((A>>2)&0x3030); mn=((C>>4)&0x0F0F)|((B>>2)&0x3030)
    d=h2f(h[0]&0xffff); dmin=h2f(h[0]>>16)
    s=bf(sc,0,0)*lo+bf(sc,1,0)*hi; m=bf(mn,0,0)*xlo+bf(mn,1,0)*xhi
    return d*s-dmin*m
def q5k_task(buf,rowa,t,x,end):
    b=rowa+(t>>2)*176; c=t&3
    h=ldg128(buf,b,end); qh0=ldg128(buf,b+16,end); qh1=ldg128(buf,b+32,end)
    q0=ldg128(buf,b+48+32*c,end); q1=ldg128(buf,b+64+32*c,end)
    q=list(q0)+list(q1); qh=list(qh0)+list(qh1)
    e0=t*64; v=x[e0:e0+64]; s0=sum(v[:32]); s1=sum(v[32:])
    a0=a1=0.0
    for j in range(8):
        hh=qh[j]>>(2*c)
        lo=(q[j]&0x0F0F0F0F)|((hh&0x01010101)<<4)
        hi=((q[j]>>4)&0x0F0F0F0F)|((hh&0x02020202)<<3)
        for i in range(4):
            a0+=bf(lo,i,0)*v[4*j+i]; a1+=bf(hi,i,0)*v[32+4*j+i]
    return q4k_finish(h,c,a0,a1,s0,s1)
def q3k_task(buf,rowa,t,x,end):
    b=rowa+(t>>3)*110; n=(t>>2)&1; c=t&3
    mis=b&7; base=b-mis
    p=[]
    for off in (8*c,32+32*n+8*c,96):
        p.append((ldg64(buf,base+off,end), ldg64(buf,base+off+8,end) if mis else (0,0)))
    p.append((ldg64(buf,base+104,end), ldg64(buf,base+112,end) if mis>=4 else (0,0)))
    hm=realign8(*p[0],mis); qs=realign8(*p[1],mis); sc=realign8(*p[2],mis); hd=realign8(*p[3],mis)
    e0=(t>>3)*256+128*n+8*c
    xv=[x[e0+32*r+i] for r in range(4) for i in range(8)]
    acc=[0.0]*4
    for h in range(2):
        w=qs[1] if h else qs[0]; wh=(hm[1] if h else hm[0])>>(4*n)
        for j in range(4):
            q=((w>>(2*j))&0x03030303)|(((wh>>j)&0x01010101)<<2)
            for i in range(4): acc[j]+=bf(q,i,4.0)*xv[8*j+4*h+i]
    lo4=(bperm(sc[0],sc[1],0x7531 if c&2 else 0x6420)>>(4*n))&0x0F0F0F0F
    hb=bperm(hd[0],0,0x3131 if c&2 else 0x2020)>>(4*n)
    hi2=(hb&0x00000303)|((hb>>2)&0x03030000)
    s4=lo4|(hi2<<4)
    return h2f(hd[1]&0xffff)*sum(bf(s4,j,32.0)*acc[j] for j in range(4))
def ref_q3k(blk):
    hm=blk[0:32]; qs=blk[32:96]; sc=blk[96:108]; d=h2f(struct.unpack_from('<H',blk,108)[0])
    aux=list(struct.unpack_from('<3I',sc)); tmp=aux[2]; k1=0x03030303; k2=0x0f0f0f0f
    a2=((aux[0]>>4)&k2)|(((tmp>>4)&k1)<<4); a3=((aux[1]>>4)&k2)|(((tmp>>6)&k1)<<4)
    a0=(aux[0]&k2)|(((tmp>>0)&k1)<<4); a1=(aux[1]&k2)|(((tmp>>2)&k1)<<4)
    scales=list(struct.pack('<4I',a0,a1,a2,a3)); scales=[s if s<128 else s-256 for s in scales]
    y=[]; isx=0; m=1
    for nq in (0,32):
        shift=0
        for j in range(4):
            dl=d*(scales[isx]-32); isx+=1
            y+=[dl*(((qs[nq+l]>>shift)&3)-(0 if hm[l]&m else 4)) for l in range(16)]
            dl=d*(scales[isx]-32); isx+=1
            y+=[dl*(((qs[nq+l+16]>>shift)&3)-(0 if hm[l+16]&m else 4)) for l in range(16)]
            shift+=2; m<<=1
    return y
def gsm(j,q):
    if j<4: return q[j]&63, q[j+4]&63
    return (q[j+4]&0xF)|((q[j-4]>>6)<<4), (q[j+4]>>4)|((q[j]>>6)<<4)
def ref_q5k(blk):
    d=h2f(struct.unpack_from('<H',blk,0)[0]); dm=h2f(struct.unpack_from('<H',blk,2)[0])
    sc=blk[4:16]; qh=blk[16:48]; ql=blk[48:176]; y=[]; u1,u2=1,2; isx=0
    for jj in range(4):
        s,m=gsm(isx,sc); d1=d*s; m1=dm*m; s,m=gsm(isx+1,sc); d2=d*s; m2=dm*m
        q=ql[32*jj:32*jj+32]
        y+=[d1*((q[l]&0xF)+(16 if qh[l]&u1 else 0))-m1 for l in range(32)]
        y+=[d2*((q[l]>>4)+(16 if qh[l]&u2 else 0))-m2 for l in range(32)]
        isx+=2; u1<<=2; u2<<=2
    return y
def rblk(nb,dpos):
    b=bytearray(random.getrandbits(8) for _ in range(nb))
    for p in dpos: struct.pack_into('<H',b,p,struct.unpack('<H',struct.pack('<e',random.uniform(0.001,0.01)))[0])
    return b
random.seed(1)
for typ,bb,dpos,task,ref,tpb in (('Q3_K',110,[108],q3k_task,ref_q3k,8),('Q5_K',176,[0,2],q5k_task,ref_q5k,4)):
    worst=0
    for rows,nb in ((7,1),(4,3),(3,5)):
        rb=bb*nb; size=rows*rb; end=(size+15)//16*16
        buf=bytearray(end)
        for r in range(rows):
            for k in range(nb): buf[r*rb+k*bb:r*rb+(k+1)*bb]=rblk(bb,dpos)
        x=[random.gauss(0,1) for _ in range(256*nb)]
        for r in range(rows):
            got=sum(task(buf,r*rb,t,x,end) for t in range(nb*tpb))
            w=[]; [w.extend(ref(bytes(buf[r*rb+k*bb:r*rb+(k+1)*bb]))) for k in range(nb)]
            want=sum(a*b for a,b in zip(w,x)); mag=sum(abs(a*b) for a,b in zip(w,x))
            worst=max(worst,abs(got-want)/mag)
    print(typ,'worst rel err',worst)
