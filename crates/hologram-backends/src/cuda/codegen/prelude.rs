//! The CUDA C prelude every generated kernel starts with: storage types, one helper per ISA
//! operation and type, exact f16/bf16 conversions, and the out-of-bounds recorder.
//!
//! It needs no header (NVRTC finds none without the CUDA toolkit): f16 and bf16 live in
//! `unsigned short` and convert in software, bit-exactly as the `half` crate does on the CPU.
//! Float arithmetic uses the `__f*_rn` intrinsics, so no multiply-add is ever contracted.

/// The prelude text.
pub const PRELUDE: &str = r#"// ---- Hologram CUDA prelude ----
typedef signed char hg_i8;
typedef short hg_i16;
typedef int hg_i32;
typedef long long hg_i64;
typedef unsigned char hg_u8;
typedef unsigned short hg_u16;
typedef unsigned int hg_u32;
typedef unsigned long long hg_u64;
typedef unsigned short hg_f16;
typedef unsigned short hg_bf16;
typedef float hg_f32;
typedef double hg_f64;
typedef bool hg_pred;

#define HG_D static __device__ __forceinline__

// Integers wrap: arithmetic runs in the unsigned type W and is truncated back to T.
#define HG_INT_COMMON(S, T, W, UT, BITS) \
HG_D T hg_add_##S(T a, T b) { return (T)((W)a + (W)b); } \
HG_D T hg_sub_##S(T a, T b) { return (T)((W)a - (W)b); } \
HG_D T hg_mul_##S(T a, T b) { return (T)((W)a * (W)b); } \
HG_D T hg_mad_##S(T a, T b, T c) { return (T)((W)a * (W)b + (W)c); } \
HG_D T hg_min_##S(T a, T b) { return a < b ? a : b; } \
HG_D T hg_max_##S(T a, T b) { return a < b ? b : a; } \
HG_D T hg_neg_##S(T a) { return (T)((W)0 - (W)a); } \
HG_D T hg_not_##S(T a) { return (T)~a; } \
HG_D T hg_and_##S(T a, T b) { return (T)(a & b); } \
HG_D T hg_or_##S(T a, T b) { return (T)(a | b); } \
HG_D T hg_xor_##S(T a, T b) { return (T)(a ^ b); } \
HG_D T hg_shl_##S(T a, T b) { return (T)((W)a << ((UT)b & (BITS - 1))); } \
HG_D T hg_shr_##S(T a, T b) { return (T)(a >> ((UT)b & (BITS - 1))); }

// x / 0 == x, MIN / -1 == MIN, x rem 0 == 0, abs(MIN) == MIN.
#define HG_SINT(S, T, W, UT, BITS) \
HG_INT_COMMON(S, T, W, UT, BITS) \
HG_D T hg_div_##S(T a, T b) { return b == 0 ? a : (b == (T)-1 ? hg_neg_##S(a) : (T)(a / b)); } \
HG_D T hg_rem_##S(T a, T b) { return (b == 0 || b == (T)-1) ? (T)0 : (T)(a % b); } \
HG_D T hg_abs_##S(T a) { return a < 0 ? hg_neg_##S(a) : a; }

#define HG_UINT(S, T, W, BITS) \
HG_INT_COMMON(S, T, W, T, BITS) \
HG_D T hg_div_##S(T a, T b) { return b == 0 ? a : (T)(a / b); } \
HG_D T hg_rem_##S(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); } \
HG_D T hg_abs_##S(T a) { return a; }

HG_SINT(i8, hg_i8, hg_u32, hg_u8, 8)
HG_SINT(i16, hg_i16, hg_u32, hg_u16, 16)
HG_SINT(i32, hg_i32, hg_u32, hg_u32, 32)
HG_SINT(i64, hg_i64, hg_u64, hg_u64, 64)
HG_UINT(u8, hg_u8, hg_u32, 8)
HG_UINT(u16, hg_u16, hg_u32, 16)
HG_UINT(u32, hg_u32, hg_u32, 32)
HG_UINT(u64, hg_u64, hg_u64, 64)

// u32 division by a launch-uniform divisor d through the host's multiplier m and shift s (see
// the code generator's `divide`): exact for a < 2^31; m == 0 or a >= 2^31 divide as usual.
HG_D hg_u32 hg_divm_u32(hg_u32 a, hg_u32 d, hg_u32 m, hg_u32 s) {
  return (m != 0u && a < 0x80000000u) ? (__umulhi(a, m) >> s) : hg_div_u32(a, d); }
HG_D hg_u32 hg_remm_u32(hg_u32 a, hg_u32 d, hg_u32 m, hg_u32 s) {
  return (m != 0u && a < 0x80000000u) ? a - (__umulhi(a, m) >> s) * d : hg_rem_u32(a, d); }

// f32 and f64: IEEE, correctly rounded where the ISA says so; neg/abs work on the sign bit;
// min/max return the non-NaN operand and order -0 below +0.
// RCP is the correctly rounded reciprocal: the same result as DIV((T)1, x) without the general
// division's numerator scaling (sigmoid and rsqrt run at bandwidth on large tensors).
#define HG_FLOAT(S, T, U, TOB, FROMB, SIGN, ADD, SUB, MUL, DIV, RCP, FMA, SQRT, TAN, POW, F) \
HG_D T hg_neg_##S(T a) { return FROMB(TOB(a) ^ SIGN); } \
HG_D T hg_abs_##S(T a) { return FROMB(TOB(a) & ~SIGN); } \
HG_D T hg_add_##S(T a, T b) { return ADD(a, b); } \
HG_D T hg_sub_##S(T a, T b) { return SUB(a, b); } \
HG_D T hg_mul_##S(T a, T b) { return MUL(a, b); } \
HG_D T hg_div_##S(T a, T b) { return DIV(a, b); } \
HG_D T hg_rem_##S(T a, T b) { return fmod##F(a, b); } \
HG_D T hg_min_##S(T a, T b) { \
  if (a != a) return b; if (b != b) return a; if (a < b) return a; if (b < a) return b; \
  return FROMB(TOB(a) | TOB(b)); } \
HG_D T hg_max_##S(T a, T b) { \
  if (a != a) return b; if (b != b) return a; if (a > b) return a; if (b > a) return b; \
  return FROMB(TOB(a) & TOB(b)); } \
HG_D T hg_mad_##S(T a, T b, T c) { return ADD(MUL(a, b), c); } \
HG_D T hg_fma_##S(T a, T b, T c) { return FMA(a, b, c); } \
HG_D T hg_exp_##S(T a) { return exp##F(a); } \
HG_D T hg_exp2_##S(T a) { return exp2##F(a); } \
HG_D T hg_log_##S(T a) { return log##F(a); } \
HG_D T hg_log2_##S(T a) { return log2##F(a); } \
HG_D T hg_log10_##S(T a) { return log10##F(a); } \
HG_D T hg_sqrt_##S(T a) { return SQRT(a); } \
HG_D T hg_rsqrt_##S(T a) { return RCP(SQRT(a)); } \
HG_D T hg_sin_##S(T a) { return sin##F(a); } \
HG_D T hg_cos_##S(T a) { return cos##F(a); } \
HG_D T hg_tan_##S(T a) { return TAN(a); } \
HG_D T hg_tanh_##S(T a) { return tanh##F(a); } \
HG_D T hg_sigmoid_##S(T a) { return RCP(ADD((T)1, exp##F(hg_neg_##S(a)))); } \
HG_D T hg_erf_##S(T a) { return erf##F(a); } \
HG_D T hg_pow_##S(T a, T b) { return POW(a, b); } \
HG_D T hg_floor_##S(T a) { return floor##F(a); } \
HG_D T hg_ceil_##S(T a) { return ceil##F(a); } \
HG_D T hg_round_##S(T a) { return rint##F(a); } \
HG_D T hg_trunc_##S(T a) { return trunc##F(a); }

HG_D hg_u64 hg_dbits(double a) { return (hg_u64)__double_as_longlong(a); }
HG_D double hg_dfrom(hg_u64 b) { return __longlong_as_double((long long)b); }
// tanf and powf have 4-ulp bounds in CUDA; through f64 (2 ulp of f64) they round correctly to
// f32 but in the rarest cases.
HG_D float hg_tanf_via_f64(float a) { return __double2float_rn(tan((double)a)); }
HG_D float hg_powf_via_f64(float a, float b) { return __double2float_rn(pow((double)a, (double)b)); }

HG_FLOAT(f32, float, hg_u32, __float_as_uint, __uint_as_float, 0x80000000u, __fadd_rn,
         __fsub_rn, __fmul_rn, __fdiv_rn, __frcp_rn, __fmaf_rn, __fsqrt_rn, hg_tanf_via_f64,
         hg_powf_via_f64, f)
HG_FLOAT(f64, double, hg_u64, hg_dbits, hg_dfrom, 0x8000000000000000ull, __dadd_rn,
         __dsub_rn, __dmul_rn, __ddiv_rn, __drcp_rn, __fma_rn, __dsqrt_rn, tan, pow, )

// f16 <-> f32 and bf16 <-> f32, bit-exact with the `half` crate (NaNs are quieted).
HG_D float hg_h2f(hg_f16 h) {
  hg_u32 s = (hg_u32)(h & 0x8000u) << 16;
  hg_u32 e = ((hg_u32)h >> 10) & 0x1fu;
  hg_u32 m = (hg_u32)h & 0x3ffu;
  if (e == 0x1fu) return __uint_as_float(s | 0x7f800000u | (m != 0u ? (0x400000u | (m << 13)) : 0u));
  if (e == 0u) return __uint_as_float(__float_as_uint((float)m * 5.9604644775390625e-8f) | s);
  return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
}
HG_D hg_f16 hg_f2h(float f) {
  hg_u32 x = __float_as_uint(f);
  hg_u32 sign = x & 0x80000000u, exp = x & 0x7f800000u, man = x & 0x007fffffu;
  if (exp == 0x7f800000u)
    return (hg_f16)((sign >> 16) | 0x7c00u | (man != 0u ? 0x200u : 0u) | (man >> 13));
  hg_u32 hs = sign >> 16;
  int he = (int)(exp >> 23) - 127 + 15;
  if (he >= 0x1f) return (hg_f16)(hs | 0x7c00u);
  if (he <= 0) {
    if (14 - he > 24) return (hg_f16)hs;
    hg_u32 m = man | 0x00800000u;
    hg_u32 hm = m >> (14 - he);
    hg_u32 rb = 1u << (13 - he);
    if ((m & rb) != 0u && (m & (3u * rb - 1u)) != 0u) hm += 1u;
    return (hg_f16)(hs | hm);
  }
  hg_u32 r = hs | ((hg_u32)he << 10) | (man >> 13);
  if ((man & 0x1000u) != 0u && (man & 0x2fffu) != 0u) r += 1u;
  return (hg_f16)r;
}
HG_D float hg_b2f(hg_bf16 b) {
  hg_u32 x = (hg_u32)b;
  if ((x & 0x7fffu) > 0x7f80u) x |= 0x40u;
  return __uint_as_float(x << 16);
}
HG_D hg_bf16 hg_f2b(float f) {
  hg_u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (hg_bf16)((x >> 16) | 0x40u);
  if ((x & 0x8000u) != 0u && (x & 0x17fffu) != 0u) return (hg_bf16)((x >> 16) + 1u);
  return (hg_bf16)(x >> 16);
}

// Rounding to f32 with round-to-odd (truncate, then set the last bit if anything was lost):
// rounding that again to f16/bf16 gives the correctly rounded result of the exact source.
HG_D float hg_odd(float r, bool inexact) { return inexact ? __uint_as_float(__float_as_uint(r) | 1u) : r; }
HG_D float hg_odd_f64(double x) { float r = __double2float_rz(x); return (r == r) ? hg_odd(r, (double)r != x) : r; }
HG_D float hg_odd_i64(hg_i64 v) { float r = __ll2float_rz(v); return hg_odd(r, __float2ll_rz(r) != v); }
HG_D float hg_odd_u64(hg_u64 v) { float r = __ull2float_rz(v); return hg_odd(r, __float2ull_rz(r) != v); }
HG_D float hg_odd_i32(hg_i32 v) { float r = __int2float_rz(v); return hg_odd(r, __float2int_rz(r) != v); }
HG_D float hg_odd_u32(hg_u32 v) { float r = __uint2float_rz(v); return hg_odd(r, __float2uint_rz(r) != v); }

// Float to integer: truncate toward zero, saturate, NaN gives 0.
HG_D hg_i32 hg_f32_i32(float x) { return x != x ? 0 : __float2int_rz(x); }
HG_D hg_u32 hg_f32_u32(float x) { return x != x ? 0u : __float2uint_rz(x); }
HG_D hg_i64 hg_f32_i64(float x) { return x != x ? 0 : __float2ll_rz(x); }
HG_D hg_u64 hg_f32_u64(float x) { return x != x ? 0ull : __float2ull_rz(x); }
HG_D hg_i32 hg_f64_i32(double x) { return x != x ? 0 : __double2int_rz(x); }
HG_D hg_u32 hg_f64_u32(double x) { return x != x ? 0u : __double2uint_rz(x); }
HG_D hg_i64 hg_f64_i64(double x) { return x != x ? 0 : __double2ll_rz(x); }
HG_D hg_u64 hg_f64_u64(double x) { return x != x ? 0ull : __double2ull_rz(x); }
HG_D hg_i32 hg_clamp_i32(hg_i32 v, hg_i32 lo, hg_i32 hi) { return v < lo ? lo : (v > hi ? hi : v); }
HG_D hg_u32 hg_clamp_u32(hg_u32 v, hg_u32 hi) { return v > hi ? hi : v; }

// f16 and bf16: widen to f32, compute once, round once (mad: mul and add each rounded).
#define HG_HALF(S, T, W, N) \
HG_D T hg_neg_##S(T a) { return (T)(a ^ 0x8000u); } \
HG_D T hg_abs_##S(T a) { return N(hg_abs_f32(W(a))); } \
HG_D T hg_add_##S(T a, T b) { return N(hg_add_f32(W(a), W(b))); } \
HG_D T hg_sub_##S(T a, T b) { return N(hg_sub_f32(W(a), W(b))); } \
HG_D T hg_mul_##S(T a, T b) { return N(hg_mul_f32(W(a), W(b))); } \
HG_D T hg_div_##S(T a, T b) { return N(hg_div_f32(W(a), W(b))); } \
HG_D T hg_rem_##S(T a, T b) { return N(hg_rem_f32(W(a), W(b))); } \
HG_D T hg_min_##S(T a, T b) { return N(hg_min_f32(W(a), W(b))); } \
HG_D T hg_max_##S(T a, T b) { return N(hg_max_f32(W(a), W(b))); } \
HG_D T hg_pow_##S(T a, T b) { return N(hg_pow_f32(W(a), W(b))); } \
HG_D T hg_mad_##S(T a, T b, T c) { return N(hg_add_f32(W(hg_mul_##S(a, b)), W(c))); } \
HG_D T hg_fma_##S(T a, T b, T c) { return N(hg_fma_f32(W(a), W(b), W(c))); } \
HG_D T hg_exp_##S(T a) { return N(hg_exp_f32(W(a))); } \
HG_D T hg_exp2_##S(T a) { return N(hg_exp2_f32(W(a))); } \
HG_D T hg_log_##S(T a) { return N(hg_log_f32(W(a))); } \
HG_D T hg_log2_##S(T a) { return N(hg_log2_f32(W(a))); } \
HG_D T hg_log10_##S(T a) { return N(hg_log10_f32(W(a))); } \
HG_D T hg_sqrt_##S(T a) { return N(hg_sqrt_f32(W(a))); } \
HG_D T hg_rsqrt_##S(T a) { return N(hg_rsqrt_f32(W(a))); } \
HG_D T hg_sin_##S(T a) { return N(hg_sin_f32(W(a))); } \
HG_D T hg_cos_##S(T a) { return N(hg_cos_f32(W(a))); } \
HG_D T hg_tan_##S(T a) { return N(hg_tan_f32(W(a))); } \
HG_D T hg_tanh_##S(T a) { return N(hg_tanh_f32(W(a))); } \
HG_D T hg_sigmoid_##S(T a) { return N(hg_sigmoid_f32(W(a))); } \
HG_D T hg_erf_##S(T a) { return N(hg_erf_f32(W(a))); } \
HG_D T hg_floor_##S(T a) { return N(hg_floor_f32(W(a))); } \
HG_D T hg_ceil_##S(T a) { return N(hg_ceil_f32(W(a))); } \
HG_D T hg_round_##S(T a) { return N(hg_round_f32(W(a))); } \
HG_D T hg_trunc_##S(T a) { return N(hg_trunc_f32(W(a))); }

HG_HALF(f16, hg_f16, hg_h2f, hg_f2h)
HG_HALF(bf16, hg_bf16, hg_b2f, hg_f2b)

// Atomics return the old value. f32 add is a compare-and-swap loop because the hardware's
// atom.add.f32 flushes subnormals; f64 add keeps them.
HG_D hg_i32 hg_atom_add_i32(hg_i32* p, hg_i32 v) { return atomicAdd(p, v); }
HG_D hg_u32 hg_atom_add_u32(hg_u32* p, hg_u32 v) { return atomicAdd(p, v); }
HG_D hg_i64 hg_atom_add_i64(hg_i64* p, hg_i64 v) { return (hg_i64)atomicAdd((hg_u64*)p, (hg_u64)v); }
HG_D hg_u64 hg_atom_add_u64(hg_u64* p, hg_u64 v) { return atomicAdd(p, v); }
HG_D float hg_atom_add_f32(float* p, float v) {
  hg_u32* q = (hg_u32*)p;
  hg_u32 old = *(volatile hg_u32*)q, seen;
  do {
    seen = old;
    old = atomicCAS(q, seen, __float_as_uint(hg_add_f32(__uint_as_float(seen), v)));
  } while (old != seen);
  return __uint_as_float(old);
}
HG_D double hg_atom_add_f64(double* p, double v) { return atomicAdd(p, v); }
HG_D hg_i32 hg_atom_min_i32(hg_i32* p, hg_i32 v) { return atomicMin(p, v); }
HG_D hg_u32 hg_atom_min_u32(hg_u32* p, hg_u32 v) { return atomicMin(p, v); }
HG_D hg_i64 hg_atom_min_i64(hg_i64* p, hg_i64 v) { return atomicMin(p, v); }
HG_D hg_u64 hg_atom_min_u64(hg_u64* p, hg_u64 v) { return atomicMin(p, v); }
HG_D hg_i32 hg_atom_max_i32(hg_i32* p, hg_i32 v) { return atomicMax(p, v); }
HG_D hg_u32 hg_atom_max_u32(hg_u32* p, hg_u32 v) { return atomicMax(p, v); }
HG_D hg_i64 hg_atom_max_i64(hg_i64* p, hg_i64 v) { return atomicMax(p, v); }
HG_D hg_u64 hg_atom_max_u64(hg_u64* p, hg_u64 v) { return atomicMax(p, v); }
HG_D hg_i32 hg_atom_exch_i32(hg_i32* p, hg_i32 v) { return atomicExch(p, v); }
HG_D hg_u32 hg_atom_exch_u32(hg_u32* p, hg_u32 v) { return atomicExch(p, v); }
HG_D hg_i64 hg_atom_exch_i64(hg_i64* p, hg_i64 v) { return (hg_i64)atomicExch((hg_u64*)p, (hg_u64)v); }
HG_D hg_u64 hg_atom_exch_u64(hg_u64* p, hg_u64 v) { return atomicExch(p, v); }
HG_D float hg_atom_exch_f32(float* p, float v) {
  return __uint_as_float(atomicExch((hg_u32*)p, __float_as_uint(v)));
}
HG_D double hg_atom_exch_f64(double* p, double v) {
  return hg_dfrom(atomicExch((hg_u64*)p, hg_dbits(v)));
}
HG_D hg_i32 hg_atom_cas_i32(hg_i32* p, hg_i32 c, hg_i32 v) { return atomicCAS(p, c, v); }
HG_D hg_u32 hg_atom_cas_u32(hg_u32* p, hg_u32 c, hg_u32 v) { return atomicCAS(p, c, v); }
HG_D hg_i64 hg_atom_cas_i64(hg_i64* p, hg_i64 c, hg_i64 v) {
  return (hg_i64)atomicCAS((hg_u64*)p, (hg_u64)c, (hg_u64)v);
}
HG_D hg_u64 hg_atom_cas_u64(hg_u64* p, hg_u64 c, hg_u64 v) { return atomicCAS(p, c, v); }

// The first error of a launch records what happened: `flag` (device memory) elects one writer,
// which fills `rec` (host memory mapped into the device) for the host to read after the launch:
// rec = {kind, kernel id, a, b, c}; an out-of-bounds access is {1, kernel id, array, index, length}.
static __device__ __noinline__ void hg_record(hg_u32* flag, hg_u64* rec, hg_u64 kind, hg_u32 kid,
                                              hg_u64 a, hg_u64 b, hg_u64 c) {
  if (atomicCAS(flag, 0u, 1u) == 0u) {
    volatile hg_u64* r = rec;
    r[1] = kid;
    r[2] = a;
    r[3] = b;
    r[4] = c;
    __threadfence_system();
    r[0] = kind;
  }
}
static __device__ __noinline__ void hg_oob(hg_u32* flag, hg_u64* rec, hg_u32 kid, hg_u32 array,
                                           hg_i64 index, hg_u64 len) {
  hg_record(flag, rec, 1ull, kid, array, (hg_u64)index, len);
}
// Lanes of one block met at the barrier rendezvous coming from barriers `a` and `b`.
static __device__ __noinline__ void hg_diverged(hg_u32* flag, hg_u64* rec, hg_u32 kid, hg_u32 a,
                                                hg_u32 b) {
  hg_u64 block = blockIdx.x + (hg_u64)gridDim.x * (blockIdx.y + (hg_u64)gridDim.y * blockIdx.z);
  hg_record(flag, rec, 2ull, kid, block, a, b);
}

// Nanoseconds on the GPU's global timer (the host emulation of tests brings its own clock).
#ifdef HG_EMULATION
#define hg_now() hg_emu_now()
#else
HG_D hg_u64 hg_now() { hg_u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#endif

// Every few backward jumps: true when the lane must end, because another lane ran past the
// launch timeout (the stop word flag[1]) or this one did (then it records the error and raises
// the stop word). `tmo` is the timeout in nanoseconds, 0 for none.
static __device__ __noinline__ bool hg_timed_out(hg_u32* flag, hg_u64* rec, hg_u32 kid, hg_u64 t0,
                                                 hg_u64 tmo) {
  if (((volatile hg_u32*)flag)[1] != 0u) return true;
  if (tmo == 0ull) return false;
  hg_u64 now = hg_now();
  hg_u64 spent = now > t0 ? now - t0 : 0ull;
  if (spent < tmo) return false;
  atomicExch(flag + 1, 1u);
  hg_record(flag, rec, 3ull, kid, spent, tmo, 0ull);
  return true;
}
// ---- end of prelude ----
"#;
