// dq_ctpack.cu: compressed-tensors pack-quantized integer weights, decoded exactly
// as package quant (quant/ctpack.go): the fp32 product is exact and is
// rounded to the scale dtype as compressed-tensors' decompressor does.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_ctpack.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// field extracts the b-bit unsigned field number e of a row of 32-bit words,
// dense little-endian bitstream (vpw == 0, values may straddle words) or the
// legacy layout with vpw values per word at bits k*b.
__device__ __forceinline__ unsigned field(const unsigned *row, long long e, int b, int vpw) {
	unsigned mask = (1u << b) - 1u;
	if (vpw > 0) return (row[e / vpw] >> ((e % vpw) * b)) & mask;
	long long bit = e * b;
	long long w = bit >> 5;
	int s = (int)(bit & 31);
	unsigned v = row[w] >> s;
	if (s + b > 32) v |= row[w + 1] << (32 - s);
	return v & mask;
}

// dq_ct_pack: compressed-tensors pack-quantized (formats.md 2.1).
//   q = u(r,c) - 2^(b-1); z = zero point (0 if symmetric)
//   g = g_idx ? g_idx[c] : (gs > 0 ? c/gs : 0)
//   W[r][c] = round_to(sdt, f32(q - z) * f32(scale[r*scols + g]))  (scols 0: tensor scale)
// packed: I32 [N][wpr] (vpw 0 dense, else legacy floor(32/b) per word).
// zmode: 0 none; 1 I32 packed along dim 0 ([*][scols] words, field r of
// column g, same packing kind zvpw); 2 I8 [N][scols] unpacked (legacy);
// 3 I8 [1] tensor zero point.
// Reference: quant's CT pack-quantized Linear.Dequantize.
EXTERN_C __global__ void dq_ct_pack(void *out, int gemmDT, int N, int K, const unsigned *packed, int wpr, int b, int vpw,
				    const void *scale, int sdt, int scols, int gs, const int *gidx, int zmode,
				    const void *zp, int zvpw) {
	long long n = (long long)N * K;
	int off = 1 << (b - 1);
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		int q = (int)field(packed + (size_t)r * wpr, c, b, vpw) - off;
		int g = gidx ? gidx[c] : (gs > 0 ? c / gs : 0);
		int z = 0;
		if (zmode == 1) {
			// column g of a [rowsPacked][scols] word matrix: element r's field
			const unsigned *zw = (const unsigned *)zp;
			unsigned u;
			if (zvpw > 0) {
				u = (zw[(size_t)(r / zvpw) * scols + g] >> ((r % zvpw) * b)) & ((1u << b) - 1u);
			} else {
				long long bit = (long long)r * b;
				int s = (int)(bit & 31);
				long long w = bit >> 5;
				u = zw[(size_t)w * scols + g] >> s;
				if (s + b > 32) u |= zw[(size_t)(w + 1) * scols + g] << (32 - s);
				u &= (1u << b) - 1u;
			}
			z = (int)u - off;
		} else if (zmode == 2) {
			z = ((const signed char *)zp)[(size_t)r * scols + g];
		} else if (zmode == 3) {
			z = ((const signed char *)zp)[0];
		}
		float s = ld_dt(scale, (size_t)r * scols + g, sdt);
		st_dt(out, i, round_dt((float)(q - z) * s, sdt), gemmDT);
	}
}

