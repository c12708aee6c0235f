// Package ggml owns ggml's tensor types as GGUF files store them: type ids,
// names, block sizes, bytes per block, bits per weight, and exact decoders
// for every supported block layout.
//
// # Exactness
//
// Dequantize computes each value exactly as ggml's dequantize_row_<type>
// (ggml/src/ggml-quants.c) computes it in float32: the same operations in
// the same order, each rounded once to float32, no fused multiply-add. The
// result is bit-identical to llama.cpp's CPU library (ggml_test.go proves
// it against libggml-base for every type, on blocks quantized by ggml and
// on arbitrary bytes). DequantizeFloat64 widens those float32 values to
// float64 for the reference backend; the widening is exact.
//
// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, TQ1_0, TQ2_0, Q1_0, Q2_0
// and the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M.
// The grid types look up codebooks that are data, not formulas (grids.go:
// ggml's published tables in a packed form, each entry checked against
// libggml's dequantizer). The other ggml type ids (Q8_1, Q8_K, the integer
// types, F64) are known by name so that errors can say what a file holds;
// decoding them is refused.
//
// BitsPerWeight is the storage cost per element, scales included, for
// bits-per-weight accounting (RowBytes gives a tensor's exact size).
//
// # Failure
//
// Nothing here panics on data. An unknown or unsupported type id is an
// error naming the tensor and the id (CheckType); a byte length that is not
// the row's exact size is an error. Decoding arbitrary bytes of the right
// length always succeeds (NaN and Inf scales give NaN and Inf values, as in
// ggml).
package ggml
