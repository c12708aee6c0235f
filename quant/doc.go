// Package quant parses quantization_config, describes how each Linear of a
// checkpoint is stored, decodes packed weights exactly to float64 and
// accounts bits per weight. It implements ../shared/specs/formats.md.
//
// # Layout
//
// Parse/ParseJSON turn config.json's quantization_config (or the legacy
// compression_config) into a Scheme. Scheme.Open (and Scheme.Linear for a
// *checkpoint.Model) decides each module's decoder from the tensors present
// (a family's marker tensor such as qweight under its quant_method;
// weight_packed or weight+weight_scale → compressed-tensors with the group
// that targets the module; weight alone → Dense) and returns one small
// concrete type per format: Dense, PackedInt, UnpackedInt, FP8, NVFP4,
// MXFP4, GPTQ, AWQ. Their exported fields hold the packed data as stored
// (kept packed in memory) plus exactly decoded scales, so other backends
// (the CUDA kernels) can upload them as they are.
//
// A format lives in one file: its type, config parsing (for formats with
// their own quant_method), argument checks, tensor validation and exact
// decoding (dense.go, ctpack.go, ctint.go, fp8.go, nvfp4.go, mxfp4.go,
// gptq.go, awq.go). formats.go's families table is the one list of them;
// config.go (compressed-tensors config_groups), ct_open.go (routing a
// compressed-tensors module to its family), linear.go (Open), tensors.go
// (reading and checking tensors) and inspect.go (bits per weight) consult
// it and know no format by name.
//
// Dequantize writes the exact weight: every value is a float64 that the
// spec's formula produces, including the rounding to the scale dtype that
// compressed-tensors applies (RoundDType). ActQuant implements the run-time
// activation quantizers of formats.md §8.2 in float64. Inspect computes
// compare_q's bits-per-weight figures.
//
// # Failure
//
// Nothing here panics on data: every malformed config or tensor (unknown
// format or strategy, transform_config, sparse formats, wrong packed width,
// g_idx out of range or unbalanced, group size not dividing, NaN/Inf/zero
// scales, missing tensors, shape mismatches) is an error naming the file or
// module and tensor. Lengths come from validated tensor headers and are
// checked against dtype and shape before decoding.
package quant
