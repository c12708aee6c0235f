package main

import (
	"errors"
	"fmt"
	"strconv"
)

// resolveShard turns --shard auto into "I/N" from the environment of the
// scale-out engine running this process: a Slurm job array
// (SLURM_ARRAY_TASK_ID, with SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT
// or SLURM_ARRAY_TASK_MAX) or a Kubernetes Indexed Job
// (JOB_COMPLETION_INDEX, with --shards N). Any other --shard is returned as
// it is; --shards goes only with --shard auto.
func resolveShard(shard string, shards int, getenv func(string) string) (string, error) {
	if shard != "auto" {
		if shards != 0 {
			return "", errors.New("--shards N goes with --shard auto (a Kubernetes Indexed Job's completions)")
		}
		return shard, nil
	}
	if shards < 0 {
		return "", fmt.Errorf("--shards %d: must be >= 1", shards)
	}
	envInt := func(name string) (int, bool, error) {
		s := getenv(name)
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return 0, true, fmt.Errorf("--shard auto: %s=%q is not a non-negative integer", name, s)
		}
		return v, true, nil
	}
	if id, ok, err := envInt("SLURM_ARRAY_TASK_ID"); err != nil {
		return "", err
	} else if ok {
		lo, _, err := envInt("SLURM_ARRAY_TASK_MIN")
		if err != nil {
			return "", err
		}
		n, hasCount, err := envInt("SLURM_ARRAY_TASK_COUNT")
		if err != nil {
			return "", err
		}
		if !hasCount {
			hi, hasMax, err := envInt("SLURM_ARRAY_TASK_MAX")
			if err != nil {
				return "", err
			}
			if !hasMax {
				return "", errors.New("--shard auto: SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX: submit with sbatch --array=0-N")
			}
			n = hi - lo + 1
		}
		if shards != 0 && shards != n {
			return "", fmt.Errorf("--shard auto: --shards %d, but the Slurm array has %d tasks", shards, n)
		}
		if id < lo || id-lo >= n {
			return "", fmt.Errorf("--shard auto: SLURM_ARRAY_TASK_ID %d is outside the array [%d, %d]: use a contiguous --array=0-%d", id, lo, lo+n-1, n-1)
		}
		return fmt.Sprintf("%d/%d", id-lo, n), nil
	}
	if idx, ok, err := envInt("JOB_COMPLETION_INDEX"); err != nil {
		return "", err
	} else if ok {
		if shards == 0 {
			return "", errors.New("--shard auto in a Kubernetes Indexed Job needs --shards N (the Job's completions)")
		}
		if idx >= shards {
			return "", fmt.Errorf("--shard auto: JOB_COMPLETION_INDEX %d is not below --shards %d", idx, shards)
		}
		return fmt.Sprintf("%d/%d", idx, shards), nil
	}
	return "", errors.New("--shard auto: neither a Slurm job array (SLURM_ARRAY_TASK_ID) nor a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) is set: give --shard I/N")
}
