// Package arch describes the supported decoder architectures (llama,
// mistral, qwen2, qwen3) as data: Hugging Face tensor names per layer,
// options (biases, q/k norms, tied head, RoPE scaling) and probe-point names
// shared by the backends and verify.
//
// CONTRACT SKELETON: the exported names below are used by other packages.
// The owner of this package may add to them but must keep these signatures.
package arch

import (
	"errors"

	"github.com/qppl/qppl/checkpoint"
)

// Spec is one model's architecture resolved from its config.
type Spec struct {
	Config   *checkpoint.Config
	Name     string // model_type
	HeadDim  int
	QKVBias  bool // qwen2, or attention_bias
	QKNorm   bool // qwen3
	TiedHead bool
}

// For resolves the architecture of cfg or says why it is unsupported.
func For(cfg *checkpoint.Config) (*Spec, error) { return nil, errors.New("arch: not implemented yet") }

// Probe sites (Point.Site values), in forward order within a layer.
const (
	SiteEmbed     = "embed"      // layer -1: token embeddings
	SiteAttnNorm  = "attn_norm"  // input_layernorm output
	SiteAttnOut   = "attn_out"   // o_proj output
	SiteMLPNorm   = "mlp_norm"   // post_attention_layernorm output
	SiteMLPOut    = "mlp_out"    // down_proj output
	SiteLayerOut  = "layer_out"  // residual stream after the layer
	SiteFinalNorm = "final_norm" // layer -1: model.norm output
)
