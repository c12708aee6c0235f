// dq_ctpack.cu: compressed-tensors pack-quantized integer weights, decoded exactly
// as package quant (quant/ctpack.go): the fp32 product is exact and is
// rounded to the scale dtype as compressed-tensors' decompressor does.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the row-major geometry of dq.cuh: a thread's 8 values are
// 8·b consecutive bits of its row (b = 4: one word; adjacent threads read
// adjacent words), scale and zero point are read once per thread when the
// group size is a multiple of 8 (once per group change with g_idx), and
// the output goes out in 16-byte stores (launched by
// backends/cuda/dq_ctpack.go).
#include "dq.cuh"

// field extracts the b-bit unsigned field number e of a row of 32-bit words,
// dense little-endian bitstream (vpw == 0, values may straddle words) or the
// legacy layout with vpw values per word at bits k*b.
__device__ __forceinline__ unsigned field(const unsigned *row, int e, int b, int vpw) {
	unsigned mask = (1u << b) - 1u;
	if (vpw > 0) return (row[e / vpw] >> ((e % vpw) * b)) & mask;
	long long bit = (long long)e * b;
	long long w = bit >> 5;
	int s = (int)(bit & 31);
	unsigned v = row[w] >> s;
	if (s + b > 32) v |= row[w + 1] << (32 - s);
	return v & mask;
}

// ct_zero returns the zero point of row r, group g (zmode as dq_ct_pack).
__device__ __forceinline__ int ct_zero(int zmode, const void *zp, int zvpw, int r, int g, int scols, int b, int off) {
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
		return (int)u - off;
	}
	if (zmode == 2) return ((const signed char *)zp)[(size_t)r * scols + g];
	if (zmode == 3) return ((const signed char *)zp)[0];
	return 0;
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
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	int off = 1 << (b - 1);
	const unsigned *row = packed + (size_t)r * wpr;
	size_t i = (size_t)r * K + c0;
	int q[DQ_V];
	if (vpw == 0 && b <= 8) {
		// the thread's 8·b bits start at bit c0·b: at most three words, read
		// only as far as the values reach (b = 4: exactly word c0/8)
		int bit = c0 * b, w = bit >> 5, s = bit & 31, end = s + n * b;
		unsigned long long v = row[w];
		if (end > 32) v |= (unsigned long long)row[w + 1] << 32;
		v >>= s;
		if (end > 64) v |= (unsigned long long)row[w + 2] << (64 - s);
		for (int j = 0; j < DQ_V; j++) if (j < n) q[j] = (int)((v >> (j * b)) & ((1u << b) - 1u)) - off;
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) q[j] = (int)field(row, c0 + j, b, vpw) - off;
	}
	float v[DQ_V];
	if (!gidx && (gs <= 0 || gs % DQ_V == 0)) { // one group for the thread's columns
		int g = gs > 0 ? c0 / gs : 0;
		int z = ct_zero(zmode, zp, zvpw, r, g, scols, b, off);
		float s = ld_dt(scale, (size_t)r * scols + g, sdt);
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = round_dt((float)(q[j] - z) * s, sdt);
	} else { // g_idx (activation order) or a group size that splits the 8 columns
		int gc = -1, z = 0;
		float s = 0.0f;
		for (int j = 0; j < DQ_V; j++) if (j < n) {
			int c = c0 + j;
			int g = gidx ? gidx[c] : (gs > 0 ? c / gs : 0);
			if (g != gc) {
				gc = g;
				z = ct_zero(zmode, zp, zvpw, r, g, scols, b, off);
				s = ld_dt(scale, (size_t)r * scols + g, sdt);
			}
			v[j] = round_dt((float)(q[j] - z) * s, sdt);
		}
	}
	dq_store(out, i, v, n, gemmDT, dq_vec_out(out, K));
}
