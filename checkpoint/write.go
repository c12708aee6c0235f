package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/qppl/qppl/internal/atomicfile"
)

// WriteTensor is a tensor to write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// EncodeHeader returns the complete safetensors prefix (8-byte length plus
// the JSON header padded with spaces to a multiple of 8, as the Rust writer
// does) for tensors laid out in the given order, and checks each tensor's
// data size. Keys are written as the Rust crate does: __metadata__ first
// (keys sorted), then the tensors in data order, each with dtype, shape and
// data_offsets; no HTML escaping.
func EncodeHeader(tensors []WriteTensor, metadata map[string]string) ([]byte, error) {
	var js bytes.Buffer
	js.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			js.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		sep()
		writeJSONString(&js, metadataKey)
		js.WriteString(":{")
		for i, k := range sortedKeys(metadata) {
			if i > 0 {
				js.WriteByte(',')
			}
			writeJSONString(&js, k)
			js.WriteByte(':')
			writeJSONString(&js, metadata[k])
		}
		js.WriteByte('}')
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for _, t := range tensors {
		if t.Name == metadataKey || t.Name == "" {
			return nil, fmt.Errorf("checkpoint: invalid tensor name %q", t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("checkpoint: duplicate tensor %q", t.Name)
		}
		seen[t.Name] = true
		numel := int64(1)
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("checkpoint: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
			numel *= int64(d)
		}
		want, err := t.DType.ByteSize(numel)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: tensor %q: %w", t.Name, err)
		}
		if int64(len(t.Data)) != want {
			return nil, fmt.Errorf("checkpoint: tensor %q: %d data bytes, want %d for %s %v", t.Name, len(t.Data), want, t.DType, t.Shape)
		}
		sep()
		writeJSONString(&js, t.Name)
		fmt.Fprintf(&js, `:{"dtype":"%s","shape":[`, t.DType)
		for i, d := range t.Shape {
			if i > 0 {
				js.WriteByte(',')
			}
			fmt.Fprintf(&js, "%d", d)
		}
		fmt.Fprintf(&js, `],"data_offsets":[%d,%d]}`, off, off+want)
		off += want
	}
	js.WriteByte('}')
	for js.Len()%8 != 0 {
		js.WriteByte(' ')
	}
	out := make([]byte, 8, 8+js.Len())
	binary.LittleEndian.PutUint64(out, uint64(js.Len()))
	return append(out, js.Bytes()...), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode appends '\n'
}

// SortForWrite orders tensors as the Rust writer does: by dtype descending
// in the crate's enum order (which is by element size: U64, I64, F64, C64,
// F32, U32, I32, BF16, F16, ...), then by name.
func SortForWrite(tensors []WriteTensor) {
	sort.SliceStable(tensors, func(i, j int) bool {
		ri, rj := tensors[i].DType.rank(), tensors[j].DType.rank()
		if ri != rj {
			return ri > rj
		}
		return tensors[i].Name < tensors[j].Name
	})
}

// Encode returns a whole safetensors file for the tensors, laid out in the
// Rust writer's order (see SortForWrite). The input slice is not modified.
func Encode(tensors []WriteTensor, metadata map[string]string) ([]byte, error) {
	ts := append([]WriteTensor(nil), tensors...)
	SortForWrite(ts)
	hdr, err := EncodeHeader(ts, metadata)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		hdr = append(hdr, t.Data...)
	}
	return hdr, nil
}

// WriteFile writes a safetensors file atomically (temp file + rename),
// streaming the tensors' data rather than assembling the file in memory.
// Tensors are laid out in the Rust writer's order (see SortForWrite).
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	ts := append([]WriteTensor(nil), tensors...)
	SortForWrite(ts)
	hdr, err := EncodeHeader(ts, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeAtomic(path, func(w io.Writer) error {
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		for _, t := range ts {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory, synced and renamed into place, so readers never see a partial
// file.
func WriteFileAtomic(path string, data []byte) error {
	return atomicfile.WriteBytes(path, data, 0o644)
}

func writeAtomic(path string, fill func(io.Writer) error) error {
	return atomicfile.Write(path, 0o644, fill)
}

// WriteSharded writes the tensors into dir as model-0000k-of-0000N.safetensors
// shards of at most maxShardBytes tensor bytes each (a larger tensor gets a
// shard of its own), plus model.safetensors.index.json, as transformers'
// save_pretrained does. Tensors are assigned to shards in name order. It
// returns the shard file names.
func WriteSharded(dir string, tensors []WriteTensor, metadata map[string]string, maxShardBytes int64) ([]string, error) {
	ts := append([]WriteTensor(nil), tensors...)
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var groups [][]WriteTensor
	var cur []WriteTensor
	var curBytes, total int64
	for _, t := range ts {
		n := int64(len(t.Data))
		total += n
		if len(cur) > 0 && curBytes+n > maxShardBytes {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, t)
		curBytes += n
	}
	if len(cur) > 0 || len(groups) == 0 {
		groups = append(groups, cur)
	}
	weightMap := make(map[string]string)
	names := make([]string, len(groups))
	for k, g := range groups {
		names[k] = fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(groups))
		if err := WriteFile(filepath.Join(dir, names[k]), g, metadata); err != nil {
			return nil, err
		}
		for _, t := range g {
			weightMap[t.Name] = names[k]
		}
	}
	idx := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(filepath.Join(dir, IndexFile), append(data, '\n')); err != nil {
		return nil, err
	}
	return names, nil
}
