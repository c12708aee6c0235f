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
// record at the end of the file; Open detects it (short frame or checksum
// mismatch in the final frame) and truncates it away, so the caller redoes
// that one window. A bad checksum anywhere before the last frame, a header
// that does not parse, or a length larger than what remains of the file is
// corruption and is reported as an error naming the file and the byte offset;
// Open never guesses. An identity different from the caller's is refused with
// ErrIdentity, because resuming a different run would silently mix results.
// An open journal holds an exclusive advisory lock (flock on Unix), so a
// second process opening the same journal gets ErrBusy instead of
// interleaving its records with the first one's.
package journal
