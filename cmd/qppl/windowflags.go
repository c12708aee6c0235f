package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/compare"
)

// defaultStride is the window stride when --stride is not given: a quarter
// of the window (compare_q's 512 at 2048), so that no token goes unscored
// whatever --ctx is.
func defaultStride(ctx int) int { return max(1, ctx/4) }

// allowGapsFlag lets a stride larger than the window leave tokens unscored.
var allowGapsFlag = &cli.BoolFlag{Name: "allow-gaps", Usage: "accept a --stride larger than --ctx, which leaves the tokens between windows unscored"}

// checkGaps refuses a stride that skips tokens (stride > ctx) for a method
// that uses one, unless --allow-gaps.
func checkGaps(cmd string, method compare.Method, ctx, stride int, allowGaps bool) error {
	if method.UsesStride() && stride > ctx && !allowGaps {
		return fmt.Errorf("%s: --stride %d is larger than --ctx %d: the %d tokens between windows would never be scored (--allow-gaps to accept)", cmd, stride, ctx, stride-ctx)
	}
	return nil
}

// checkStrideUsed refuses an explicit --stride for a method that ignores it.
func checkStrideUsed(cmd string, method compare.Method, strideSet bool) error {
	if strideSet && !method.UsesStride() {
		return fmt.Errorf("%s: --stride: method %s does not use a stride (its windows are fixed by --ctx)", cmd, method)
	}
	return nil
}
