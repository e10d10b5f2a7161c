// Host stand-ins for the CUDA built-ins that generated kernels use, so the generated CUDA C can
// be compiled with a host C++ compiler and run, one std::thread per lane, in tests on machines
// without a GPU. Each intrinsic follows its documented CUDA semantics (round-to-nearest `_rn`,
// round-toward-zero `_rz`, saturating float-to-integer conversions).
#pragma once
#include <atomic>
#include <barrier>
#include <chrono>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
#define __launch_bounds__(n)

struct hg_dim3 { unsigned int x, y, z; };
static thread_local hg_dim3 threadIdx, blockIdx;
static hg_dim3 blockDim, gridDim;
static thread_local std::barrier<>* hg_emu_barrier = nullptr;
static inline void __syncthreads() { if (hg_emu_barrier) hg_emu_barrier->arrive_and_wait(); }
// __syncthreads_or: a barrier that also ORs one predicate over the block's lanes. Votes rotate
// over three slots: a slot is cleared one vote after it was read (every lane has read it by
// then) and written again one vote later (every lane has seen the clear by then). The host
// clears all three before each block.
static std::atomic<int> hg_emu_votes[3];
static thread_local unsigned int hg_emu_vote = 0;
static inline void hg_emu_new_block() { for (auto& v : hg_emu_votes) v.store(0); }
static inline int __syncthreads_or(int p) {
  if (!hg_emu_barrier) return p;
  unsigned int s = hg_emu_vote % 3; hg_emu_vote++;
  if (p) hg_emu_votes[s].store(1);
  hg_emu_barrier->arrive_and_wait();
  int r = hg_emu_votes[s].load();
  hg_emu_votes[(s + 2) % 3].store(0);
  return r;
}
// The GPU's %globaltimer (nanoseconds), for the launch timeout.
#define HG_EMULATION 1
static inline unsigned long long hg_emu_now() {
  return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}
static inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class To, class From> static inline To hg_pun(From f) { To t; std::memcpy(&t, &f, sizeof t); return t; }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }
static inline unsigned int __float_as_uint(float f) { return hg_pun<unsigned int>(f); }
static inline float __uint_as_float(unsigned int u) { return hg_pun<float>(u); }
static inline long long __double_as_longlong(double d) { return hg_pun<long long>(d); }
static inline double __longlong_as_double(long long v) { return hg_pun<double>(v); }

// The host uses SSE arithmetic: IEEE, round to nearest even, subnormals kept.
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
static inline float __frcp_rn(float a) { volatile float r = 1.0f / a; return r; }
static inline double __drcp_rn(double a) { volatile double r = 1.0 / a; return r; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
static inline double __dsub_rn(double a, double b) { volatile double r = a - b; return r; }
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
static inline double __ddiv_rn(double a, double b) { volatile double r = a / b; return r; }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }

// Round toward zero: round to nearest, then step toward zero if that went past the exact value.
static inline float hg_emu_toward_zero_i(float r, __int128 v) {
  __int128 rv = (__int128)r;
  __int128 av = v < 0 ? -v : v, ar = rv < 0 ? -rv : rv;
  return ar > av ? std::nextafterf(r, 0.0f) : r;
}
static inline float __ll2float_rz(long long v) { return hg_emu_toward_zero_i((float)v, v); }
static inline float __ull2float_rz(unsigned long long v) { return hg_emu_toward_zero_i((float)v, (__int128)v); }
static inline float __int2float_rz(int v) { return hg_emu_toward_zero_i((float)v, v); }
static inline float __uint2float_rz(unsigned int v) { return hg_emu_toward_zero_i((float)v, v); }
static inline float __double2float_rz(double x) {
  float r = (float)x;
  if (r != r) return r;
  return std::fabs((double)r) > std::fabs(x) ? std::nextafterf(r, 0.0f) : r;
}
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int v) { return (float)v; }
static inline float __uint2float_rn(unsigned int v) { return (float)v; }
static inline float __ll2float_rn(long long v) { return (float)v; }
static inline float __ull2float_rn(unsigned long long v) { return (float)v; }
static inline double __ll2double_rn(long long v) { return (double)v; }
static inline double __ull2double_rn(unsigned long long v) { return (double)v; }

// Float to integer: truncate, saturate (PTX cvt.rzi clamps to the destination range), NaN -> 0.
template <class T> static inline T hg_emu_sat(double x) {
  if (x != x) return 0;
  double t = std::trunc(x);
  if (t >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
  if (t <= (double)std::numeric_limits<T>::min()) return std::numeric_limits<T>::min();
  return (T)t;
}
static inline int __float2int_rz(float x) { return hg_emu_sat<int>(x); }
static inline unsigned int __float2uint_rz(float x) { return hg_emu_sat<unsigned int>(x); }
static inline long long __float2ll_rz(float x) { return hg_emu_sat<long long>(x); }
static inline unsigned long long __float2ull_rz(float x) { return hg_emu_sat<unsigned long long>(x); }
static inline int __double2int_rz(double x) { return hg_emu_sat<int>(x); }
static inline unsigned int __double2uint_rz(double x) { return hg_emu_sat<unsigned int>(x); }
static inline long long __double2ll_rz(double x) { return hg_emu_sat<long long>(x); }
static inline unsigned long long __double2ull_rz(double x) { return hg_emu_sat<unsigned long long>(x); }

// Atomics (sequentially consistent on the host).
template <class T> static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline float atomicAdd(float* p, float v) {
  unsigned int* q = (unsigned int*)p; unsigned int old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(q, &old, __float_as_uint(__uint_as_float(old) + v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return __uint_as_float(old);
}
static inline double atomicAdd(double* p, double v) {
  unsigned long long* q = (unsigned long long*)p; unsigned long long old = __atomic_load_n(q, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(q, &old, (unsigned long long)__double_as_longlong(__longlong_as_double((long long)old) + v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return __longlong_as_double((long long)old);
}
template <class T> static inline T atomicMin(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, v < old ? v : old, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
template <class T> static inline T atomicMax(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, v > old ? v : old, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
template <class T> static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicCAS(T* p, T c, T v) {
  __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return c;
}
