// dequant.cu: exact decoding of every packed weight format of formats.md
// sections 2 and 4 from the bytes as stored in the checkpoint, into a
// per-Linear scratch W[N][K] (row-major [out][in]) of the GEMM dtype odt.
// Each value is first computed as the format prescribes (the fp32 product
// is exact for the integer formats), rounded to the scale's dtype where
// compressed-tensors' decompressor does (int, fp8; nvfp4 to the model
// dtype) exactly as package quant does, then stored rounded to odt.
// GPTQ and AWQ products are exact (quant keeps them unrounded).
// Reference: quant's Dequantize of the same Linear type (named per kernel).
// All kernels are grid-stride over the N*K outputs and use no barriers.
#include "common.cuh"

// dq_dense converts a dense weight [N][K] of dtype idt to odt. The element
// count N*K may exceed 2^31 (a large vocabulary's head in fp32), so it is
// indexed in 64 bits like the other dequantization kernels.
// Reference: the unquantized F32/F16/BF16 Linear.
EXTERN_C __global__ void dq_dense(void *out, int odt, const void *in, int idt, int N, int K) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		st_dt(out, i, ld_dt(in, i, idt), odt);
}

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
EXTERN_C __global__ void dq_ct_pack(void *out, int odt, int N, int K, const unsigned *packed, int wpr, int b, int vpw,
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
		st_dt(out, i, round_dt((float)(q - z) * s, sdt), odt);
	}
}

// dq_nvfp4: nvfp4-pack-quantized (mx == 0) and mxfp4-pack-quantized (mx == 1),
// formats.md 2.2. packed U8 [N][K/2], low nibble = even column.
//   nvfp4: W = round_to(rdt, E2M1(code) * (f32(E4M3(scale[r][c/16])) / gscale))  (f32 ops;
//          rdt is the model dtype CT decompresses to)
//   mxfp4: W = E2M1(code) * 2^(scale[r][c/32] - 127)   (exact)
// Reference: quant's NVFP4 / MXFP4 Linear.Dequantize.
EXTERN_C __global__ void dq_nvfp4(void *out, int odt, int N, int K, const unsigned char *packed,
				  const unsigned char *scale, float gscale, int mx, int rdt) {
	long long n = (long long)N * K;
	int gsz = mx ? 32 : 16, sc = K / gsz;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		unsigned byte = packed[(size_t)r * (K / 2) + c / 2];
		unsigned code = (c & 1) ? byte >> 4 : byte & 15u;
		unsigned sb = scale[(size_t)r * sc + c / gsz];
		float eff = mx ? e8m0_to_f32(sb) : e4m3_to_f32(sb) / gscale;
		st_dt(out, i, round_dt(e2m1_to_f32(code) * eff, mx ? DT_F32 : rdt), odt);
	}
}

// dq_fp8: float-quantized / naive-quantized FP8 E4M3 weights (formats.md 2.3)
//   W[r][c] = round_to(sdt, E4M3(w[r][c]) * scale[(r/bh)*scols + c/bw])
// tensor: bh=N, bw=K, scols=1; channel: bh=1, bw=K, scols=1; block: bh, bw, scols=ceil(K/bw).
// Reference: quant's FP8 Linear.Dequantize.
EXTERN_C __global__ void dq_fp8(void *out, int odt, int N, int K, const unsigned char *w, const void *scale, int sdt,
				int bh, int bw, int scols) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		float s = ld_dt(scale, (size_t)(r / bh) * scols + c / bw, sdt);
		st_dt(out, i, round_dt(e4m3_to_f32(w[i]) * s, sdt), odt);
	}
}

// dq_int8: int-quantized (W8A8 and unpacked low-bit) I8 weights, formats.md 2.4
//   W[r][c] = round_to(sdt, f32(q - zp) * scale[(r/bh)*scols + c/bw]), zp I8 with
// the scale's indexing (nil: symmetric).
// Reference: quant's INT8 Linear.Dequantize.
EXTERN_C __global__ void dq_int8(void *out, int odt, int N, int K, const signed char *w, const void *scale, int sdt,
				 int bh, int bw, int scols, const signed char *zp) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		size_t si = (size_t)(r / bh) * scols + c / bw;
		int z = zp ? zp[si] : 0;
		st_dt(out, i, round_dt((float)(w[i] - z) * ld_dt(scale, si, sdt), sdt), odt);
	}
}

// dq_gptq: GPTQ (formats.md 4). qweight I32 [K*b/32][N] packed along in,
// qzeros I32 [G][N*b/32] packed along out, scales [G][N] (sdt), g_idx [K].
//   W[o][i] = scales[g][o] * (u[i][o] - (z[g][o] + v1))   g = g_idx[i]  (exact in f32)
// v1 = 1 for checkpoint_format gptq (the off-by-one), 0 for gptq_v2. b in {2,4,8}.
// Reference: quant's GPTQ Linear.Dequantize.
EXTERN_C __global__ void dq_gptq(void *out, int odt, int N, int K, const unsigned *qweight, const unsigned *qzeros,
				 const void *scales, int sdt, const int *gidx, int b, int v1) {
	long long n = (long long)N * K;
	int per = 32 / b;
	unsigned mask = (1u << b) - 1u;
	for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n; idx += (long long)gridDim.x * blockDim.x) {
		int o = (int)(idx / K), i = (int)(idx - (long long)o * K);
		unsigned u = (qweight[(size_t)(i / per) * N + o] >> ((i % per) * b)) & mask;
		int g = gidx[i];
		unsigned z = (qzeros[(size_t)g * (N / per) + o / per] >> ((o % per) * b)) & mask;
		float s = ld_dt(scales, (size_t)g * N + o, sdt);
		st_dt(out, idx, s * (float)((int)u - ((int)z + v1)), odt);
	}
}

// dq_awq: AutoAWQ GEMM (formats.md 4). qweight I32 [K][N/8], qzeros I32
// [K/gs][N/8], scales [K/gs][N]; column 8j+c sits in nibble REV[c] of word j.
//   W[o][i] = (u[i][o] - z[i/gs][o]) * s[i/gs][o]   (exact in f32)
// Reference: quant's AWQ Linear.Dequantize.
EXTERN_C __global__ void dq_awq(void *out, int odt, int N, int K, const unsigned *qweight, const unsigned *qzeros,
				const void *scales, int sdt, int gs) {
	long long n = (long long)N * K;
	for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n; idx += (long long)gridDim.x * blockDim.x) {
		int o = (int)(idx / K), i = (int)(idx - (long long)o * K);
		int c = o & 7, nib = (c >> 1) + ((c & 1) << 2); // REV = [0,4,1,5,2,6,3,7]
		unsigned u = (qweight[(size_t)i * (N / 8) + o / 8] >> (nib * 4)) & 15u;
		int g = i / gs;
		unsigned z = (qzeros[(size_t)g * (N / 8) + o / 8] >> (nib * 4)) & 15u;
		float s = ld_dt(scales, (size_t)g * N + o, sdt);
		st_dt(out, idx, (float)((int)u - (int)z) * s, odt);
	}
}
