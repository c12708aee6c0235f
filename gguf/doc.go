// Package gguf reads and writes llama.cpp's GGUF model files and presents
// a GGUF model as the Hugging Face checkpoint it was converted from.
//
// # Format
//
// A GGUF file (versions 2 and 3; v1 and big-endian files are refused) is
// the magic "GGUF", a version, a tensor count and a metadata count (uint64),
// the metadata key/value pairs (13 value types, arrays nested to any depth
// up to MaxArrayDepth), one tensor info per tensor (name, 1–4 ggml
// dimensions ne with ne[0] innermost, ggml type id, offset), padding to
// general.alignment (default 32), then the tensor data. Open validates
// everything before handing out a File: every count and length is checked
// against the bytes left in the file before anything is allocated from it
// (and strings against MaxStringLen, the header against MaxHeaderBytes);
// products and sums cannot overflow; every type id is known with its block
// size and bytes per block; ne[0] is a whole number of blocks; every tensor
// lies inside the data section at an aligned offset without overlapping
// another. Tensor data is read on demand through io.ReaderAt.
//
// Split models (PREFIX-00001-of-00003.gguf) are opened from any part:
// OpenModel opens every part and checks split.no, split.count and
// split.tensors.count.
//
// # Model
//
// OpenModel maps general.architecture and the <arch>.* hyperparameters
// onto a checkpoint.Config (parsed by arch.ParseConfig, so defaults and
// checks are the safetensors ones) and an arch.Spec. Each architecture is
// declared once (Arch, in arch_<name>.go; archs lists them: llama, with
// Mistral-family files written as llama and Mixtral as llama with experts,
// qwen2, qwen3, qwen3moe, phi3); tensors are
// addressed by their Hugging Face names through the declaration's tensor
// table (token_embd, blk.N.attn_q, ..., output_norm, output; a missing
// output.weight is a tied head; an expert's weight is its slice of a
// stacked ffn_*_exps tensor). Every
// tensor in the file must be used. float32 hyperparameters (RMS epsilon,
// RoPE base) are read as the shortest decimal that rounds to them, the value
// the converter was given. For llama files (Arch.PermuteQK) the rows of attn_q and attn_k
// are un-permuted (Unpermute) so that the reference computes the Hugging
// Face model's logits with rotate-half RoPE; qwen2/qwen3 files are not
// permuted. llama3 RoPE scaling is stored by llama.cpp as rope_freqs.weight:
// it is applied as llama.cpp does, or exactly as transformers does when
// qppl's RopeScalingKey reproduces the tensor (see RopeScalingKey).
//
// # Types
//
// Every weight is decoded to float32 exactly as ggml's dequantize_row_<type>
// does, then widened to float64. PlainDecoder decodes F32, F16 and BF16;
// the block types (Q4_0 … Q6_K, IQ*, MXFP4) come from a Decoder supplied in
// Options. A tensor of a type without decoder fails when read, naming the
// tensor and type.
//
// # Usage
//
// TrackUsage records which tensors a backend reads (Linear, Float64, Rows,
// Raw); reference.NewGGUF and cuda.NewGGUF refuse to run when one was not
// read, as they do for checkpoints (checkpoint.ErrUnused).
//
// # Tokenizer
//
// TokenizerJSON rebuilds the Hugging Face tokenizer.json from the
// tokenizer.ggml.* metadata of a byte-level BPE ("gpt2") whose
// tokenizer.ggml.pre label names a pipeline known exactly (gpt-2,
// llama-bpe, qwen2, smollm; tokenizer.go); everything else is refused,
// asking for the original tokenizer.json.
//
// # Writing
//
// Write writes a GGUF v3 file; Convert and ConvertFile turn a dense
// checkpoint into an F32 or F16 GGUF file as llama.cpp's
// convert_hf_to_gguf.py does (names, metadata, Q/K permutation, tokenizer
// metadata), loadable by libllama.
//
// # Failures
//
// Every error names the file and the field or tensor and wraps ErrFormat
// (malformed or lying file), ErrUnsupported (valid but not evaluable:
// unknown type id, architecture, RoPE scaling) or checkpoint.ErrNotFound.
// Nothing read from a file causes a panic.
package gguf
