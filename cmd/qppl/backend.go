package main

import (
	"fmt"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/reference"
)

// backendOptions are the flags that choose and tune a backend.
type backendOptions struct {
	Name      string // reference | emu | cuda
	Precision string // bf16 | fp16 | fp32 (emu, cuda)
	GPUs      string
	GPUSplit  string
}

// openBackend is the one place that names concrete backends.
func openBackend(m *checkpoint.Model, o backendOptions) (backends.Backend, error) {
	switch o.Name {
	case "", "reference":
		return reference.New(m, reference.Options{})
	default:
		return nil, usageErr(fmt.Errorf("unknown backend %q (want reference, emu or cuda)", o.Name))
	}
}
