// dq_bnb.cu: bitsandbytes 4-bit (NF4/FP4, optionally double-quantized
// absmax) and LLM.int8 weights, decoded exactly as package quant
// (quant/bnb.go). Writes the per-Linear scratch W[N][K] (row-major
// [out][in]) in the GEMM dtype gemmDT in the row-major geometry of dq.cuh
// (8 values per thread, 16-byte stores; launched by backends/cuda/dq_bnb.go).
#include "dq.cuh"

// bnb_mul is a product rounded to fp32 that no compiler may fuse with the
// add consuming it (bitsandbytes stores the nested product before adding
// the offset): nvcc __fmul_rn; the emulator launders it through memory, as
// host compilers may contract a*b+c.
#ifdef QPPL_EMU
static inline float bnb_mul(float a, float b) {
	float r = a * b;
	__asm__ volatile("" : "+m"(r));
	return r;
}
#else
#define bnb_mul(a, b) __fmul_rn((a), (b))
#endif

// bnb_absmax is block b's absmax as dequantize_4bit uses it: absmax[b], or
// nested f32(f32(code2[qabs[b]] * absmax[b >> lnb2]) + offset).
__device__ __forceinline__ float bnb_absmax(const float *absmax, const unsigned char *qabs, const float *code2, float offset,
					    int nested, size_t b, int lnb2) {
	return nested ? bnb_mul(code2[qabs[b]], absmax[b >> lnb2]) + offset : absmax[b];
}

// dq_bnb4: the weight flattened row-major, element i in byte i/2 (even i:
// high nibble); code[16] the f32 table; block b = i >> lbs (blocksize
// 2^lbs), nested blocks of 2^lnb2 absmax codes.
//   W = round_to(cdt, round_to(rdt, f32(code[q] * absmax_b)))
// (bitsandbytes' dequantize_4bit to the quant_state dtype rdt, then
// MatMul4Bit's cast to the compute dtype cdt). With K % 8 == 0 a thread's 8
// values are one 4-byte word inside one block (blocksize >= 32). Reference:
// quant's BNB4.Dequantize.
EXTERN_C __global__ void dq_bnb4(void *out, int gemmDT, int N, int K, const unsigned char *packed, const float *code,
				 const float *absmax, const unsigned char *qabs, const float *code2, float offset, int nested,
				 int lbs, int lnb2, int rdt, int cdt) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(packed, 4);
	float v[DQ_V];
	if (vec) {
		unsigned u = dq_ld4(packed + i / 2);
		float am = bnb_absmax(absmax, qabs, code2, offset, nested, i >> lbs, lnb2);
		for (int j = 0; j < DQ_V; j++) {
			unsigned q = (u >> (8 * (j >> 1) + ((j & 1) ? 0 : 4))) & 15u;
			v[j] = round_dt(round_dt(code[q] * am, rdt), cdt);
		}
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) {
			size_t e = i + j;
			unsigned byte = packed[e / 2];
			unsigned q = (e & 1) ? byte & 15u : byte >> 4;
			v[j] = round_dt(round_dt(code[q] * bnb_absmax(absmax, qabs, code2, offset, nested, e >> lbs, lnb2), rdt), cdt);
		}
	}
	dq_store(out, i, v, n, gemmDT, vec);
}

// bnb8_value is q * s / 127 computed in double and rounded once to dtype dt:
// to f32 directly, to bf16/f16 through f32 rounded to odd (which then
// rounds to nearest even exactly as the double would).
__device__ __forceinline__ float bnb8_value(int q, float s, int dt) {
	double x = (double)q * (double)s / 127.0;
	float f = (float)x;
	if (dt != DT_F32 && (double)f != x) {
		unsigned u = __float_as_uint(f);
		if (!(u & 1u)) u += fabs(x) > fabs((double)f) ? 1u : 0xffffffffu; // round to odd
		f = __uint_as_float(u);
	}
	return f;
}

// dq_bnb8: LLM.int8 weight codes I8 [N][K] with f32 row scales scb[N]:
//   W = q * scb[r] / 127, rounded once to gemmDT (bnb8_value).
// Reference: quant's BNB8.Dequantize.
EXTERN_C __global__ void dq_bnb8(void *out, int gemmDT, int N, int K, const signed char *q, const float *scb) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(q, 8);
	float s = scb[r];
	float v[DQ_V];
	if (vec) {
		uint2 w = dq_ld8(q + i);
		for (int j = 0; j < DQ_V; j++) {
			unsigned word = j < 4 ? w.x : w.y;
			v[j] = bnb8_value((signed char)(word >> (8 * (j & 3))), s, gemmDT);
		}
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = bnb8_value(q[i + j], s, gemmDT);
	}
	dq_store(out, i, v, n, gemmDT, vec);
}
