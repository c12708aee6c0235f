// Package arch describes the supported decoder architectures (llama,
// mistral, qwen2, qwen3) as data: Hugging Face tensor names per layer,
// options (q/k/v biases, per-head q/k norms, tied head, RoPE scaling), the
// RoPE inverse frequencies, and the probe-point names shared by the backends
// and verify.
//
// The four architectures are one decoder (RMSNorm → GQA attention with
// rotate-half RoPE → residual → RMSNorm → SiLU-gated MLP → residual) that
// differ only in data: qwen2 adds q/k/v biases, qwen3 adds RMSNorm over each
// head of q and k before RoPE and takes head_dim from config.json, mistral is
// llama with its own defaults. For returns an error (wrapping
// ErrUnsupported) for anything it cannot describe exactly: an unknown
// model_type, an activation other than SiLU, llama's mlp_bias, a RoPE
// scaling type other than default/linear/llama3. A sliding attention
// window is recorded; Spec.CheckContext rejects contexts longer than it.
// RopeInvFreq is computed in float64; CheckDense and CheckTensor read only
// headers, never tensor data.
package arch
