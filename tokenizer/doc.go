// Package tokenizer encodes and decodes text exactly as the Hugging Face
// tokenizers library (v0.2x) does, from a tokenizer.json file.
//
// Pipeline (as in HF): added tokens are matched on the raw text
// (leftmost-longest, with lstrip/rstrip/single_word), the remaining
// segments are normalized, tokens flagged normalized are then matched on
// the normalized text, the pre-tokenizer splits segments into words, the
// BPE model turns each word into ids (rank map + priority queue, cached per
// word), and the post-processor adds special tokens when asked.
//
// Supported components: model BPE (byte-level or byte_fallback,
// unk/fuse_unk, continuing_subword_prefix, end_of_word_suffix,
// ignore_merges; merges as "a b" strings or [a, b] pairs); normalizers
// Sequence, Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip,
// StripAccents, ByteLevel; pre-tokenizers ByteLevel, Split, Digits,
// Metaspace, Whitespace, WhitespaceSplit, Punctuation, Sequence;
// post-processors TemplateProcessing, ByteLevel, RobertaProcessing,
// BertProcessing, Sequence; decoders ByteLevel, Metaspace, ByteFallback,
// Fuse, Strip, Replace, BPEDecoder, Sequence.
//
// The GPT-2, Llama-3 and Qwen2 split regexes (which use look-ahead) run on
// a hand-written scanner checked against github.com/dlclark/regexp2; any
// other regex runs on regexp2. SentencePiece-style models (no
// pre-tokenizer: the whole text is one word) are cut before each U+2581
// when the vocabulary proves no merge can cross it, which keeps them linear
// and cached. Text is processed as UTF-8; invalid bytes in the input are
// replaced by U+FFFD first (a Python str cannot hold them).
//
// Unicode versions: HF's regexes classify \p{L}/\p{N} with Unicode 16,
// Rust's char methods (Digits, Lowercase) use Unicode 17 and HF's
// normalizers Unicode 9 data, while Go's tables are Unicode 15;
// unicodever.go bridges these differences (each checked over every code
// point against the HF library). Patterns that fall back to regexp2 and
// the StripAccents and Punctuation components use Go's tables as they are.
//
// Behaviour follows HF tokenizers 0.23 (the version of the goldens in
// ../shared), including its quirks: normalized added tokens are shown in
// normalized form by IDToToken/Decode, the byte-fallback unk ordering, the
// Metaspace decoder dropping every U+2581 of the first token.
//
// Failure: Load and FromJSON return an error naming the file and the
// problem for malformed or unsupported files (unknown component type, a
// merge referring to an unknown token, a bad regex, ...); they never panic.
// Encode and Decode cannot fail once a tokenizer is loaded. A Tokenizer is
// safe for concurrent use.
package tokenizer
