package quant

import (
	"encoding/json"
	"slices"

	"github.com/qppl/qppl/checkpoint"
)

// family is everything the rest of the package needs to know about one
// format family: which configs it parses, which weight arguments it
// accepts, which tensors mark its Linears and how it opens one. Each
// family's types, parsing, validation and exact decoding live in one file
// (named in its entry); families below is the only list of them.
type family struct {
	name string // as used in messages, e.g. "GPTQ", "nvfp4"

	// Families with their own quant_method (GPTQ, AWQ, fp8): the method
	// value (lower case), the config parser that fills the Scheme, and the
	// tensor suffixes whose presence marks one of their Linears.
	method  string
	aliases []string // other quant_method values naming this family
	parse   func(s *Scheme, top map[string]json.RawMessage) error
	markers []string
	// sideFiles are the files beside config.json (one of
	// checkpoint.QuantizationSideFiles) that hold this family's settings
	// when config.json has none; claims, when set, decides from a file's
	// keys whether it is this family's (a file without quant_method).
	sideFiles []string
	claims    func(top map[string]json.RawMessage) bool

	// compressed-tensors families: the format values whose weight
	// arguments this family validates (checkArgs), the format values it
	// decodes, and accepts, which picks it among the families decoding the
	// same format by the stored weight's dtype (nil: always).
	argFormats []string
	checkArgs  func(a *Args, format string) error
	ctFormats  []string
	accepts    func(w *Args, weight checkpoint.TensorInfo) bool

	// open decodes module t; g is its config group (compressed-tensors
	// only, nil otherwise).
	open func(s *Scheme, t tensors, g *Group) (Linear, error)
}

// families returns the format families in matching order (a function, not
// a package variable, so that nothing can change how checkpoints decode).
func families() []family {
	return []family{
		denseFamily(),     // dense.go
		ctPackFamily(),    // ctpack.go: pack-quantized int
		ctIntFamily(),     // ctint.go: int-quantized (W8A8) I8 codes
		fp8Family(),       // fp8.go: float-quantized / naive-quantized FP8
		nvfp4Family(),     // nvfp4.go
		mxfp4Family(),     // mxfp4.go
		gptqFamily(),      // gptq.go
		awqFamily(),       // awq.go
		fp8MethodFamily(), // finegrainedfp8.go: quant_method fp8 (fine-grained block FP8, AutoFP8)
		modelOptFamily(),  // modelopt.go: NVIDIA ModelOpt NVFP4 and FP8
		bnbFamily(),       // bnb.go: bitsandbytes 4-bit NF4/FP4 (double quant) and LLM.int8
		autoRoundFamily(), // autoround.go: Intel AutoRound (GPTQ/AWQ/native packing)
		// gptoss.go: quant_method mxfp4 (gpt-oss's MXFP4 experts)
		mxfp4MethodFamily(),
	}
}

// methodFamily returns the family whose own quant_method is m.
func methodFamily(m string) (family, bool) {
	for _, f := range families() {
		if f.method != "" && (f.method == m || slices.Contains(f.aliases, m)) {
			return f, true
		}
	}
	return family{}, false
}

// ctFormatKnown reports whether some family decodes compressed-tensors
// format f.
func ctFormatKnown(f string) bool {
	for _, fam := range families() {
		if slices.Contains(fam.ctFormats, f) {
			return true
		}
	}
	return false
}

// linearMarkers returns the tensor suffixes that mark a Linear module
// ("weight" counts only when the tensor is 2-D).
func linearMarkers() []string {
	m := []string{"weight", "weight_packed"}
	for _, f := range families() {
		for _, k := range f.markers {
			if !slices.Contains(m, k) {
				m = append(m, k)
			}
		}
	}
	return m
}

// ctTensor reports whether suffix is a tensor compressed-tensors layouts
// also use, so that its presence does not identify another family.
func ctTensor(suffix string) bool {
	switch suffix {
	case "weight", "weight_packed", "weight_scale":
		return true
	}
	return false
}
