// ggml.cu: exact decoding of llama.cpp's GGUF tensor types (ggml block
// formats) into a scratch W[N][K] of the GEMM dtype gemmDT. Each value is
// computed in fp32 exactly as ggml's dequantize_row_<type> computes it (same
// operations, same order, each rounded once: products that are then added
// use __fmul_rn so nvcc cannot fuse them), then stored rounded to gemmDT.
// Reference: package gguf/ggml's Dequantize (bit-identical fp32 values;
// gguf/ggml's tests prove those against libggml itself).
//
// A row of K values is K/bs whole blocks of ts bytes (bs, ts: the type's
// block and type size); rows are contiguous. Grid types read their
// codebook from grid (ggml.Grid: group int8 values per entry); the other
// types ignore it. The kernel runs in the row-major geometry of dq.cuh (8
// consecutive values of one row per thread, 16-byte stores) and uses no
// barriers.
#include "dq.cuh"

// ggml type ids (gguf/ggml's Type).
#define GG_F32 0
#define GG_F16 1
#define GG_Q4_0 2
#define GG_Q4_1 3
#define GG_Q5_0 6
#define GG_Q5_1 7
#define GG_Q8_0 8
#define GG_Q2_K 10
#define GG_Q3_K 11
#define GG_Q4_K 12
#define GG_Q5_K 13
#define GG_Q6_K 14
#define GG_IQ2_XXS 16
#define GG_IQ2_XS 17
#define GG_IQ3_XXS 18
#define GG_IQ1_S 19
#define GG_IQ4_NL 20
#define GG_IQ3_S 21
#define GG_IQ2_S 22
#define GG_IQ4_XS 23
#define GG_IQ1_M 29
#define GG_BF16 30
#define GG_TQ1_0 34
#define GG_TQ2_0 35
#define GG_MXFP4 39
#define GG_NVFP4 40
#define GG_Q1_0 41
#define GG_Q2_0 42

// gg_mul is a product rounded to fp32 that no compiler may fuse with an
// add or subtract consuming it (nvcc: __fmul_rn; host compilers may
// contract a*b+c under -ffp-contract=fast, so the emulator launders the
// product through memory).
#ifdef QPPL_EMU
static inline float gg_mul(float a, float b) {
	float r = a * b;
	__asm__ volatile("" : "+m"(r));
	return r;
}
#else
#define gg_mul(a, b) __fmul_rn((a), (b))
#endif

__device__ __forceinline__ unsigned gg_u16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }
__device__ __forceinline__ unsigned gg_u32(const unsigned char *p) { return gg_u16(p) | gg_u16(p + 2) << 16; }

// gg_f16 converts IEEE binary16 bits to float exactly.
__device__ __forceinline__ float gg_f16(unsigned h) {
	unsigned sign = (h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e == 0) return __uint_as_float(__float_as_uint((float)m * 5.9604644775390625e-8f) | sign); // m·2^-24
	if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | m << 13);
	return __uint_as_float(sign | (e + 112) << 23 | m << 13);
}

// gg_e8m0_half is ggml_e8m0_to_fp32_half: 2^(e-128).
__device__ __forceinline__ float gg_e8m0_half(unsigned e) {
	return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// gg_ksign: 7 stored sign bits plus the parity bit (ksigns_iq2xs).
__device__ __forceinline__ unsigned gg_ksign(unsigned i) {
	i &= 127;
	unsigned p = i ^ i >> 4;
	p ^= p >> 2;
	p ^= p >> 1;
	return i | (p & 1) << 7;
}

__device__ __forceinline__ float gg_signed(float v, unsigned signs, int j) { return (signs >> j) & 1 ? -v : v; }

__device__ __forceinline__ int gg_iq4nl(unsigned q) {
	const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
	return kv[q & 15];
}

__device__ __forceinline__ int gg_fp4(unsigned q) {
	const int kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	return kv[q & 15];
}

// gg_scale_min_k4 is ggml's get_scale_min_k4 (Q4_K, Q5_K).
__device__ __forceinline__ void gg_scale_min_k4(int j, const unsigned char *q, float *sc, float *m) {
	if (j < 4) {
		*sc = (float)(q[j] & 63);
		*m = (float)(q[j + 4] & 63);
	} else {
		*sc = (float)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
		*m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

// gg_ue4m3_half is ggml_ue4m3_to_fp32: half an unsigned E4M3 scale (bit 7
// ignored; 0 and 0x7f are zero).
__device__ __forceinline__ float gg_ue4m3_half(unsigned x) {
	if (x == 0 || x == 0x7f) return 0.0f;
	unsigned e = (x >> 3) & 15, m = x & 7;
	float raw = e == 0 ? (float)m * 0.001953125f : __uint_as_float((e + 120) << 23 | m << 20);
	return raw * 0.5f;
}

// gg_trit is TQ1_0's base-3 digit n of byte v minus one (fixed-point digits).
__device__ __forceinline__ float gg_trit(unsigned v, int n) {
	const unsigned pow3[5] = {1, 3, 9, 27, 81};
	unsigned q = (v * pow3[n]) & 255;
	return (float)((int)((q * 3) >> 8) - 1);
}

// gg_block returns the block size and type size of type (0 if unknown).
__device__ __forceinline__ void gg_block(int type, int *bs, int *ts) {
	switch (type) {
	case GG_F32: *bs = 1; *ts = 4; return;
	case GG_F16: case GG_BF16: *bs = 1; *ts = 2; return;
	case GG_Q4_0: case GG_IQ4_NL: *bs = 32; *ts = 18; return;
	case GG_Q4_1: *bs = 32; *ts = 20; return;
	case GG_Q5_0: *bs = 32; *ts = 22; return;
	case GG_Q5_1: *bs = 32; *ts = 24; return;
	case GG_Q8_0: *bs = 32; *ts = 34; return;
	case GG_MXFP4: *bs = 32; *ts = 17; return;
	case GG_Q2_K: *bs = 256; *ts = 84; return;
	case GG_Q3_K: *bs = 256; *ts = 110; return;
	case GG_Q4_K: *bs = 256; *ts = 144; return;
	case GG_Q5_K: *bs = 256; *ts = 176; return;
	case GG_Q6_K: *bs = 256; *ts = 210; return;
	case GG_IQ4_XS: *bs = 256; *ts = 136; return;
	case GG_IQ2_XXS: *bs = 256; *ts = 66; return;
	case GG_IQ2_XS: *bs = 256; *ts = 74; return;
	case GG_IQ2_S: *bs = 256; *ts = 82; return;
	case GG_IQ3_XXS: *bs = 256; *ts = 98; return;
	case GG_IQ3_S: *bs = 256; *ts = 110; return;
	case GG_IQ1_S: *bs = 256; *ts = 50; return;
	case GG_IQ1_M: *bs = 256; *ts = 56; return;
	case GG_TQ1_0: *bs = 256; *ts = 54; return;
	case GG_TQ2_0: *bs = 256; *ts = 66; return;
	case GG_NVFP4: *bs = 64; *ts = 36; return;
	case GG_Q1_0: *bs = 128; *ts = 18; return;
	case GG_Q2_0: *bs = 64; *ts = 18; return;
	}
	*bs = 0;
	*ts = 0;
}

// gg_value decodes value j of block b of the given type.
__device__ float gg_value(int type, const unsigned char *b, int j, const signed char *grid) {
	switch (type) {
	case GG_F32: return __uint_as_float(gg_u32(b));
	case GG_F16: return gg_f16(gg_u16(b));
	case GG_BF16: return __uint_as_float(gg_u16(b) << 16);
	case GG_Q4_0: {
		unsigned q = j < 16 ? b[2 + j] & 0xf : b[2 + j - 16] >> 4;
		return (float)((int)q - 8) * gg_f16(gg_u16(b));
	}
	case GG_Q4_1: {
		unsigned q = j < 16 ? b[4 + j] & 0xf : b[4 + j - 16] >> 4;
		return gg_mul((float)q, gg_f16(gg_u16(b))) + gg_f16(gg_u16(b + 2));
	}
	case GG_Q5_0: {
		unsigned q = (j < 16 ? b[6 + j] & 0xf : b[6 + j - 16] >> 4) | ((gg_u32(b + 2) >> j) & 1) << 4;
		return (float)((int)q - 16) * gg_f16(gg_u16(b));
	}
	case GG_Q5_1: {
		unsigned q = (j < 16 ? b[8 + j] & 0xf : b[8 + j - 16] >> 4) | ((gg_u32(b + 4) >> j) & 1) << 4;
		return gg_mul((float)q, gg_f16(gg_u16(b))) + gg_f16(gg_u16(b + 2));
	}
	case GG_Q8_0: return (float)(signed char)b[2 + j] * gg_f16(gg_u16(b));
	case GG_MXFP4: {
		unsigned q = j < 16 ? b[1 + j] & 0xf : b[1 + j - 16] >> 4;
		return (float)gg_fp4(q) * gg_e8m0_half(b[0]);
	}
	case GG_IQ4_NL: {
		unsigned q = j < 16 ? b[2 + j] & 0xf : b[2 + j - 16] >> 4;
		return gg_f16(gg_u16(b)) * (float)gg_iq4nl(q);
	}
	case GG_Q2_K: {
		int n = j / 128, r = j % 128, sh = r / 32, h = (r % 32) / 16, l = r % 16;
		unsigned sc = b[8 * n + 2 * sh + h];
		unsigned q = (b[16 + 32 * n + 16 * h + l] >> (2 * sh)) & 3;
		float dl = gg_f16(gg_u16(b + 80)) * (float)(sc & 0xf), ml = gg_mul(gg_f16(gg_u16(b + 82)), (float)(sc >> 4));
		return gg_mul(dl, (float)q) - ml;
	}
	case GG_Q3_K: {
		int n = j / 128, r = j % 128, sh = r / 32, h = (r % 32) / 16, l = r % 16;
		int is = 8 * n + 2 * sh + h;
		const unsigned char *s = b + 96;
		unsigned lo = is < 8 ? s[is] & 0xf : s[is - 8] >> 4;
		unsigned hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
		int q = (b[32 + 32 * n + 16 * h + l] >> (2 * sh)) & 3;
		if (!(b[16 * h + l] & (1u << (4 * n + sh)))) q -= 4;
		float dl = gg_f16(gg_u16(b + 108)) * (float)((int)(lo | hi << 4) - 32);
		return dl * (float)q;
	}
	case GG_Q4_K: case GG_Q5_K: {
		int c = j / 64, w = j % 64, hi = w >= 32, l = w % 32;
		float sc, m;
		gg_scale_min_k4(2 * c + hi, b + 4, &sc, &m);
		float d1 = gg_f16(gg_u16(b)) * sc, m1 = gg_mul(gg_f16(gg_u16(b + 2)), m);
		unsigned q;
		if (type == GG_Q4_K) {
			q = b[16 + 32 * c + l];
		} else {
			q = b[48 + 32 * c + l];
		}
		q = hi ? q >> 4 : q & 0xf;
		if (type == GG_Q5_K && (b[16 + l] >> (2 * c + hi)) & 1) q += 16;
		return gg_mul(d1, (float)q) - m1;
	}
	case GG_Q6_K: {
		int n = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
		const unsigned char *ql = b + 64 * n, *qh = b + 128 + 32 * n;
		const signed char *sc = (const signed char *)b + 192 + 8 * n;
		unsigned lo = quarter & 1 ? ql[l + 32] : ql[l];
		lo = quarter >= 2 ? lo >> 4 : lo & 0xf;
		int q = (int)(lo | ((qh[l] >> (2 * quarter)) & 3) << 4) - 32;
		return gg_f16(gg_u16(b + 208)) * (float)sc[l / 16 + 2 * quarter] * (float)q;
	}
	case GG_IQ4_XS: {
		int ib = j / 32, w = j % 32;
		int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | ((gg_u16(b + 2) >> (2 * ib)) & 3) << 4;
		float dl = gg_f16(gg_u16(b)) * (float)(ls - 32);
		unsigned q = b[8 + 16 * ib + w % 16];
		return dl * (float)gg_iq4nl(w < 16 ? q & 0xf : q >> 4);
	}
	case GG_IQ2_XXS: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8;
		const unsigned char *qs = b + 2 + 8 * ib;
		unsigned a = gg_u32(qs + 4);
		float db = gg_f16(gg_u16(b)) * (0.5f + (float)(a >> 28)) * 0.25f;
		return gg_signed(db * (float)grid[8 * qs[l] + jj], gg_ksign(a >> (7 * l)), jj);
	}
	case GG_IQ2_XS: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8;
		unsigned q = gg_u16(b + 2 + 2 * (4 * ib + l));
		unsigned s = b[66 + ib];
		float db = gg_f16(gg_u16(b)) * (0.5f + (float)(l < 2 ? s & 0xf : s >> 4)) * 0.25f;
		return gg_signed(db * (float)grid[8 * (q & 511) + jj], gg_ksign(q >> 9), jj);
	}
	case GG_IQ2_S: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8;
		unsigned idx = b[2 + 4 * ib + l] | ((unsigned)b[66 + ib] << (8 - 2 * l) & 0x300);
		unsigned s = b[74 + ib];
		float db = gg_f16(gg_u16(b)) * (0.5f + (float)(l < 2 ? s & 0xf : s >> 4)) * 0.25f;
		return gg_signed(db * (float)grid[8 * idx + jj], b[34 + 4 * ib + l], jj);
	}
	case GG_IQ3_XXS: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8;
		unsigned a = gg_u32(b + 66 + 4 * ib);
		float db = gg_f16(gg_u16(b)) * (0.5f + (float)(a >> 28)) * 0.5f;
		unsigned g = b[2 + 8 * ib + 2 * l + jj / 4];
		return gg_signed(db * (float)grid[4 * g + jj % 4], gg_ksign(a >> (7 * l)), jj);
	}
	case GG_IQ3_S: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8, k = 2 * l + jj / 4;
		unsigned s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0xf;
		float db = gg_f16(gg_u16(b)) * (float)(1 + 2 * (int)s);
		unsigned g = b[2 + 8 * ib + k] | ((b[66 + ib] >> k) & 1) << 8;
		return gg_signed(db * (float)grid[4 * g + jj % 4], b[74 + 4 * ib + l], jj);
	}
	case GG_IQ1_S: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8;
		unsigned qh = gg_u16(b + 34 + 2 * ib);
		float dl = gg_f16(gg_u16(b)) * (float)(2 * ((qh >> 12) & 7) + 1);
		float delta = qh & 0x8000 ? -0.125f : 0.125f;
		unsigned idx = b[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7) << 8;
		return dl * ((float)grid[8 * idx + jj] + delta);
	}
	case GG_IQ1_M: {
		int ib = j / 32, l = (j % 32) / 8, jj = j % 8;
		unsigned sc[4] = {gg_u16(b + 48), gg_u16(b + 50), gg_u16(b + 52), gg_u16(b + 54)};
		float d = gg_f16((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
		float dl = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7) + 1);
		unsigned h = b[32 + 2 * ib + l / 2];
		unsigned idx = b[4 * ib + l] | (l % 2 == 0 ? (h << 8) & 0x700 : (h << 4) & 0x700);
		float delta = h & (l % 2 == 0 ? 0x08 : 0x80) ? -0.125f : 0.125f;
		return dl * ((float)grid[8 * idx + jj] + delta);
	}
	case GG_NVFP4: {
		int sb = j / 16, w = j % 16;
		unsigned q = b[4 + 8 * sb + w % 8];
		return (float)gg_fp4(w < 8 ? q & 0xf : q >> 4) * gg_ue4m3_half(b[sb]);
	}
	case GG_TQ1_0: {
		float d = gg_f16(gg_u16(b + 52));
		if (j < 160) return gg_trit(b[j % 32], j / 32) * d;
		if (j < 240) return gg_trit(b[32 + (j - 160) % 16], (j - 160) / 16) * d;
		return gg_trit(b[48 + (j - 240) % 4], (j - 240) / 4) * d;
	}
	case GG_TQ2_0: {
		int half = j / 128, r = j % 128;
		int q = (b[32 * half + r % 32] >> (2 * (r / 32))) & 3;
		return (float)(q - 1) * gg_f16(gg_u16(b + 64));
	}
	case GG_Q1_0: {
		float d = gg_f16(gg_u16(b));
		return (b[2 + j / 8] >> (j % 8)) & 1 ? d : -d;
	}
	case GG_Q2_0: {
		int q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
		return (float)(q - 1) * gg_f16(gg_u16(b));
	}
	}
	return __uint_as_float(0x7fc00000u); // unknown type: NaN (the Go side refuses it first)
}

// dq_ggml decodes N rows of K values of ggml type typ from data into out
// (dtype gemmDT). grid: the type's codebook (ggml.Grid) or null.
// Reference: gguf/ggml's Dequantize.
EXTERN_C __global__ void dq_ggml(void *out, int gemmDT, int N, int K, const unsigned char *data, int typ,
				 const signed char *grid) {
	int bs, ts;
	gg_block(typ, &bs, &ts);
	if (bs == 0) return;
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	const unsigned char *row = data + (size_t)r * (K / bs) * ts;
	float v[DQ_V];
	if (bs % DQ_V == 0) { // the thread's 8 values sit in one block
		const unsigned char *b = row + (size_t)(c0 / bs) * ts;
		int j0 = c0 % bs;
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = gg_value(typ, b, j0 + j, grid);
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) {
			int c = c0 + j;
			v[j] = gg_value(typ, row + (size_t)(c / bs) * ts, c % bs, grid);
		}
	}
	dq_store(out, (size_t)r * K + c0, v, n, gemmDT, dq_vec_out(out, K));
}
