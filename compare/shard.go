package compare

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is one part of a run split across processes or machines: shard I
// of N evaluates the windows whose Index % N == I (--shard I/N). The
// assignment depends only on the window index, so the union of all shards'
// WindowResults reduces to the unsharded Result bit for bit.
type Shard struct{ I, N int }

// ParseShard parses "I/N" (0 <= I < N); "" is the whole run (0/1).
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{0, 1}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return Shard{i, n}, nil
}

// Has reports whether the shard evaluates window index.
func (s Shard) Has(index int) bool { return s.N <= 1 || index%s.N == s.I }

// SkipFunc returns a Runner.Skip that leaves out the windows already in
// done (resuming from a journal) and those outside shard s.
func SkipFunc(done []WindowResult, s Shard) func(int) bool {
	seen := make(map[int]bool, len(done))
	for _, w := range done {
		seen[w.Index] = true
	}
	return func(i int) bool { return seen[i] || !s.Has(i) }
}
