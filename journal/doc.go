// Package journal is the append-only, checksummed record log that makes long
// evaluations resumable and shardable.
//
// A journal is one file. It starts with a header holding the run's identity
// (an opaque byte string, canonical JSON in practice: data spec, token-stream
// hash, model file hashes, method, backend, precision, shard), followed by
// records. Every record is framed as
//
//	u32 LE payload length | u32 LE CRC-32C of the payload | payload
//
// and is fsync'd before Append returns, so a record that Append reported as
// written survives a SIGKILL or a power cut.
//
// Failure model. A process killed while appending leaves at most one torn
// record at the end of the file; Open detects it (a frame shorter than 8
// bytes, a length reaching past the end of the file, or a checksum mismatch
// in a frame that ends exactly at the end of the file) and truncates it
// away, so the caller redoes that window. Because a torn append and a
// damaged length field look alike, a length reaching past the end is always
// taken as torn: whatever follows it is dropped and recomputed, never read
// as results. A bad checksum in a frame followed by more bytes, a length
// above MaxRecord, or a header that does not parse is corruption and is
// reported as an error naming the file and the byte offset. An identity different from the caller's is refused with
// ErrIdentity, because resuming a different run would silently mix results.
// An open journal holds an exclusive advisory lock (flock on Unix), so a
// second process opening the same journal gets ErrBusy instead of
// interleaving its records with the first one's.
package journal
