package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Tensor, ReadRaw, ReadFloat64 and Section mark a tensor as used; Peek,
// Names and TotalBytes do not; Stop ends the recording; recorders are
// independent.
func TestUsageTracking(t *testing.T) {
	dir := t.TempDir()
	ts := []WriteTensor{
		{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 8)},
		{Name: "b", DType: F32, Shape: []int{2}, Data: make([]byte, 8)},
		{Name: "c", DType: F32, Shape: []int{2}, Data: make([]byte, 8)},
		{Name: "d", DType: F32, Shape: []int{2}, Data: make([]byte, 8)},
		{Name: "e", DType: F32, Shape: []int{2}, Data: make([]byte, 8)},
	}
	if err := WriteFile(filepath.Join(dir, SafetensorsFile), ts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tinyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Tensor("x") // not in the checkpoint: no effect
	before := m.TrackUsage()
	u := m.TrackUsage()
	m.Peek("e")
	m.Names()
	m.TotalBytes()
	if _, ok := m.Tensor("a"); !ok {
		t.Fatal("no tensor a")
	}
	before.Stop()
	if _, err := m.ReadRaw("b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.ReadFloat64("c"); err != nil {
		t.Fatal(err)
	}
	if got, want := u.Unused(), []string{"d", "e"}; !slices.Equal(got, want) {
		t.Errorf("Unused %v, want %v", got, want)
	}
	if got, want := before.Unused(), []string{"b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("stopped recorder: Unused %v, want %v", got, want)
	}
	err = u.Check("test")
	var ue *UnusedError
	if !errors.Is(err, ErrUnused) || !errors.As(err, &ue) || !slices.Equal(ue.Names, []string{"d", "e"}) ||
		!strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "d, e") || !strings.Contains(err.Error(), "--allow-unused-tensors") {
		t.Errorf("Check: %v", err)
	}
	if _, err := m.Section("d"); err != nil {
		t.Fatal(err)
	}
	m.Tensor("e")
	if err := u.Check("test"); err != nil {
		t.Errorf("all used: %v", err)
	}
	u.Stop()
	u.Stop()
}

// A long list is cut after maxListed names with a count of the rest.
func TestUnusedErrorLong(t *testing.T) {
	var names []string
	for i := range maxListed + 5 {
		names = append(names, "t"+strings.Repeat("x", i))
	}
	msg := (&UnusedError{Dir: "m", Loader: "reference", Names: names}).Error()
	if !strings.Contains(msg, "45 tensor(s)") || !strings.HasSuffix(msg, " and 5 more") {
		t.Errorf("message %q", msg)
	}
}
