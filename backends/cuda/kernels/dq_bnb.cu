// dq_bnb.cu: bitsandbytes 4-bit (NF4/FP4, optionally double-quantized
// absmax) and LLM.int8 weights, decoded exactly as package quant
// (quant/bnb.go). Writes the per-Linear scratch W[N][K] (row-major
// [out][in]) in the GEMM dtype gemmDT, grid-stride over the N*K outputs
// with no barriers (launched by backends/cuda/dq_bnb.go). See common.cuh
// for the dtype helpers.
#include "common.cuh"

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

// dq_bnb4: the weight flattened row-major, element i in byte i/2 (even i:
// high nibble); code[16] the f32 table; block b = i / blocksize.
//   absmax_b = nested ? f32(f32(code2[qabs[b]] * absmax[b / nblock2]) + offset) : absmax[b]
//   W = round_to(cdt, round_to(rdt, f32(code[q] * absmax_b)))
// (bitsandbytes' dequantize_4bit to the quant_state dtype rdt, then
// MatMul4Bit's cast to the compute dtype cdt). Reference: quant's
// BNB4.Dequantize.
EXTERN_C __global__ void dq_bnb4(void *out, int gemmDT, int N, int K, const unsigned char *packed, const float *code,
				 const float *absmax, const unsigned char *qabs, const float *code2, float offset, int nested,
				 int blocksize, int nblock2, int rdt, int cdt) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		long long b = i / blocksize;
		float am = nested ? bnb_mul(code2[qabs[b]], absmax[b / nblock2]) + offset : absmax[b];
		unsigned byte = packed[i / 2];
		unsigned q = (i & 1) ? byte & 15u : byte >> 4;
		st_dt(out, i, round_dt(round_dt(code[q] * am, rdt), cdt), gemmDT);
	}
}

// dq_bnb8: LLM.int8 weight codes I8 [N][K] with f32 row scales scb[N]:
//   W = q * scb[r] / 127, computed in double and rounded once to gemmDT
// (to f32 directly; to bf16/f16 through f32 rounded to odd, which then
// rounds to nearest even exactly as the double would). Reference: quant's
// BNB8.Dequantize.
EXTERN_C __global__ void dq_bnb8(void *out, int gemmDT, int N, int K, const signed char *q, const float *scb) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K);
		double v = (double)q[i] * (double)scb[r] / 127.0;
		float f = (float)v;
		if (gemmDT != DT_F32 && (double)f != v) {
			unsigned u = __float_as_uint(f);
			if (!(u & 1u)) u += fabs(v) > fabs((double)f) ? 1u : 0xffffffffu; // round to odd
			f = __uint_as_float(u);
		}
		st_dt(out, i, f, gemmDT);
	}
}
