package checkpoint

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tinyConfig = `{"model_type":"llama","vocab_size":4,"hidden_size":4,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2}`

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func testTensors() []WriteTensor {
	return []WriteTensor{
		{Name: "a.weight", DType: F32, Shape: []int{2, 2}, Data: f32s(1, 2, 3, 4)},
		{Name: "b.weight", DType: BF16, Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x40, 0xc0}},
		{Name: "c.bias", DType: F32, Shape: []int{3}, Data: f32s(-1, 0.5, 7)},
		{Name: "d.qweight", DType: I32, Shape: []int{1}, Data: []byte{1, 0, 0, 0}},
	}
}

func writeDir(t *testing.T, sharded bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tinyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if sharded {
		names, err := WriteSharded(dir, testTensors(), map[string]string{"format": "pt"}, 16)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 3 || names[0] != "model-00001-of-00003.safetensors" {
			t.Fatalf("shards %v", names)
		}
	} else if err := WriteFile(filepath.Join(dir, SafetensorsFile), testTensors(), nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOpenDir(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		dir := writeDir(t, sharded)
		m, err := OpenDir(dir)
		if err != nil {
			t.Fatalf("sharded=%v: %v", sharded, err)
		}
		if got := strings.Join(m.Names(), ","); got != "a.weight,b.weight,c.bias,d.qweight" {
			t.Errorf("names %s", got)
		}
		if m.Config.HiddenSize != 4 || m.TotalBytes() != 16+4+12+4 {
			t.Errorf("config %+v total %d", m.Config, m.TotalBytes())
		}
		v, shape, err := m.ReadFloat64("b.weight")
		if err != nil || v[0] != 1 || v[1] != -3 || shape[0] != 2 {
			t.Errorf("b.weight %v %v %v", v, shape, err)
		}
		v, _, err = m.ReadFloat64("c.bias")
		if err != nil || v[2] != 7 || v[1] != 0.5 {
			t.Errorf("c.bias %v %v", v, err)
		}
		raw, err := m.ReadRaw("d.qweight")
		if err != nil || raw[0] != 1 {
			t.Errorf("raw %v %v", raw, err)
		}
		if _, err := m.ReadRaw("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing tensor: %v", err)
		}
		if sharded && len(m.Files()) != 3 {
			t.Errorf("%d files", len(m.Files()))
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		if _, err := m.ReadRaw("a.weight"); err == nil {
			t.Error("read after Close succeeded")
		}
		if err := m.Close(); err != nil {
			t.Error("second Close:", err)
		}
	}
}

func TestOpenDirErrors(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(t *testing.T, dir string)
		is    error
		wants []string
	}{
		{"missing config", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ConfigFile)) }, ErrNotFound, []string{"config.json", "no config.json in the model directory"}},
		// An unsupported model_type is arch.OpenDir's error (TestOpenDirUnsupported).
		{"bad config", func(t *testing.T, dir string) { write(t, dir, ConfigFile, `{"model_type":["llama"]}`) }, ErrConfig, []string{"config.json", "model_type: want a string"}},
		{"no weights", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, IndexFile))
		}, ErrNotFound, []string{"neither model.safetensors nor model.safetensors.index.json"}},
		{"missing shard", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors"))
		}, ErrNotFound, []string{"model.safetensors.index.json names model-00002-of-00003.safetensors (for ", "tensors), which does not exist"}},
		{"truncated shard", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model-00003-of-00003.safetensors")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-1)
		}, ErrFormat, []string{"model-00003-of-00003.safetensors", "run past the end"}},
		{"tensor missing from shard", func(t *testing.T, dir string) {
			write(t, dir, IndexFile, `{"metadata":{},"weight_map":{"a.weight":"model-00001-of-00003.safetensors","b.weight":"model-00001-of-00003.safetensors","c.bias":"model-00002-of-00003.safetensors","d.qweight":"model-00003-of-00003.safetensors"}}`)
		}, ErrFormat, []string{IndexFile, `tensor "b.weight" mapped to model-00001-of-00003.safetensors is not in that shard`}},
		{"tensor in two shards", func(t *testing.T, dir string) {
			if err := WriteFile(filepath.Join(dir, "model-00003-of-00003.safetensors"), []WriteTensor{testTensors()[3], testTensors()[2]}, nil); err != nil {
				t.Fatal(err)
			}
		}, ErrFormat, []string{`tensor "c.bias" is in both`}},
		{"shard path escapes", func(t *testing.T, dir string) {
			write(t, dir, IndexFile, `{"weight_map":{"a.weight":"../model-00001-of-00003.safetensors"}}`)
		}, ErrFormat, []string{"is not a plain file name"}},
		{"empty weight map", func(t *testing.T, dir string) { write(t, dir, IndexFile, `{"weight_map":{}}`) }, ErrFormat, []string{"empty or missing weight_map"}},
		{"index not json", func(t *testing.T, dir string) { write(t, dir, IndexFile, `{`) }, ErrFormat, []string{IndexFile}},
		{"huge index", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, IndexFile), MaxJSONFileSize+1); err != nil {
				t.Fatal(err)
			}
		}, ErrFormat, []string{IndexFile, "larger than 100000000 bytes"}},
		{"huge config", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, ConfigFile), MaxJSONFileSize+1); err != nil {
				t.Fatal(err)
			}
		}, ErrConfig, []string{ConfigFile, "larger than 100000000 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDir(t, true)
			c.edit(t, dir)
			m, err := OpenDir(dir)
			if err == nil {
				m.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, c.is) {
				t.Errorf("error %v does not wrap %v", err, c.is)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func write(t *testing.T, dir, name, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFileAtomicNoPartial(t *testing.T) {
	dir := t.TempDir()
	bad := []WriteTensor{{Name: "x", DType: F32, Shape: []int{2}, Data: []byte{1}}}
	if err := WriteFile(filepath.Join(dir, "m.safetensors"), bad, nil); err == nil {
		t.Fatal("wrong data size accepted")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %v behind", ents)
	}
	for _, ts := range [][]WriteTensor{
		{{Name: "x", DType: F32, Shape: []int{1}, Data: f32s(1)}, {Name: "x", DType: F32, Shape: []int{1}, Data: f32s(1)}},
		{{Name: "__metadata__", DType: F32, Shape: []int{1}, Data: f32s(1)}},
		{{Name: "x", DType: "Q", Shape: []int{1}, Data: f32s(1)}},
		{{Name: "x", DType: F32, Shape: []int{-1}, Data: nil}},
	} {
		if _, err := Encode(ts, nil); err == nil {
			t.Errorf("%+v accepted", ts)
		}
	}
}

// A header key with characters JSON escapes must round trip; <>& stay
// unescaped as in the Rust writer.
func TestEncodeNames(t *testing.T) {
	ts := []WriteTensor{{Name: "a<b>&\"c\"\n\u00e9", DType: U8, Shape: []int{1}, Data: []byte{9}}}
	b, err := Encode(ts, map[string]string{"k": "v<"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"a<b>&\"c\"\né"`) || !strings.Contains(string(b), `{"__metadata__":{"k":"v<"},`) {
		t.Errorf("header %q", b)
	}
	f, err := Open(bytesReader(b), int64(len(b)), "n")
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := f.ReadRaw(ts[0].Name); err != nil || raw[0] != 9 {
		t.Errorf("%v %v", raw, err)
	}
}
