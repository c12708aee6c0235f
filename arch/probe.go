package arch

// Probe sites (Point.Site values), in forward order within a layer.
const (
	SiteEmbed     = "embed"      // layer -1: token embeddings
	SiteAttnNorm  = "attn_norm"  // input_layernorm output
	SiteAttnOut   = "attn_out"   // o_proj output
	SiteMLPNorm   = "mlp_norm"   // post_attention_layernorm output
	SiteMLPOut    = "mlp_out"    // down_proj output
	SiteLayerOut  = "layer_out"  // residual stream after the layer
	SiteFinalNorm = "final_norm" // layer -1: model.norm output
	// SiteRouter is a mixture-of-experts layer's router logits [T][experts]
	// (not a hidden state, so not in LayerSites): qppl verify compares the
	// two backends' top-k choices with it (compare/verify, routing flips).
	SiteRouter = "router_logits"
	// The keys (after RoPE and k-norm) and values entering the KV cache,
	// before any KV cache quantization; reference backend only (KV cache
	// calibration), not in LayerSites.
	SiteKCache = "k_cache"
	SiteVCache = "v_cache"
)

// LayerSites returns the per-layer probe sites in forward order.
func LayerSites() []string {
	return []string{SiteAttnNorm, SiteAttnOut, SiteMLPNorm, SiteMLPOut, SiteLayerOut}
}
