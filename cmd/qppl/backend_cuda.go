//go:build cuda

package main

import (
	"fmt"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/gpu"
	"github.com/qppl/qppl/checkpoint"
)

// openCUDA opens the GPUs of --gpus (default 0) for the CUDA backend.
func openCUDA(m *checkpoint.Model, o backendOptions) (backends.Backend, error) {
	ids, split, err := parseDevices(o)
	if err != nil {
		return nil, err
	}
	var devs []device.Device
	for _, id := range ids {
		d, err := gpu.Open(id)
		if err != nil {
			for _, x := range devs {
				x.Close()
			}
			return nil, fmt.Errorf("--gpus: %w", err)
		}
		devs = append(devs, d)
	}
	return newCUDABackend(m, devs, split, o, "cuda")
}
