package compare

import (
	"strings"
	"testing"
)

// issue 11 item 5: 0 (or negative) is off, an interval needs at least
// MinBootstrap resamples, and MaxBootstrap bounds time and memory.
func TestCheckBootstrap(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{
		{0, true}, {-1, true}, {1, false}, {2, false}, {99, false}, {100, true}, {1000, true},
		{MaxBootstrap, true}, {MaxBootstrap + 1, false}, {100_000_000, false},
	} {
		err := CheckBootstrap(tc.n)
		if (err == nil) != tc.ok {
			t.Errorf("CheckBootstrap(%d) = %v, want ok %v", tc.n, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--bootstrap") {
			t.Errorf("CheckBootstrap(%d): %v does not name the flag", tc.n, err)
		}
	}
}

// Reduce refuses an interval of too few or too many resamples (a single
// resample gave a "95% interval" with lo = hi).
func TestReduceBootstrapBounds(t *testing.T) {
	ws := []WindowResult{
		{Index: 0, First: 1, Len: 4, NLL: []float64{1, 2, 3}},
		{Index: 1, First: 1, Len: 4, NLL: []float64{2, 4, 6}},
		{Index: 2, First: 1, Len: 4, NLL: []float64{1, 1, 2}},
	}
	for _, b := range []int{1, 99, MaxBootstrap + 1} {
		if r, err := Reduce(ws, ReduceOptions{Bootstrap: b}); err == nil {
			t.Errorf("Bootstrap %d: no error, interval %+v", b, r.PPLBootstrap)
		}
	}
	r, err := Reduce(ws, ReduceOptions{Bootstrap: MinBootstrap})
	if err != nil || r.PPLBootstrap == nil || r.PPLBootstrap.Samples != MinBootstrap || !(r.PPLBootstrap.Lo < r.PPLBootstrap.Hi) {
		t.Errorf("Bootstrap %d: %v %+v", MinBootstrap, err, r.PPLBootstrap)
	}
	if r, err := Reduce(ws, ReduceOptions{Bootstrap: -1}); err != nil || r.PPLBootstrap != nil {
		t.Errorf("Bootstrap -1: %v %+v", err, r.PPLBootstrap)
	}
}
