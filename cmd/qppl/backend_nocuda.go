//go:build !cuda

package main

import (
	"errors"

	"github.com/qppl/qppl/backends"
)

// openCUDA explains how to get a binary with the GPU backend: the default
// build never links gorgonia.org/cu (its init exits without a GPU).
func openCUDA(deviceLoader, backendOptions) (backends.Backend, error) {
	return nil, usageErr(errors.New("--backend cuda: this qppl was built without CUDA support; on a machine with an NVIDIA GPU and the CUDA toolkit run `make cuda` and use bin/qppl-cuda (or `go build -tags cuda ./cmd/qppl`); --backend emu runs the same kernels on the CPU"))
}
