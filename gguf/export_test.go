package gguf

// TokenizerKVs exposes the converter's tokenizer metadata to the tests.
var TokenizerKVs = tokenizerKVs
