package gguf_test

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gguf"
)

// TestRowOrder: gguf.Linear.RowOrder (how the CUDA backend reorders stored
// rows) is the map Dequantize applies (Unpermute): stored row RowOrder()[i]
// holds Hugging Face row i of q_proj and k_proj of a llama file, and
// RowOrder is nil where nothing is permuted (v_proj; qwen2).
func TestRowOrder(t *testing.T) {
	for _, c := range []struct {
		arch, module string
		permuted     bool
	}{
		{"llama", "model.layers.0.self_attn.q_proj", true},
		{"llama", "model.layers.1.self_attn.k_proj", true},
		{"llama", "model.layers.0.self_attn.v_proj", false},
		{"qwen2", "model.layers.0.self_attn.q_proj", false},
	} {
		m, err := gguf.OpenModel(convert(t, writeFixture(t, c.arch, nil), gguf.F32), gguf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ql, err := m.Linear(c.module)
		if err != nil {
			t.Fatal(err)
		}
		l := ql.(*gguf.Linear)
		out, in := l.Shape()
		hf := make([]float64, out*in)
		if err := l.Dequantize(hf); err != nil {
			t.Fatal(err)
		}
		raw, err := l.Raw()
		if err != nil {
			t.Fatal(err)
		}
		rows := l.RowOrder()
		if (rows != nil) != c.permuted {
			t.Fatalf("%s %s: RowOrder %v, want permuted %v", c.arch, c.module, rows, c.permuted)
		}
		for i := range out {
			r := i
			if rows != nil {
				r = rows[i]
			}
			for k := range in {
				if v := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(r*in+k):]))); v != hf[i*in+k] {
					t.Fatalf("%s %s: row %d col %d: stored row %d holds %v, Dequantize %v", c.arch, c.module, i, k, r, v, hf[i*in+k])
				}
			}
		}
		if rows != nil && slices.Equal(rows, identity(out)) {
			t.Errorf("%s %s: RowOrder is the identity", c.arch, c.module)
		}
		m.Close()
	}
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestUsage: gguf.Usage records the tensors read while it is active and
// names the others (wrapping checkpoint.ErrUnused); rope_freqs and tensors
// read before it started do not count as unread twice.
func TestUsage(t *testing.T) {
	m, err := gguf.OpenModel(convert(t, writeFixture(t, "qwen2", nil), gguf.F32), gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	u := m.TrackUsage()
	if _, err := m.Linear("model.layers.0.self_attn.q_proj"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Float64("model.layers.0.self_attn.q_proj.bias"); err != nil {
		t.Fatal(err)
	}
	u.Stop()
	if _, _, err := m.Float64("model.norm.weight"); err != nil { // after Stop: not recorded
		t.Fatal(err)
	}
	un := u.Unused()
	if len(un) != len(m.TensorNames())-2 || slices.Contains(un, "blk.0.attn_q.weight") || slices.Contains(un, "blk.0.attn_q.bias") || !slices.Contains(un, "output_norm.weight") {
		t.Errorf("unused %v", un)
	}
	err = u.Check("emu")
	if !errors.Is(err, checkpoint.ErrUnused) || !strings.Contains(err.Error(), "emu") || !strings.Contains(err.Error(), "output_norm.weight") {
		t.Errorf("Check: %v", err)
	}
}
