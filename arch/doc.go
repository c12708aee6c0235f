// Package arch describes the supported decoder families as data, one
// declaration per family (llama.go, mistral.go, qwen2.go, qwen3.go,
// qwen3_moe.go, mixtral.go, phi3.go; listed by Families, whose names are the only list of supported model_type
// values in qppl): the transformers config defaults and quirks applied when
// config.json is parsed (ParseConfig, Resolve, OpenDir), which optional
// weights exist (q/k/v and o biases, per-head q/k norms, tied head), the
// Hugging Face tensor names per layer (Spec.Layer, Spec.LayerLinears indexed
// by Proj, which both backends use to name each layer weight), the RoPE
// inverse frequencies, the probe-point names shared by the backends and
// verify, and the small realistic checkpoint each family's fixture writes.
//
// The four families are one decoder (RMSNorm → GQA attention with
// rotate-half RoPE → residual → RMSNorm → SiLU-gated MLP → residual) that
// differ only in data: qwen2 adds q/k/v biases, qwen3 adds RMSNorm over each
// head of q and k before RoPE and takes head_dim from config.json, mistral is
// llama with its own defaults. qwen3_moe and mixtral replace the MLP of
// their sparse layers by a mixture of experts (Config.MoE: a router Linear,
// softmax, top-k with ties as torch.topk's CPU kernel leaves them, optional
// renormalisation, the weighted sum of the chosen SiLU-gated experts),
// named by the family's MoENames; phi3 fuses q/k/v into qkv_proj and
// gate/up into gate_up_proj (Layout.FusedQKV, FusedGateUp). For returns an error (wrapping
// ErrUnsupported) for anything it cannot describe exactly: an unknown
// model_type, an activation other than SiLU, llama's mlp_bias, a RoPE
// scaling type other than default/linear/llama3. Sliding attention
// windows are per layer (Spec.Window).
// Config errors wrap checkpoint.ErrConfig and name the file and key.
// RopeInvFreq is computed in float64; CheckDense and CheckTensor read only
// headers, never tensor data.
package arch
