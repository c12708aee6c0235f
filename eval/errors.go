package eval

import "errors"

// InputError marks an error caused by the user's input (a file, an option,
// a run directory of another run): qppl exits 2 for it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Input wraps err as an *InputError (nil stays nil).
func Input(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{err}
}

// IsInput reports whether err is, or wraps, an *InputError.
func IsInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// Interrupted is returned by Evaluate when its context was cancelled: Done
// of Total windows (of this shard) are finished, journaled when the run has
// a run directory.
type Interrupted struct {
	Err         error
	Done, Total int
}

func (e *Interrupted) Error() string { return e.Err.Error() }
func (e *Interrupted) Unwrap() error { return e.Err }
