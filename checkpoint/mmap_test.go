//go:build linux || darwin

package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// faults reports whether f faults (a read or write of an inaccessible or
// read-only address), with faults turned into panics for the call.
func faults(f func()) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	f()
	return false
}

// TestMappedTensors: a model opened by OpenDir hands out its tensors from a
// read-only mapping: the bytes equal those read through io.ReaderAt, a write
// into them faults instead of changing what the next reader sees, and after
// Close an old slice faults instead of reading whatever the addresses hold.
func TestMappedTensors(t *testing.T) {
	dir := writeDir(t, false)
	m, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.files[0].mapped == nil {
		t.Fatal("model.safetensors was not mapped")
	}
	fh, err := os.Open(filepath.Join(dir, SafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	plain, err := Open(fh, st.Size(), fh.Name())
	if err != nil {
		t.Fatal(err)
	}
	var held [][]byte
	for _, name := range m.Names() {
		got, err := m.ReadRaw(name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.ReadRaw(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || cap(got) != len(want) {
			t.Errorf("%s: mapped % x (cap %d), read % x", name, got, cap(got), want)
		}
		v, _, err := m.ReadFloat64(name)
		w, _, err2 := plain.ReadFloat64(name)
		if (err == nil) != (err2 == nil) || len(v) != len(w) {
			t.Errorf("%s: ReadFloat64 %v %v, read %v %v", name, v, err, w, err2)
		}
		for i := range v {
			if v[i] != w[i] {
				t.Errorf("%s[%d]: mapped %v, read %v", name, i, v[i], w[i])
			}
		}
		held = append(held, got)
	}
	if !faults(func() { held[0][0] ^= 1 }) {
		t.Error("a write into mapped tensor bytes did not fault")
	}
	if again, _ := m.ReadRaw(m.Names()[0]); !bytes.Equal(again, held[0]) {
		t.Error("tensor bytes changed")
	}
	if faults(func() { _ = held[0][0] }) {
		t.Fatal("reading mapped bytes faulted before Close")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var sink byte
	if !faults(func() { sink += held[0][0] }) {
		t.Errorf("reading a tensor's bytes after Close did not fault (read %d)", sink)
	}
	if _, err := m.ReadRaw(m.Names()[0]); err == nil {
		t.Error("ReadRaw after Close succeeded")
	}
}
