// Package dataset finds and reads evaluation text (WikiText-2 rows as JSONL
// or parquet, llama.cpp's wiki.test.raw, plain text) and token files, joins
// rows the way each evaluation method does, and resolves data and models in
// the Hugging Face hub cache.
//
// CONTRACT SKELETON: the exported names below are used by other packages.
// The owner of this package may add to them but must keep these signatures.
package dataset

import "errors"

// ReadTokens reads an int32 little-endian token file.
func ReadTokens(path string) ([]int32, error) { return nil, errors.New("dataset: not implemented yet") }

// WriteTokens writes ids as int32 little-endian, atomically.
func WriteTokens(path string, ids []int32) error { return errors.New("dataset: not implemented yet") }
