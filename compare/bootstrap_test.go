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
