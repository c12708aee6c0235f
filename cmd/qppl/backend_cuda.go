//go:build cuda

package main

import (
	"fmt"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/gpu"
)

// openCUDA opens the GPUs of --gpus (default 0) for the CUDA backend.
func openCUDA(load deviceLoader, o backendOptions) (backends.Backend, error) {
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
	return newCUDABackend(load, devs, split, o, "cuda")
}
