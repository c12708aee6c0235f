// Package checkpoint reads and writes Hugging Face model directories:
// validated safetensors files (single or sharded through
// model.safetensors.index.json) and config.json's family-independent
// keys (ParseConfig; package arch applies each family's defaults and
// quirks). It does no model math.
//
// # Layout
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON (right-padded with spaces) describing every tensor's dtype, shape and
// data_offsets relative to byte 8+N, then the tensor bytes. Open validates
// the whole header before handing out a File: N is bounded (≤ 100,000,000 and
// ≤ the file size) before anything is allocated, every dtype is known with its
// bit width, every tensor's byte size equals numel·bits/8 exactly, offsets
// sorted by begin are contiguous from 0 with no hole or overlap, and the file
// ends exactly at 8+N+last_end. A Model maps its files read-only where the
// system allows and hands out each tensor's bytes from the mapping (no copy;
// the kernel pages them in, and out again for a model larger than memory),
// else reads them through io.ReaderAt, one tensor at a time. Tensor bytes
// must not be modified: a write into mapped bytes faults.
//
// # Failures
//
// Every error names the file (and the tensor or config key where there is
// one) and wraps one of the sentinel errors ErrFormat (malformed
// safetensors or index), ErrConfig (malformed or unsupported config.json),
// ErrNotFound (missing file or tensor) and ErrUnsupported (a dtype that has
// no float64 decoding), so callers can test with errors.Is. Nothing read from
// a file ever causes a panic.
package checkpoint
