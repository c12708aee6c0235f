package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// magic starts every journal file; the trailing digit is the format version.
const magic = "QPPLJRN1"

// MaxRecord bounds a single record (and the identity) so that a corrupted
// length field never triggers a huge allocation.
const MaxRecord = 1 << 30

var (
	// ErrCorrupt reports a journal whose bytes are not a valid journal.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrIdentity reports a journal written by a different run.
	ErrIdentity = errors.New("journal: belongs to a different run")
	// ErrBusy reports a journal that another open Journal (usually another
	// process running the same command) holds.
	ErrBusy = errors.New("journal: in use by another process")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Journal is an open journal file positioned for appending.
type Journal struct {
	f    *os.File
	path string
}

// Contents is what a journal file holds.
type Contents struct {
	Identity []byte
	Records  [][]byte
	// Torn is the number of trailing bytes that belonged to an incomplete
	// final record (0 for a cleanly closed journal).
	Torn int64
}

// Open opens the journal at path for appending, creating it with identity
// when it does not exist, and holds an exclusive advisory lock on it until
// Close (on Unix; a second Open of a held journal fails with ErrBusy, so two
// processes never append to one journal). For an existing journal the stored identity must
// equal identity byte for byte (else ErrIdentity); its complete records are
// returned and a torn final record is truncated away.
func Open(path string, identity []byte) (*Journal, [][]byte, error) {
	if len(identity) > MaxRecord {
		return nil, nil, fmt.Errorf("journal %s: identity of %d bytes is too large", path, len(identity))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	if err := lock(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s (is the same run still going, or started twice?)", err, path)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	if st.Size() > 0 && headerTorn(f, st.Size()) {
		// Killed while creating the journal: nothing was recorded yet.
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal %s: %w", path, err)
		}
		st, err = f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal: %w", err)
		}
	}
	if st.Size() == 0 {
		var hdr bytes.Buffer
		hdr.WriteString(magic)
		writeFrame(&hdr, identity)
		if _, err := f.Write(hdr.Bytes()); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal %s: %w", path, err)
		}
		return &Journal{f: f, path: path}, nil, nil
	}
	c, good, err := parse(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !bytes.Equal(c.Identity, identity) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s was written by a run with identity %s, not %s", ErrIdentity, path, c.Identity, identity)
	}
	if c.Torn > 0 {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal %s: truncating torn record: %w", path, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal %s: %w", path, err)
	}
	return &Journal{f: f, path: path}, c.Records, nil
}

// Read parses a journal without modifying it. A torn final record is
// reported in Contents.Torn and left out of Records.
func Read(path string) (*Contents, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	c, _, err := parse(f, st.Size(), path)
	return c, err
}

// Parse parses journal bytes held in memory (name is used in messages),
// exactly as Read parses a file.
func Parse(data []byte, name string) (*Contents, error) {
	c, _, err := parse(bytes.NewReader(data), int64(len(data)), name)
	return c, err
}

// Append writes one record and fsyncs it.
func (j *Journal) Append(payload []byte) error {
	if len(payload) > MaxRecord {
		return fmt.Errorf("journal %s: record of %d bytes is too large", j.path, len(payload))
	}
	var b bytes.Buffer
	writeFrame(&b, payload)
	if _, err := j.f.Write(b.Bytes()); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

// Path returns the journal's file name.
func (j *Journal) Path() string { return j.path }

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

func writeFrame(b *bytes.Buffer, payload []byte) {
	var h [8]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(payload, castagnoli))
	b.Write(h[:])
	b.Write(payload)
}

// parse reads the whole journal from r (size bytes) and returns its contents
// and the offset just past the last complete record.
func parse(r io.ReaderAt, size int64, name string) (*Contents, int64, error) {
	sr := io.NewSectionReader(r, 0, size)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(sr, m); err != nil || string(m) != magic {
		return nil, 0, fmt.Errorf("%w: %s is not a qppl journal (bad magic)", ErrCorrupt, name)
	}
	off := int64(len(magic))
	id, n, torn, err := readFrame(sr, off, size, name)
	if err != nil {
		return nil, 0, err
	}
	if torn {
		return nil, 0, fmt.Errorf("%w: %s: header record is incomplete", ErrCorrupt, name)
	}
	off += n
	c := &Contents{Identity: id}
	for off < size {
		p, n, torn, err := readFrame(sr, off, size, name)
		if err != nil {
			return nil, 0, err
		}
		if torn {
			c.Torn = size - off
			return c, off, nil
		}
		c.Records = append(c.Records, p)
		off += n
	}
	return c, off, nil
}

// readFrame reads one frame at off. torn reports an incomplete or
// checksum-failing frame that ends the file (the result of an interrupted
// append); the same damage followed by more bytes is corruption.
func readFrame(sr *io.SectionReader, off, size int64, name string) (payload []byte, n int64, torn bool, err error) {
	var h [8]byte
	if size-off < 8 {
		return nil, 0, true, nil
	}
	if _, err := sr.ReadAt(h[:], off); err != nil {
		return nil, 0, false, fmt.Errorf("journal %s: %w", name, err)
	}
	ln := int64(binary.LittleEndian.Uint32(h[0:4]))
	sum := binary.LittleEndian.Uint32(h[4:8])
	if ln > MaxRecord {
		return nil, 0, false, fmt.Errorf("%w: %s: record at byte %d claims %d bytes", ErrCorrupt, name, off, ln)
	}
	end := off + 8 + ln
	if end > size {
		// Only the final append can be short.
		return nil, 0, true, nil
	}
	p := make([]byte, ln)
	if _, err := sr.ReadAt(p, off+8); err != nil && ln > 0 { // an empty read at the end is EOF
		return nil, 0, false, fmt.Errorf("journal %s: %w", name, err)
	}
	if crc32.Checksum(p, castagnoli) != sum {
		if end == size {
			return nil, 0, true, nil
		}
		return nil, 0, false, fmt.Errorf("%w: %s: checksum mismatch in record at byte %d", ErrCorrupt, name, off)
	}
	return p, 8 + ln, false, nil
}

// headerTorn reports a file that is a strict prefix of a valid journal
// header: the magic (or part of it) followed by an incomplete identity frame.
func headerTorn(r io.ReaderAt, size int64) bool {
	sr := io.NewSectionReader(r, 0, size)
	m := make([]byte, min(size, int64(len(magic))))
	if _, err := io.ReadFull(sr, m); err != nil || string(m) != magic[:len(m)] {
		return false
	}
	if size < int64(len(magic)) {
		return true
	}
	_, _, torn, err := readFrame(sr, int64(len(magic)), size, "")
	return err == nil && torn
}
