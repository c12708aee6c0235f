package compare

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/qppl/qppl/backends"
)

// A base log-prob store holds a base model's full-vocabulary log-probs for
// the KL positions of a run's windows, so that quantized models can be
// compared against it later without running the base again.
//
// Encodings (bytes per stored position, V = vocabulary size):
//
//	u16  llama.cpp's 16-bit scheme: 2·(2·⌈V/2⌉+4) bytes (≈ 2V+8; 256,520 B
//	     for V = 128,256). Per position: float32 scale and float32
//	     min_log_prob, then q_i = round((lp_i − lo)/scale) as uint16 with
//	     lo = max(min lp, max lp − 16) and scale = (max lp − lo)/65535;
//	     decoded lp_i = scale·q_i + min_log_prob (float32). Entries whose
//	     decoded log-prob is ≤ −16 are treated as probability 0 in KL,
//	     exactly as llama.cpp does.
//	f32  lossless to float32: 4V bytes.
//	f64  lossless: 8V bytes (the reference backend's exact values).
//
// Containers:
//
//	qppl      "QPPLLOGP", u32 LE header length, JSON StoreHeader, records in
//	          window order (any method, any encoding, both KL modes).
//	llamacpp  llama-perplexity's --kl-divergence-base file, byte for byte:
//	          "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk,
//	          int32 tokens[n_chunk·n_ctx] (the original tokens, not the
//	          BOS-replaced ones), then n_ctx−1−n_ctx/2 u16 records per chunk.
//	          Only for method llamacpp with encoding u16 and KL mode scored.
//	          qppl appends a trailer (JSON StoreHeader without windows, u32 LE
//	          length, "QPPLKEY1") that llama.cpp ignores, so its files stay
//	          readable by llama-perplexity; a file written by llama.cpp has no
//	          trailer and is checked by its tokens only.
//
// Exact targets (version 2): after the records (llamacpp container: inside
// the trailer, before its JSON), for every stored window in order and for
// each of its scored targets First..Len-1, the base run's own NLL as f64 LE,
// then for each target TargetTopK int32 LE ids of the base's largest
// log-probs (largest first, lower id first on ties). The paired statistics
// (PPL(base), the PPL ratio and difference, correlation, Δp, same-top and
// top-K agreement) use these exact values whatever the record encoding, so
// u16 changes only the KL divergence (by llama.cpp's −16 cut). Version 1
// files (and llama.cpp's own) have none: those statistics then come from
// the decoded records, as before.

// Encoding is a base store record encoding.
type Encoding string

// Store encodings.
const (
	EncodingU16 Encoding = "u16"
	EncodingF32 Encoding = "f32"
	EncodingF64 Encoding = "f64"
)

// DefaultEncoding is the encoding of eval --save-logits and compare's base
// stores: f32, lossless to float32, so that KL is compare_q's
// full-vocabulary one.
const DefaultEncoding = EncodingF32

// Containers.
const (
	ContainerQPPL     = "qppl"
	ContainerLlamaCpp = "llamacpp"
)

// KLMode is the coverage of the KL positions.
type KLMode string

// KL modes.
const (
	// KLScored: one KL position per scored target (llama.cpp).
	KLScored KLMode = "scored"
	// KLCompareQ: every logits position of the first KLRows windows
	// (compare_q: first 10 rows, all positions).
	KLCompareQ KLMode = "compare_q"
)

// DefaultKLRows is compare_q's number of KL rows.
const DefaultKLRows = 10

const (
	storeMagic    = "QPPLLOGP"
	llamaMagic    = "_logits_"
	trailerMagic  = "QPPLKEY1"
	maxHeaderLen  = 256 << 20
	maxStoreVocab = 1 << 24
	llamaFloor    = -16
)

// StoreWindow is one window's layout in a store.
type StoreWindow struct {
	Index     int `json:"index"`
	First     int `json:"first"`
	Len       int `json:"len"`
	Positions int `json:"positions"`
}

// StoreHeader identifies what a store holds.
type StoreHeader struct {
	Version      int      `json:"version"`
	Container    string   `json:"container"`
	Encoding     Encoding `json:"encoding"`
	Vocab        int      `json:"vocab"`
	KLMode       KLMode   `json:"kl_mode"`
	KLRows       int      `json:"kl_rows"`
	DataSpecHash string   `json:"data_spec_hash"`
	ModelHash    string   `json:"model_hash"`
	TokensHash   string   `json:"tokens_hash"`
	Method       string   `json:"method"`
	Ctx          int      `json:"ctx"`
	Stride       int      `json:"stride"`
	Rows         int      `json:"rows"`
	// Windows is the layout (qppl container only).
	Windows []StoreWindow `json:"windows,omitempty"`
	// TargetTopK is the number of base top ids stored per target in the
	// exact-target section (version 2; CreateStore writes it when
	// TargetTopK > 0, use StoreTopK); 0: no such section (version 1).
	TargetTopK int `json:"target_top_k,omitempty"`
}

// StoreVersion is the version CreateStore writes; OpenStore reads 1 and 2.
const StoreVersion = 2

// StoreTopK is the number of base top ids to store per target: top-K
// agreement with a larger --top-k falls back to the decoded records.
const StoreTopK = 8

// maxTargetTopK bounds TargetTopK.
const maxTargetTopK = 1024

// targetBytes is the size of one target in the exact-target section.
func targetBytes(k int) int64 { return 8 + 4*int64(k) }

// targets is the number of scored targets of a stored window.
func (w StoreWindow) targets() int { return w.Len - w.First }

// Key is the store's cache key: hex sha256 of data spec hash, model hash,
// encoding, KL mode and KL rows.
func (h *StoreHeader) Key() string {
	s := sha256.Sum256(fmt.Appendf(nil, "%s\n%s\n%s\n%s\n%d", h.DataSpecHash, h.ModelHash, h.Encoding, h.KLMode, h.KLRows))
	return hex.EncodeToString(s[:])
}

// RecordBytes is the size of one stored position.
func RecordBytes(e Encoding, vocab int) (int64, error) {
	if vocab <= 0 || vocab > maxStoreVocab {
		return 0, fmt.Errorf("vocabulary size %d out of range", vocab)
	}
	switch e {
	case EncodingU16:
		return 2 * int64(2*((vocab+1)/2)+4), nil
	case EncodingF32:
		return 4 * int64(vocab), nil
	case EncodingF64:
		return 8 * int64(vocab), nil
	}
	return 0, fmt.Errorf("unknown base log-prob encoding %q (want u16, f32 or f64)", e)
}

// ParseEncoding maps a flag value to an Encoding.
func ParseEncoding(s string) (Encoding, error) {
	switch Encoding(s) {
	case EncodingU16, EncodingF32, EncodingF64:
		return Encoding(s), nil
	case "":
		return DefaultEncoding, nil
	}
	return "", fmt.Errorf("unknown base log-prob encoding %q (want u16, f32 or f64)", s)
}

// StoreLayout returns the store windows of ws for a KL mode: every window
// for KLScored, the first klRows windows (all positions; all windows when
// there are fewer, as compare_q's `row < 10`) for KLCompareQ.
func StoreLayout(ws []backends.Window, mode KLMode, klRows int) ([]StoreWindow, error) {
	var out []StoreWindow
	switch mode {
	case KLScored:
		for _, w := range ws {
			out = append(out, StoreWindow{w.Index, w.First, len(w.Tokens), w.NumTargets()})
		}
	case KLCompareQ:
		if klRows <= 0 {
			return nil, fmt.Errorf("kld rows %d: must be >= 1", klRows)
		}
		// compare_q uses rows 0..9 when there are that many (row < 10).
		for _, w := range ws[:min(klRows, len(ws))] {
			out = append(out, StoreWindow{w.Index, w.First, len(w.Tokens), len(w.Tokens)})
		}
	default:
		return nil, fmt.Errorf("unknown KL mode %q (want scored or compare_q)", mode)
	}
	return out, nil
}

// klLogitsPos maps KL position i of a stored window to its logits position
// (the backends contract's arithmetic).
func klLogitsPos(mode KLMode, first, i int) int {
	return backends.KLLogitsPosition(mode == KLCompareQ, first, i)
}

// ---------------------------------------------------------------- writing

// StoreWriter writes a store, position by position in window order, to a
// temporary file that Close renames into place.
type StoreWriter struct {
	h    StoreHeader
	path string
	f    *os.File
	bw   *bufio.Writer
	rec  []byte
	lp32 []float32
	win  int // index into h.Windows
	pos  int // next position in that window
	done bool
	// targets holds each stored window's exact-target section (WriteTargets).
	targets map[int][]byte
}

// CreateStore starts writing a store described by h (Windows must be set,
// e.g. from StoreLayout). For the llamacpp container, tokens is the
// original token stream; its first len(Windows)·Ctx ids go in the header.
func CreateStore(path string, h StoreHeader, tokens []int32) (*StoreWriter, error) {
	h.Version = 1
	if h.TargetTopK < 0 || h.TargetTopK > maxTargetTopK {
		return nil, fmt.Errorf("%s: target top-k %d out of range [0, %d]", path, h.TargetTopK, maxTargetTopK)
	}
	if h.TargetTopK > 0 {
		h.Version = StoreVersion
	}
	rb, err := RecordBytes(h.Encoding, h.Vocab)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(h.Windows) == 0 {
		return nil, fmt.Errorf("%s: no windows to store", path)
	}
	var head []byte
	switch h.Container {
	case "", ContainerQPPL:
		h.Container = ContainerQPPL
		js, err := json.Marshal(h)
		if err != nil {
			return nil, err
		}
		head = append([]byte(storeMagic), binary.LittleEndian.AppendUint32(nil, uint32(len(js)))...)
		head = append(head, js...)
	case ContainerLlamaCpp:
		if h.Method != string(MethodLlamaCpp) || h.Encoding != EncodingU16 || h.KLMode != KLScored {
			return nil, fmt.Errorf("%s: the llama.cpp base file format needs method llamacpp, encoding u16 and KL mode scored (have %s, %s, %s)", path, h.Method, h.Encoding, h.KLMode)
		}
		nctx := h.Ctx
		for i, w := range h.Windows {
			if w.Index != i || w.Len != nctx || w.First != nctx/2+1 {
				return nil, fmt.Errorf("%s: window %d is not llama.cpp chunk %d of ctx %d", path, w.Index, i, nctx)
			}
		}
		n := len(h.Windows) * nctx
		if len(tokens) < n {
			return nil, fmt.Errorf("%s: %d tokens for %d chunks of %d", path, len(tokens), len(h.Windows), nctx)
		}
		head = append([]byte(llamaMagic), le32(int32(nctx))...)
		head = append(head, le32(int32(h.Vocab))...)
		head = append(head, le32(int32(len(h.Windows)))...)
		for _, t := range tokens[:n] {
			head = append(head, le32(t)...)
		}
	default:
		return nil, fmt.Errorf("%s: unknown container %q (want qppl or llamacpp)", path, h.Container)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("creating base log-prob store: %w", err)
	}
	s := &StoreWriter{h: h, path: path, f: f, bw: bufio.NewWriterSize(f, 1<<20), rec: make([]byte, rb), lp32: make([]float32, h.Vocab), targets: make(map[int][]byte)}
	if _, err := s.bw.Write(head); err != nil {
		s.Abort()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	s.skipEmpty()
	return s, nil
}

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

// Header returns the header being written.
func (s *StoreWriter) Header() StoreHeader { return s.h }

func (s *StoreWriter) skipEmpty() {
	for s.win < len(s.h.Windows) && s.pos == s.h.Windows[s.win].Positions {
		s.win++
		s.pos = 0
	}
}

// Wants reports whether the store holds window index, and the logits
// position of its first KL position.
func (s *StoreWriter) Wants(index int) (from int, ok bool) {
	for _, w := range s.h.Windows {
		if w.Index == index {
			return klLogitsPos(s.h.KLMode, w.First, 0), true
		}
	}
	return 0, false
}

// Write appends the log-probs of logits position pos of window index; it
// must be called for exactly the stored positions, in order.
func (s *StoreWriter) Write(index, pos int, lp []float64) error {
	if s.done || s.win >= len(s.h.Windows) {
		return fmt.Errorf("%s: write past the last stored position (window %d position %d)", s.path, index, pos)
	}
	w := s.h.Windows[s.win]
	if w.Index != index || klLogitsPos(s.h.KLMode, w.First, s.pos) != pos {
		return fmt.Errorf("%s: got window %d logits position %d, want window %d position %d", s.path, index, pos, w.Index, klLogitsPos(s.h.KLMode, w.First, s.pos))
	}
	if len(lp) != s.h.Vocab {
		return fmt.Errorf("%s: %d log-probs for vocabulary %d", s.path, len(lp), s.h.Vocab)
	}
	switch s.h.Encoding {
	case EncodingU16:
		encodeU16(lp, s.lp32, s.rec)
	case EncodingF32:
		for i, v := range lp {
			binary.LittleEndian.PutUint32(s.rec[4*i:], math.Float32bits(float32(v)))
		}
	case EncodingF64:
		for i, v := range lp {
			binary.LittleEndian.PutUint64(s.rec[8*i:], math.Float64bits(v))
		}
	}
	if _, err := s.bw.Write(s.rec); err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	s.pos++
	s.skipEmpty()
	return nil
}

// WriteTargets records the base run's exact NLL of every scored target of
// window index and, per target, its StoreTopK top ids (top holds
// len(nll)·StoreTopK ids, largest log-prob first).
func (s *StoreWriter) WriteTargets(index int, nll []float64, top []int32) error {
	if s.h.TargetTopK == 0 {
		return fmt.Errorf("%s: a version-1 store holds no exact targets", s.path)
	}
	var sw *StoreWindow
	for i := range s.h.Windows {
		if s.h.Windows[i].Index == index {
			sw = &s.h.Windows[i]
		}
	}
	if sw == nil {
		return fmt.Errorf("%s: window %d is not stored", s.path, index)
	}
	k := s.h.TargetTopK
	if len(nll) != sw.targets() || len(top) != k*len(nll) {
		return fmt.Errorf("%s: window %d: %d NLL values and %d top ids for %d targets × %d", s.path, index, len(nll), len(top), sw.targets(), k)
	}
	b := make([]byte, 0, int64(len(nll))*targetBytes(k))
	for _, v := range nll {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	for _, id := range top {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	s.targets[index] = b
	return nil
}

// Close checks that every position and every window's targets were
// written, adds the exact-target section and the trailer (llamacpp
// container), syncs and renames the file into place.
func (s *StoreWriter) Close() error {
	if s.done {
		return nil
	}
	if s.win < len(s.h.Windows) {
		w := s.h.Windows[s.win]
		s.Abort()
		return fmt.Errorf("%s: incomplete: window %d has %d of %d positions", s.path, w.Index, s.pos, w.Positions)
	}
	var section []byte
	for _, w := range s.h.Windows {
		if s.h.TargetTopK == 0 {
			break
		}
		b, ok := s.targets[w.Index]
		if !ok {
			s.Abort()
			return fmt.Errorf("%s: incomplete: no exact targets for window %d", s.path, w.Index)
		}
		section = append(section, b...)
	}
	if s.h.Container != ContainerLlamaCpp {
		if _, err := s.bw.Write(section); err != nil {
			s.Abort()
			return fmt.Errorf("writing %s: %w", s.path, err)
		}
	} else {
		t := s.h
		t.Windows = nil
		js, err := json.Marshal(t)
		if err != nil {
			s.Abort()
			return err
		}
		js = append(js, section...)
		if int64(len(js)) > math.MaxUint32 {
			s.Abort()
			return fmt.Errorf("%s: trailer of %d bytes is too large", s.path, len(js))
		}
		js = binary.LittleEndian.AppendUint32(js, uint32(len(js)))
		js = append(js, trailerMagic...)
		if _, err := s.bw.Write(js); err != nil {
			s.Abort()
			return fmt.Errorf("writing %s: %w", s.path, err)
		}
	}
	err := s.bw.Flush()
	if err == nil {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(s.f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(s.f.Name(), s.path)
	}
	s.done = true
	if err != nil {
		os.Remove(s.f.Name())
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}

// Abort discards the temporary file.
func (s *StoreWriter) Abort() {
	if s.done {
		return
	}
	s.done = true
	s.f.Close()
	os.Remove(s.f.Name())
}

// nearestInt rounds like llama.cpp's nearest_int (float32 magic-number
// rounding: round half to even).
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// encodeU16 encodes one row of log-probs with llama.cpp's 16-bit scheme,
// computed in float32 as llama.cpp does (from the log-probs instead of the
// logits: the differences are the same).
func encodeU16(lp []float64, lp32 []float32, rec []byte) {
	for i, v := range lp {
		lp32[i] = float32(v)
	}
	hi, lo := lp32[0], lp32[0]
	for _, v := range lp32[1:] {
		hi = max(hi, v)
		lo = min(lo, v)
	}
	lo = max(lo, hi-16)
	scale := float32(hi-lo) / 65535
	binary.LittleEndian.PutUint32(rec[0:], math.Float32bits(scale))
	binary.LittleEndian.PutUint32(rec[4:], math.Float32bits(lo))
	q := rec[8:]
	clear(q)
	if scale == 0 {
		return
	}
	inv := 1 / scale
	for i, v := range lp32 {
		if v > lo {
			n := nearestInt(float32(inv * float32(v-lo)))
			n = min(max(n, 0), 65535) // llama.cpp would wrap 65536 to 0
			binary.LittleEndian.PutUint16(q[2*i:], uint16(n))
		}
	}
}

// decodeU16 decodes a record into dst (float32 arithmetic, as llama.cpp).
func decodeU16(rec []byte, dst []float64) {
	scale := math.Float32frombits(binary.LittleEndian.Uint32(rec[0:]))
	minLP := math.Float32frombits(binary.LittleEndian.Uint32(rec[4:]))
	q := rec[8:]
	for i := range dst {
		dst[i] = float64(float32(scale*float32(binary.LittleEndian.Uint16(q[2*i:]))) + minLP)
	}
}

// ---------------------------------------------------------------- reading

// Store is an open base log-prob store.
type Store struct {
	path    string
	f       *os.File
	h       StoreHeader
	rec     int64
	offs    map[int]int64 // window index → offset of its first record
	wins    map[int]StoreWindow
	llama   []int32 // llamacpp container: the chunk tokens
	trailer bool
	// tgtOff maps a window index to the offset of its exact targets
	// (version 2; nil without them).
	tgtOff map[int]int64
}

// ErrStore marks a store file that is malformed or does not match the run.
var ErrStore = errors.New("base log-prob store")

func storeErr(path, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrStore, path, fmt.Sprintf(format, args...))
}

// OpenStore opens and validates a store file of either container. Every
// length read from the file is checked against the file size before
// anything is allocated.
func OpenStore(path string) (*Store, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening base log-probs: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &Store{path: path, f: f}
	if err := s.parse(st.Size()); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) parse(size int64) error {
	var magic [8]byte
	if _, err := s.f.ReadAt(magic[:], 0); err != nil {
		return storeErr(s.path, "too short for a base log-prob file (%d bytes)", size)
	}
	switch string(magic[:]) {
	case storeMagic:
		return s.parseQPPL(size)
	case llamaMagic:
		return s.parseLlama(size)
	}
	return storeErr(s.path, "not a base log-prob file (magic %q; want %q or llama.cpp's %q)", magic[:], storeMagic, llamaMagic)
}

func (s *Store) parseQPPL(size int64) error {
	var b [4]byte
	if _, err := s.f.ReadAt(b[:], 8); err != nil {
		return storeErr(s.path, "truncated header")
	}
	hl := int64(binary.LittleEndian.Uint32(b[:]))
	if hl > maxHeaderLen || 12+hl > size {
		return storeErr(s.path, "header length %d exceeds the file (%d bytes)", hl, size)
	}
	js := make([]byte, hl)
	if _, err := s.f.ReadAt(js, 12); err != nil {
		return storeErr(s.path, "reading header: %v", err)
	}
	if err := json.Unmarshal(js, &s.h); err != nil {
		return storeErr(s.path, "header: %v", err)
	}
	if (s.h.Version != 1 && s.h.Version != 2) || s.h.Container != ContainerQPPL {
		return storeErr(s.path, "unsupported version %d / container %q", s.h.Version, s.h.Container)
	}
	rec, err := RecordBytes(s.h.Encoding, s.h.Vocab)
	if err != nil {
		return storeErr(s.path, "%v", err)
	}
	if s.h.KLMode != KLScored && s.h.KLMode != KLCompareQ {
		return storeErr(s.path, "unknown KL mode %q", s.h.KLMode)
	}
	s.rec = rec
	s.offs = make(map[int]int64, len(s.h.Windows))
	s.wins = make(map[int]StoreWindow, len(s.h.Windows))
	off := 12 + hl
	for i, w := range s.h.Windows {
		want := w.Len - w.First
		if s.h.KLMode == KLCompareQ {
			want = w.Len
		}
		if w.First < 1 || w.Len < w.First || w.Positions != want || (i > 0 && w.Index <= s.h.Windows[i-1].Index) {
			return storeErr(s.path, "window %d: inconsistent layout (first %d, len %d, positions %d)", w.Index, w.First, w.Len, w.Positions)
		}
		if int64(w.Positions) > (size-off)/rec {
			return storeErr(s.path, "truncated: window %d needs %d records of %d bytes beyond offset %d, file has %d bytes", w.Index, w.Positions, rec, off, size)
		}
		s.offs[w.Index] = off
		s.wins[w.Index] = w
		off += int64(w.Positions) * rec
	}
	if off, err = s.layoutTargets(off, size); err != nil {
		return err
	}
	if off != size {
		return storeErr(s.path, "size %d bytes, header and records account for %d", size, off)
	}
	return nil
}

// layoutTargets places a version-2 exact-target section at off (bounded by
// end) and returns the offset after it.
func (s *Store) layoutTargets(off, end int64) (int64, error) {
	if s.h.Version < 2 {
		if s.h.TargetTopK != 0 {
			return 0, storeErr(s.path, "version %d with target_top_k %d", s.h.Version, s.h.TargetTopK)
		}
		return off, nil
	}
	k := s.h.TargetTopK
	if k < 1 || k > maxTargetTopK {
		return 0, storeErr(s.path, "target_top_k %d out of range", k)
	}
	s.tgtOff = make(map[int]int64, len(s.h.Windows))
	for _, w := range s.h.Windows {
		if int64(w.targets()) > (end-off)/targetBytes(k) {
			return 0, storeErr(s.path, "truncated: window %d needs %d exact targets beyond offset %d, the section ends at %d", w.Index, w.targets(), off, end)
		}
		s.tgtOff[w.Index] = off
		off += int64(w.targets()) * targetBytes(k)
	}
	return off, nil
}

func (s *Store) parseLlama(size int64) (err error) {
	var b [12]byte
	if _, err := s.f.ReadAt(b[:], 8); err != nil {
		return storeErr(s.path, "truncated llama.cpp header")
	}
	nctx := int64(int32(binary.LittleEndian.Uint32(b[0:])))
	nv := int64(int32(binary.LittleEndian.Uint32(b[4:])))
	nch := int64(int32(binary.LittleEndian.Uint32(b[8:])))
	if nctx < 2 || nctx > 1<<24 || nv < 1 || nv > maxStoreVocab || nch < 1 || nch > 1<<24 {
		return storeErr(s.path, "llama.cpp header out of range: n_ctx %d, n_vocab %d, n_chunk %d", nctx, nv, nch)
	}
	rec, _ := RecordBytes(EncodingU16, int(nv))
	tokBytes := 4 * nctx * nch
	per := nctx - 1 - nctx/2
	dataOff := 20 + tokBytes
	if dataOff > size || per*nch > (size-dataOff)/rec {
		return storeErr(s.path, "truncated: %d chunks of %d tokens need %d bytes of tokens and %d records of %d bytes, file has %d bytes", nch, nctx, tokBytes, per*nch, rec, size)
	}
	end := dataOff + per*nch*rec
	var secOff, section int64 // the exact targets in the trailer
	if extra := size - end; extra != 0 {
		if secOff, section, err = s.readTrailer(end, extra); err != nil {
			return err
		}
	}
	tb := make([]byte, tokBytes)
	if _, err := s.f.ReadAt(tb, 20); err != nil {
		return storeErr(s.path, "reading tokens: %v", err)
	}
	s.llama = make([]int32, nctx*nch)
	for i := range s.llama {
		s.llama[i] = int32(binary.LittleEndian.Uint32(tb[4*i:]))
	}
	if !s.trailer {
		s.h = StoreHeader{Version: 1, Method: string(MethodLlamaCpp), Ctx: int(nctx), TokensHash: ""}
	}
	s.h.Container, s.h.Encoding, s.h.Vocab, s.h.KLMode, s.h.KLRows = ContainerLlamaCpp, EncodingU16, int(nv), KLScored, 0
	s.rec = rec
	s.offs = make(map[int]int64, nch)
	s.wins = make(map[int]StoreWindow, nch)
	s.h.Windows = nil
	for i := 0; i < int(nch); i++ {
		w := StoreWindow{i, int(nctx/2 + 1), int(nctx), int(per)}
		s.h.Windows = append(s.h.Windows, w)
		s.offs[i] = dataOff + int64(i)*per*rec
		s.wins[i] = w
	}
	if s.trailer {
		off, err := s.layoutTargets(secOff, secOff+section)
		if err != nil {
			return err
		}
		if off != secOff+section {
			return storeErr(s.path, "trailer: %d exact-target bytes, the windows account for %d", section, off-secOff)
		}
	}
	return nil
}

// readTrailer reads qppl's trailer of n bytes at at: JSON header,
// [exact-target section,] u32 LE length of both, "QPPLKEY1". It returns
// the offset and size of the section (size 0 in version 1 files).
func (s *Store) readTrailer(at, n int64) (int64, int64, error) {
	if n < 12 {
		return 0, 0, storeErr(s.path, "%d unexpected bytes after the last llama.cpp record", n)
	}
	var tail [12]byte
	if _, err := s.f.ReadAt(tail[:], at+n-12); err != nil {
		return 0, 0, storeErr(s.path, "reading trailer: %v", err)
	}
	if string(tail[4:]) != trailerMagic || int64(binary.LittleEndian.Uint32(tail[:4])) != n-12 {
		return 0, 0, storeErr(s.path, "%d unexpected bytes after the last llama.cpp record", n)
	}
	d := json.NewDecoder(io.NewSectionReader(s.f, at, min(n-12, maxHeaderLen)))
	if err := d.Decode(&s.h); err != nil {
		return 0, 0, storeErr(s.path, "trailer: %v", err)
	}
	jl := d.InputOffset()
	section := n - 12 - jl
	if (s.h.Version < 2) != (section == 0) {
		return 0, 0, storeErr(s.path, "trailer: version %d with %d exact-target bytes", s.h.Version, section)
	}
	s.trailer = true
	return at + jl, section, nil
}

// Targets returns the base run's exact NLL of window index's scored
// targets and their top ids (k per target, largest first); ok is false
// when the store has no exact targets (version 1, llama.cpp's own files)
// or does not hold the window.
func (s *Store) Targets(index int) (nll []float64, top []int32, k int, ok bool, err error) {
	off, ok := s.tgtOff[index]
	if !ok {
		return nil, nil, 0, false, nil
	}
	w := s.wins[index]
	k = s.h.TargetTopK
	n := w.targets()
	buf := make([]byte, int64(n)*targetBytes(k))
	if got, rerr := s.f.ReadAt(buf, off); got < len(buf) {
		return nil, nil, 0, false, fmt.Errorf("reading %s: exact targets of window %d: %d of %d bytes: %v", s.path, index, got, len(buf), rerr)
	}
	nll = make([]float64, n)
	for i := range nll {
		nll[i] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	top = make([]int32, n*k)
	for i := range top {
		top[i] = int32(binary.LittleEndian.Uint32(buf[8*n+4*i:]))
	}
	return nll, top, k, true, nil
}

// Header returns the store's header (for the llamacpp container without a
// qppl trailer the hashes are empty).
func (s *Store) Header() StoreHeader { return s.h }

// KLMode returns the store's KL coverage.
func (s *Store) KLMode() KLMode { return s.h.KLMode }

// Close closes the file.
func (s *Store) Close() error { return s.f.Close() }

// StoreExpect is what a run requires of a store. Empty fields are not
// checked.
type StoreExpect struct {
	DataSpecHash string
	ModelHash    string // the base model's hash, when the caller knows it
	Vocab        int
}

// Check refuses a store made for other data or another model.
func (s *Store) Check(e StoreExpect) error {
	if e.Vocab != 0 && e.Vocab != s.h.Vocab {
		return storeErr(s.path, "vocabulary %d, the model has %d", s.h.Vocab, e.Vocab)
	}
	if e.DataSpecHash != "" && s.h.DataSpecHash != "" && e.DataSpecHash != s.h.DataSpecHash {
		return storeErr(s.path, "stale or mismatched: made for data spec %s (method %s, ctx %d, stride %d, rows %d, tokens %s), this run's data spec is %s; re-create it with --save-logits on the base model with the same data options",
			shortHash(s.h.DataSpecHash), s.h.Method, s.h.Ctx, s.h.Stride, s.h.Rows, shortHash(s.h.TokensHash), shortHash(e.DataSpecHash))
	}
	if e.ModelHash != "" && s.h.ModelHash != "" && e.ModelHash != s.h.ModelHash {
		return storeErr(s.path, "made from model files %s, the base model's files hash to %s", shortHash(s.h.ModelHash), shortHash(e.ModelHash))
	}
	return nil
}

// Window returns the base log-probs of w; ok is false when the store does
// not cover w (KL mode compare_q past its rows). The store's window must
// have w's shape, and for the llamacpp container w's tokens (after the
// first, which llama.cpp replaces by BOS) must equal the stored ones.
func (s *Store) Window(w backends.Window) (lp *StoreLogProbs, ok bool, err error) {
	sw, ok := s.wins[w.Index]
	if !ok {
		return nil, false, nil
	}
	if sw.First != w.First || sw.Len != len(w.Tokens) {
		return nil, false, storeErr(s.path, "window %d was stored with first target %d and %d tokens, this run has %d and %d", w.Index, sw.First, sw.Len, w.First, len(w.Tokens))
	}
	if s.llama != nil {
		chunk := s.llama[w.Index*sw.Len : (w.Index+1)*sw.Len]
		for i := 1; i < sw.Len; i++ {
			if chunk[i] != w.Tokens[i] {
				return nil, false, storeErr(s.path, "chunk %d token %d is %d in the file, %d in this run: the file was made from other text or another tokenizer", w.Index, i, chunk[i], w.Tokens[i])
			}
		}
	}
	return &StoreLogProbs{s: s, win: sw, off: s.offs[w.Index]}, true, nil
}

// StoreLogProbs are one window's stored base log-probs. It implements
// backends.BaseLogProbs; the values are the decoded ones, below-floor
// entries included (see Floor).
type StoreLogProbs struct {
	mu  sync.Mutex // guards buf: backends may read positions concurrently
	s   *Store
	win StoreWindow
	off int64
	buf []byte
}

var _ backends.BaseLogProbs = (*StoreLogProbs)(nil)

// Vocab returns the vocabulary size.
func (p *StoreLogProbs) Vocab() int { return p.s.h.Vocab }

// Len returns the number of KL positions.
func (p *StoreLogProbs) Len() int { return p.win.Positions }

// Floor is the log-prob at or below which an entry counts as probability 0
// in KL: −16 for the u16 encoding (llama.cpp's rule), −Inf otherwise.
func (p *StoreLogProbs) Floor() float64 {
	if p.s.h.Encoding == EncodingU16 {
		return llamaFloor
	}
	return math.Inf(-1)
}

// LogProbs decodes KL position i into dst.
func (p *StoreLogProbs) LogProbs(i int, dst []float64) error {
	if i < 0 || i >= p.win.Positions {
		return fmt.Errorf("base log-probs of window %d: position %d out of range [0, %d)", p.win.Index, i, p.win.Positions)
	}
	if len(dst) != p.s.h.Vocab {
		return fmt.Errorf("base log-probs: dst has %d entries, vocabulary is %d", len(dst), p.s.h.Vocab)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf == nil {
		p.buf = make([]byte, p.s.rec)
	}
	// A read ending exactly at the end of the file may report io.EOF with
	// every byte read; a short read (the file shrank since it was opened)
	// must not decode stale bytes.
	if n, err := p.s.f.ReadAt(p.buf, p.off+int64(i)*p.s.rec); n < len(p.buf) {
		return fmt.Errorf("reading %s: window %d position %d: %d of %d bytes: %v", p.s.path, p.win.Index, i, n, len(p.buf), err)
	}
	switch p.s.h.Encoding {
	case EncodingU16:
		decodeU16(p.buf, dst)
	case EncodingF32:
		for j := range dst {
			dst[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p.buf[4*j:])))
		}
	case EncodingF64:
		for j := range dst {
			dst[j] = math.Float64frombits(binary.LittleEndian.Uint64(p.buf[8*j:]))
		}
	}
	return nil
}
