package quant

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// Fused 3-D experts. transformers ≥ 5 holds a mixture of experts as two
// parameters per layer (Qwen3MoeExperts, Qwen3_5MoeExperts,
// Gemma4TextExperts; core_model_loading's MergeModulelist + Concatenate(dim=1)
// in conversion_mapping.py for the families whose releases store one
// Linear per expert):
//
//	<block>.experts.gate_up_proj [E, 2·I, hidden]  expert e: gate rows [0, I), up rows [I, 2·I)
//	<block>.experts.down_proj    [E, hidden, I]
//
// (no ".weight" suffix: they are nn.Parameters of the experts module), and
// BF16 releases store them so (Gemma 4, Qwen3.5 MoE). Open reads expert e's
// <block>.experts.{e}.{gate,up,down}_proj module — the per-expert layout of
// quantized checkpoints — from these tensors when the checkpoint has no
// per-expert tensors for it: a dense Linear holding only that expert's
// rows, read from the file on its own (never the whole 3-D tensor), its
// StoredBytes that slice's bytes (so bpw counts each expert as stored).

// expertModuleRE matches a per-expert module: the experts module, the
// expert index and the projection.
var expertModuleRE = regexp.MustCompile(`^(.+\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)$`)

// sectioner is a Source that reads part of a tensor (checkpoint.Model).
type sectioner interface {
	Section(name string) (*io.SectionReader, error)
}

// fusedExpertOf returns the fused tensor, the expert, and the rows of the
// expert's slice that hold module, when module is a per-expert projection
// whose own tensors are absent and whose fused tensor src holds; ok false
// otherwise.
func fusedExpertOf(src Source, module string) (tensor string, e, r0, rows int, ok bool) {
	g := expertModuleRE.FindStringSubmatch(module)
	if g == nil {
		return "", 0, 0, 0, false
	}
	info := src.Tensor
	if pk, isPeeker := src.(peeker); isPeeker {
		info = pk.Peek
	}
	for _, s := range append([]string{"weight"}, linearMarkers()...) {
		if _, has := info(module + "." + s); has {
			return "", 0, 0, 0, false
		}
	}
	tensor = g[1] + ".gate_up_proj"
	if g[3] == "down_proj" {
		tensor = g[1] + ".down_proj"
	}
	if isGptOssExperts(src, tensor) {
		return "", 0, 0, 0, false
	}
	ti, has := info(tensor)
	if !has || len(ti.Shape) != 3 {
		return "", 0, 0, 0, false
	}
	e, err := strconv.Atoi(g[2])
	if err != nil {
		return "", 0, 0, 0, false
	}
	switch g[3] {
	case "gate_proj":
		r0, rows = 0, ti.Shape[1]/2
	case "up_proj":
		r0, rows = ti.Shape[1]/2, ti.Shape[1]/2
	default:
		r0, rows = 0, ti.Shape[1]
	}
	return tensor, e, r0, rows, true
}

// openFusedExpert opens module from its fused tensor (see fusedExpertOf).
func openFusedExpert(src Source, module, tensor string, e, r0, rows int) (*Dense, error) {
	ti, _ := src.Tensor(tensor) // marks the fused tensor used
	dt := string(ti.DType)
	sz := dtypeSize(dt)
	switch dt {
	case "F32", "F16", "BF16", "F64":
	default:
		return nil, fmt.Errorf("%s: tensor %s: dtype %s: fused experts are read as F32, F16, BF16 or F64 (a quantized checkpoint stores one Linear per expert: %s.weight)", ti.File, tensor, dt, module)
	}
	E, R, C := ti.Shape[0], ti.Shape[1], ti.Shape[2]
	if E <= 0 || R <= 0 || C <= 0 || (strings.HasSuffix(tensor, ".gate_up_proj") && R%2 != 0) {
		return nil, fmt.Errorf("%s: tensor %s: shape %v is not [experts, rows, cols] (gate_up_proj: 2·I rows)", ti.File, tensor, ti.Shape)
	}
	if numel(ti.Shape)*int64(sz) != ti.Size {
		return nil, fmt.Errorf("%s: tensor %s: size %d bytes does not match dtype %s shape %v", ti.File, tensor, ti.Size, dt, ti.Shape)
	}
	if e >= E {
		return nil, fmt.Errorf("%s: module %s: expert %d of a fused tensor %s of %d experts", ti.File, module, e, tensor, E)
	}
	n := rows * C * sz
	off := int64((e*R+r0)*C) * int64(sz)
	raw := make([]byte, n)
	if sec, ok := src.(sectioner); ok {
		r, err := sec.Section(tensor)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", module, err)
		}
		if got, err := r.ReadAt(raw, off); got != n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%s: tensor %s: reading expert %d rows [%d, %d): %w", ti.File, tensor, e, r0, r0+rows, err)
		}
	} else {
		all, err := src.ReadRaw(tensor)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", module, err)
		}
		if int64(len(all)) != ti.Size {
			return nil, fmt.Errorf("%s: tensor %s: read %d bytes, want %d", ti.File, tensor, len(all), ti.Size)
		}
		copy(raw, all[off:off+int64(n)])
	}
	return &Dense{DType: dt, Raw: raw, Base: Base{Name: module, Out: rows, In: C, Fmt: strings.ToLower(dt),
		Bytes: int64(n), FileName: ti.File}}, nil
}

// fusedExpertModules returns the per-expert modules that src's fused
// expert tensors hold (for bpw): <block>.experts.{e}.gate_proj and up_proj
// of each gate_up_proj, down_proj of each down_proj.
func fusedExpertModules(src Source) []string {
	var out []string
	for _, name := range src.Names() {
		base, proj, ok := strings.Cut(name, ".experts.")
		if !ok || (proj != "gate_up_proj" && proj != "down_proj") {
			continue
		}
		ti, ok := src.Tensor(name)
		if !ok || len(ti.Shape) != 3 || isGptOssExperts(src, name) {
			continue
		}
		for e := 0; e < ti.Shape[0]; e++ {
			p := fmt.Sprintf("%s.experts.%d.", base, e)
			if proj == "down_proj" {
				out = append(out, p+"down_proj")
			} else {
				out = append(out, p+"gate_proj", p+"up_proj")
			}
		}
	}
	return out
}

// ensure checkpoint.Model can be read by sections.
var _ sectioner = (*checkpoint.Model)(nil)
