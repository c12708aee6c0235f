package gguf

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/qppl/qppl/checkpoint"
)

// Usage records which tensors of a Model a backend reads while it is
// active (Linear, Float64, Rows and Raw mark the tensor they open), as checkpoint.Usage does for safetensors checkpoints.
// OpenModel already refuses a tensor the architecture does not use; Usage
// checks that the backend really read every one (a loader that forgot a
// bias or a norm would otherwise compute another model).
type Usage struct {
	m    *Model
	mu   sync.Mutex
	used map[string]bool
}

// TrackUsage starts recording the tensors read from m until Stop.
// rope_freqs.weight, read by OpenModel itself, counts as read.
func (m *Model) TrackUsage() *Usage {
	u := &Usage{m: m, used: map[string]bool{ropeFreqsName: true}}
	m.usageMu.Lock()
	m.usage = append(m.usage, u)
	m.usageMu.Unlock()
	return u
}

// Stop ends the recording; Unused keeps answering from what was recorded.
// It is safe to call more than once.
func (u *Usage) Stop() {
	u.m.usageMu.Lock()
	defer u.m.usageMu.Unlock()
	u.m.usage = slices.DeleteFunc(u.m.usage, func(x *Usage) bool { return x == u })
}

// Unused returns the GGUF names of the tensors that were not read, sorted.
func (u *Usage) Unused() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for n := range u.m.tensors {
		if !u.used[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Check returns nil when every tensor was read, else an error wrapping
// checkpoint.ErrUnused that names the file, the loader (what) and the
// unread tensors.
func (u *Usage) Check(what string) error {
	unused := u.Unused()
	if len(unused) == 0 {
		return nil
	}
	n := min(len(unused), 40)
	more := ""
	if len(unused) > n {
		more = fmt.Sprintf(" and %d more", len(unused)-n)
	}
	return fmt.Errorf("%s: %w: %d tensor(s) of the GGUF file are not read by the %s backend, so the model evaluated would not be the model on disk: %s%s",
		u.m.Path, checkpoint.ErrUnused, len(unused), what, strings.Join(unused[:n], ", "), more)
}

// mark records a GGUF tensor name as read in every active Usage.
func (m *Model) mark(name string) {
	m.usageMu.Lock()
	defer m.usageMu.Unlock()
	for _, u := range m.usage {
		u.mu.Lock()
		u.used[name] = true
		u.mu.Unlock()
	}
}
