// Package dataset reads evaluation text and token files and turns WikiText
// rows into the exact strings each evaluation method tokenizes.
//
// Sources (Load, LoadAll; the kind is detected from the name and content, or
// forced with LoadOptions.Kind):
//   - KindJSONL: one JSON object per line, rows in field "text"
//     (LoadOptions.Column); blank lines skipped; errors give file:line.
//   - KindParquet: the Hugging Face parquet (test-00000-of-00001.parquet),
//     string column "text", read with github.com/parquet-go/parquet-go.
//   - KindArrow: Arrow IPC (stream or file format), as the datasets library
//     caches a prepared split (wikitext-test.arrow); flat schemas, Utf8 or
//     LargeUtf8 column, no nulls, uncompressed.
//   - KindRaw: llama.cpp's wiki.test.raw, the original WikiText file; its
//     rows are recovered with RowsFromRaw (a blank line is the row "").
//   - KindText: any UTF-8 text, used as is.
//
// Join modes (Corpus.Text, ParseJoinMode):
//   - "compare_q" (default): "\n\n".join(rows), empty rows kept (ExLlamaV3
//     compare_q classic, the HF perplexity guide). 1,294,336 chars for the
//     WikiText-2 test split, equal to test.joined.txt.
//   - "filtered": rows with an empty Python t.strip() dropped, then
//     "\n\n".join (compare_q final). 1,291,402 chars.
//   - "llamacpp": the wiki.test.raw content ("".join(row or " \n")) with one
//     trailing "\n" removed, as llama.cpp's -f does.
//
// A KindText corpus is returned as is by compare_q and filtered.
//
// lm-eval's wikitext task: Documents / Corpus.Documents split the corpus into
// the pages of EleutherAI/wikitext_document_level and give, per page, the
// wikitext_detokenizer output that is scored and the word and UTF-8 byte
// counts of the original page used by word_perplexity, byte_perplexity and
// bits_per_byte.
//
// Token files (ReadTokens, WriteTokens) are int32 little-endian; writes are
// atomic (temporary file, fsync, rename).
//
// Whitespace follows Python's str.isspace (\s, strip, split), not Go's.
//
// Failure: every reader returns an error naming the file (and the line for
// JSONL, the byte offset for invalid UTF-8); nothing panics on data: parquet
// library panics on malformed files are recovered into errors. Lengths read
// from files are checked before allocating.
//
// The Hugging Face hub cache and client are in the subpackage dataset/hub.
// Wiring for `qppl eval --dataset wikitext2 [--data FILE] [--join MODE]`:
//
//	c, res, err := hub.LoadWikiText(ctx, hub.WikiTextOptions{Data: data, Progress: os.Stderr}, dataset.LoadOptions{})
//	mode, err := dataset.ParseJoinMode(join) // "" → compare_q
//	text, err := c.Text(mode)                // then tokenize
//	docs := c.Documents()                    // --method lm-eval: tokenize each docs[i].Detokenized
//
// and `--model ID [--revision R]`: dir, err := hub.ResolveModel(ctx, id, hub.ModelOptions{Revision: r, Progress: os.Stderr}).
package dataset
