// Package ggufemu holds the end-to-end tests of the CUDA backend on GGUF
// files (cuda.NewGGUF), run by the emulator: F32 conversions against their
// safetensors models, every ggml type against the float64 reference, and
// llama.cpp's own quantized files. They live in their own package so
// that their run time is not added to backends/cuda's test budget. It has
// no code of its own.
package ggufemu
