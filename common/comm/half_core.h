/* half_core.h: float32 <-> bfloat16 and float16, round to nearest even,
 * written on the bits, shared by host code and CUDA kernels so that both
 * backends round every value identically (what a GPU's __float2bfloat16_rn
 * and __float2half_rn do). */
#ifndef DT_HALF_CORE_H
#define DT_HALF_CORE_H

#include <stdint.h>
#include <string.h>

#include "rng_core.h" /* DT_HOSTDEV */

DT_HOSTDEV static inline uint32_t dt_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
DT_HOSTDEV static inline float dt_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* bfloat16 is float32's top half: 8 exponent bits, 7 mantissa bits. */
DT_HOSTDEV static inline uint16_t dt_f32_to_bf16(float f) {
  uint32_t u = dt_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* ties to even; may carry to inf */
}
DT_HOSTDEV static inline float dt_bf16_to_f32(uint16_t h) { return dt_float((uint32_t)h << 16); }

/* float16: 5 exponent bits, 10 mantissa bits, largest finite 65504. */
DT_HOSTDEV static inline uint16_t dt_f32_to_f16(float f) {
  uint32_t u = dt_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00u); /* >= 65536: inf */
  uint32_t q, rest, half;
  if (a >= 0x38800000u) { /* normal: rebias the exponent, keep 10 mantissa bits */
    q = ((a >> 23) - 112u) << 10 | (a & 0x7fffffu) >> 13;
    rest = a & 0x1fffu, half = 0x1000u;
  } else { /* subnormal (or zero): value = q x 2^-24 */
    uint32_t e = a >> 23;
    if (e < 102) return (uint16_t)sign; /* below 2^-25: rounds to 0 */
    uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  }
  if (rest > half || (rest == half && (q & 1u))) q++; /* a carry correctly reaches inf */
  return (uint16_t)(sign | q);
}
DT_HOSTDEV static inline float dt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return dt_float(sign | 0x7f800000u | (m << 13)); /* inf, NaN */
  if (e == 0) { /* zero or subnormal: exact in float */
    float v = (float)m * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return dt_float(sign | (e + 112u) << 23 | (m << 13));
}

#endif
