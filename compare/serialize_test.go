package compare

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestWindowResultBinaryRoundTrip(t *testing.T) {
	ws := []WindowResult{
		{Index: 7, First: 2, Len: 5, NLL: []float64{0.1, math.SmallestNonzeroFloat64, 3}},
		{Index: 1 << 33, First: 1, Len: 4, NLL: []float64{1, 2, 3}, Top1: []int32{5, -1, 7},
			KL: []float64{-1e-12, 0.5, 2, 1e300}, BaseNLL: []float64{0.9, 2.1, 3.3}, BaseTop1: []int32{5, 6, 7}, TopKOverlap: []int32{1, 2, 3}},
		{Index: 0, First: 3, Len: 3, NLL: []float64{}},
	}
	for _, w := range ws {
		b, err := w.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got WindowResult
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("round trip:\n%+v\n%+v", got, w)
		}
		// Every truncation and a trailing byte are rejected, never a panic.
		for n := 0; n < len(b); n++ {
			if err := got.UnmarshalBinary(b[:n]); err == nil {
				t.Errorf("window %d: truncated to %d bytes accepted", w.Index, n)
			}
		}
		if err := got.UnmarshalBinary(append(b, 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
			t.Errorf("trailing byte: %v", err)
		}
	}
	bad := []byte{1, 0, 1, 2, 0x80}
	var w WindowResult
	if err := w.UnmarshalBinary(bad); err == nil || !strings.Contains(err.Error(), "flags") {
		t.Errorf("bad flags: %v", err)
	}
}

func FuzzWindowResultUnmarshal(f *testing.F) {
	w := WindowResult{Index: 3, First: 1, Len: 3, NLL: []float64{1, 2}, Top1: []int32{1, 2}, KL: []float64{0, 0}, BaseNLL: []float64{1, 1}, BaseTop1: []int32{1, 2}}
	b, _ := w.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var w WindowResult
		if w.UnmarshalBinary(data) == nil {
			b, err := w.MarshalBinary()
			var again WindowResult
			if err != nil || again.UnmarshalBinary(b) != nil || !reflect.DeepEqual(again, w) {
				t.Errorf("accepted record does not survive a round trip: %v", err)
			}
		}
	})
}

// OpenStore never panics and never accepts a file whose records do not
// fit; an accepted file's windows decode without error.
func FuzzOpenStore(f *testing.F) {
	f.Add([]byte("_logits_\x04\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00" + strings.Repeat("\x00", 16+1*10)))
	f.Add([]byte(`QPPLLOGP` + "\x5a\x00\x00\x00" + `{"version":1,"container":"qppl","encoding":"f32","vocab":1,"kl_mode":"scored","windows":[{"index":0,"first":1,"len":2,"positions":1}]}` + "\x00\x00\x80\xbf"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := dir + "/s"
		if err := writeFile(p, data); err != nil {
			t.Skip()
		}
		s, err := OpenStore(p)
		if err != nil {
			return
		}
		defer s.Close()
		h := s.Header()
		dst := make([]float64, h.Vocab)
		for _, w := range h.Windows {
			lp := &StoreLogProbs{s: s, win: w, off: s.offs[w.Index]}
			for i := 0; i < w.Positions; i++ {
				if err := lp.LogProbs(i, dst); err != nil {
					t.Fatalf("accepted store fails to read window %d position %d: %v", w.Index, i, err)
				}
			}
		}
	})
}
