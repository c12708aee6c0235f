package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrUnused: a checkpoint holds tensors that the loader never opened, so
// the model that would run is not the model on disk (a smaller
// num_hidden_layers, biases of another architecture, a head replaced by a
// tied embedding).
var ErrUnused = errors.New("unused tensors")

// Usage records which tensors of a Model are opened while it is active:
// Tensor, ReadRaw, ReadFloat64 and Section mark the tensor they name (Peek
// does not). A loader starts one before binding a model and asks Unused
// afterwards; every tensor the forward pass or the format reads (weights,
// biases, scales, zero points, g_idx) has been opened by then.
type Usage struct {
	m    *Model
	mu   sync.Mutex
	used map[string]bool
}

// TrackUsage starts recording the tensors opened from m until Stop.
func (m *Model) TrackUsage() *Usage {
	u := &Usage{m: m, used: make(map[string]bool)}
	m.usageMu.Lock()
	m.usage = append(m.usage, u)
	m.usageMu.Unlock()
	return u
}

// Stop ends the recording; Unused keeps answering from what was recorded.
// It is safe to call more than once.
func (u *Usage) Stop() {
	m := u.m
	m.usageMu.Lock()
	defer m.usageMu.Unlock()
	m.usage = slices.DeleteFunc(m.usage, func(x *Usage) bool { return x == u })
}

// Unused returns the names of the checkpoint's tensors that were not
// opened, sorted.
func (u *Usage) Unused() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, n := range u.m.names {
		if !u.used[n] {
			out = append(out, n)
		}
	}
	return out
}

// Check returns nil when every tensor was opened, else an error wrapping
// ErrUnused that names the model directory and the unused tensors. what
// says who loaded the model (e.g. "reference").
func (u *Usage) Check(what string) error {
	unused := u.Unused()
	if len(unused) == 0 {
		return nil
	}
	return &UnusedError{Dir: u.m.Dir, Loader: what, Names: unused}
}

// UnusedError lists the tensors of a checkpoint that a loader did not use.
type UnusedError struct {
	Dir    string
	Loader string
	Names  []string
}

// maxListed bounds the names an UnusedError spells out.
const maxListed = 40

func (e *UnusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: %d tensor(s) of the checkpoint are not used by the %s forward pass or the quantization format, so the model evaluated would not be the model on disk (check num_hidden_layers, model_type, tie_word_embeddings in config.json; --allow-unused-tensors evaluates anyway): ",
		e.Dir, ErrUnused, len(e.Names), e.Loader)
	n := min(len(e.Names), maxListed)
	b.WriteString(strings.Join(e.Names[:n], ", "))
	if len(e.Names) > n {
		fmt.Fprintf(&b, " and %d more", len(e.Names)-n)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrUnused) hold.
func (e *UnusedError) Unwrap() error { return ErrUnused }

// mark records name as opened in every active Usage.
func (m *Model) mark(name string) {
	m.usageMu.Lock()
	defer m.usageMu.Unlock()
	for _, u := range m.usage {
		u.mu.Lock()
		u.used[name] = true
		u.mu.Unlock()
	}
}

// Peek describes a tensor like Tensor without marking it as used, for
// accounting (sizes, bits per weight) and error messages.
func (m *Model) Peek(name string) (TensorInfo, bool) {
	t, ok := m.tensors[name]
	return t, ok
}

// Ignored counts the tensors of a checkpoint under one IgnoredPrefix.
type Ignored struct {
	Prefix, What string
	Tensors      int
}

// IgnoredTensors counts the tensors of m under each prefix of ps (an
// architecture's IgnoredPrefixes), leaving out prefixes that match none.
func (m *Model) IgnoredTensors(ps []IgnoredPrefix) []Ignored {
	var out []Ignored
	for _, p := range ps {
		n := 0
		for _, name := range m.names {
			if strings.HasPrefix(name, p.Prefix) {
				n++
			}
		}
		if n > 0 {
			out = append(out, Ignored{Prefix: p.Prefix, What: p.What, Tensors: n})
		}
	}
	return out
}

// Ignore records every tensor under the prefixes of ps as accounted for,
// so that Unused does not list them: the architecture leaves them alone on
// purpose (a vision tower). It returns what was ignored (IgnoredTensors).
func (u *Usage) Ignore(ps []IgnoredPrefix) []Ignored {
	u.mu.Lock()
	for _, name := range u.m.names {
		for _, p := range ps {
			if strings.HasPrefix(name, p.Prefix) {
				u.used[name] = true
			}
		}
	}
	u.mu.Unlock()
	return u.m.IgnoredTensors(ps)
}

// String is the line loaders print: "ignored: vision tower 12 tensors (model.visual.*)".
func (g Ignored) String() string {
	return fmt.Sprintf("ignored: %s %d tensors (%s*)", g.What, g.Tensors, g.Prefix)
}
