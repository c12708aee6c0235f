package compare

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/internal/atomicfile"
)

// WriteFileAtomic writes path through a temporary file in the same
// directory, synced and renamed into place, so a reader never sees a
// partial file.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	return atomicfile.Write(path, 0o644, write)
}

func sortedResults(res []WindowResult) []WindowResult {
	out := slices.Clone(res)
	slices.SortStableFunc(out, func(a, b WindowResult) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// WriteNLL writes every scored token's NLL as float64 little-endian, in
// window order then position order (the --nll-out format).
func WriteNLL(path string, res []WindowResult) error {
	return WriteFileAtomic(path, func(w io.Writer) error {
		var b [8]byte
		for _, r := range sortedResults(res) {
			for _, v := range r.NLL {
				binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
				if _, err := w.Write(b[:]); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TokenRecord is one row of a per-token dump.
type TokenRecord struct {
	Window   int      `json:"window"`
	Pos      int      `json:"pos"` // target position in the window
	Token    int32    `json:"token"`
	NLL      float64  `json:"nll"`
	KLD      *float64 `json:"kld,omitempty"`  // KL at the target's logits position
	Top1     *int32   `json:"top1,omitempty"` // Q's most probable token
	BaseTop1 *int32   `json:"base_top1,omitempty"`
	BaseNLL  *float64 `json:"base_nll,omitempty"`
}

// TokenRecords lists the per-token rows of res (windows must hold the
// Windows the results came from, matched by Index).
func TokenRecords(windows []backends.Window, res []WindowResult) ([]TokenRecord, error) {
	byIdx := make(map[int]backends.Window, len(windows))
	for _, w := range windows {
		byIdx[w.Index] = w
	}
	var out []TokenRecord
	for _, r := range sortedResults(res) {
		w, ok := byIdx[r.Index]
		if !ok || len(w.Tokens) != r.Len || w.First != r.First {
			return nil, fmt.Errorf("token dump: no window %d of length %d", r.Index, r.Len)
		}
		for i, v := range r.NLL {
			p := r.First + i
			rec := TokenRecord{Window: r.Index, Pos: p, Token: w.Tokens[p], NLL: v}
			if r.Top1 != nil {
				rec.Top1 = &r.Top1[i]
			}
			if r.HasBase() {
				k := i // scored mode: one KL per target
				if len(r.KL) == r.Len {
					k = p - 1 // compare_q mode: KL per logits position
				}
				rec.KLD = &r.KL[k]
				rec.BaseTop1 = &r.BaseTop1[i]
				rec.BaseNLL = &r.BaseNLL[i]
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// WriteTokens writes the per-token dump as JSON lines (path ending in
// .jsonl) or CSV (.csv) with columns window,pos,token,nll,kld,top1,
// base_top1,base_nll (empty cells where a value does not exist). Floats are
// written in the shortest form that reads back to the same float64.
func WriteTokens(path string, windows []backends.Window, res []WindowResult) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".jsonl" && ext != ".csv" {
		return fmt.Errorf("token dump %s: want a .jsonl or .csv file name", path)
	}
	recs, err := TokenRecords(windows, res)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, func(w io.Writer) error {
		if ext == ".csv" {
			if _, err := io.WriteString(w, "window,pos,token,nll,kld,top1,base_top1,base_nll\n"); err != nil {
				return err
			}
		}
		var b []byte
		for _, r := range recs {
			b = b[:0]
			if ext == ".csv" {
				b = fmt.Appendf(b, "%d,%d,%d,%s,%s,%s,%s,%s\n", r.Window, r.Pos, r.Token, ff(r.NLL), fp(r.KLD), ip(r.Top1), ip(r.BaseTop1), fp(r.BaseNLL))
			} else {
				b = fmt.Appendf(b, `{"window":%d,"pos":%d,"token":%d,"nll":%s`, r.Window, r.Pos, r.Token, ff(r.NLL))
				if r.KLD != nil {
					b = fmt.Appendf(b, `,"kld":%s`, ff(*r.KLD))
				}
				if r.Top1 != nil {
					b = fmt.Appendf(b, `,"top1":%d`, *r.Top1)
				}
				if r.BaseTop1 != nil {
					b = fmt.Appendf(b, `,"base_top1":%d,"base_nll":%s`, *r.BaseTop1, ff(*r.BaseNLL))
				}
				b = append(b, "}\n"...)
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func ff(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func fp(v *float64) string {
	if v == nil {
		return ""
	}
	return ff(*v)
}

func ip(v *int32) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(int(*v))
}
