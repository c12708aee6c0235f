// Package cuda is qppl's fast backend: one forward pass of the Hugging Face
// causal LM (every family package arch declares) orchestrated in Go over the small
// device.Device interface, so the same code path drives a real GPU (package
// backends/cuda/gpu, build tag cuda) and the CPU emulator that runs the very
// same kernel sources (package backends/cuda/emu, default build).
//
// Layout. Weights stay packed on the device exactly as stored in the
// checkpoint (package quant decides the format; each Linear's packed
// tensors are uploaded byte for byte, scales in their stored dtype, by the
// format's own file dq_<format>.go, which also launches its kernel
// kernels/dq_<format>.cu; weights.go's dequantizers lists them). When a
// Linear runs, a dequantization kernel writes it into one per-device
// scratch buffer in the GEMM dtype (bf16 by default, --precision fp16|fp32),
// and a GEMM with fp32 accumulation multiplies it with the activations
// (cuBLAS GemmEx on the GPU); q|k|v and gate|up run as one GEMM each when
// their weights share a format (fuse.go). Each decoder layer's tensors live
// in one device allocation (an arena, arena.go). Attention is two strided
// batched GEMMs around a causal-softmax kernel (attention.go: tensor cores
// on a GPU). The residual stream, norms, RoPE, attention statistics and
// the final log-softmax are fp32. The final step is fused
// (kernel logits_stats): log-sum-exp, the target's NLL, KL against base
// log-probs and top-k never leave the device as logits; a PPL run copies 4
// bytes per scored token back (8 with top-1, +4 with KL).
//
// Multi-device: layers are assigned in order to the devices by memory
// (Options.SplitGB or free memory), the hidden state moves between devices
// through the host; the memory plan is printed before anything is allocated
// and a model that does not fit is an error naming the shortfall.
//
// Every kernel names the reference function it must equal (kernels/*.cu);
// emulator tests check each kernel against a float64 computation and the
// whole backend against package reference on fixtures of every architecture
// and quantization scheme (tolerances in docs/cuda.md).
//
// Errors: bad windows, token ids outside the vocabulary, a window longer
// than Options.MaxTokens whose grown buffers do not fit (the backend is then
// unusable and says so), a window too long for the elementwise kernels'
// 32-bit indexing, unsupported formats and device failures are returned as
// errors naming the window, module or device; nothing panics on data.
package cuda
