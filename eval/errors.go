package eval

import (
	"errors"
	"fmt"
)

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

// Interrupted is returned by a run stopped by its context (SIGINT,
// SIGTERM): Done of Total windows (of this shard) are finished, journaled
// in RunDir when the run has one. qppl prints the command that resumes it
// when RunDir is set.
type Interrupted struct {
	Err         error
	RunDir      string // "" without --run-dir
	Done, Total int
	// Note, when set (compare --run-dir), replaces the count of saved
	// windows in the message.
	Note string
}

func (e *Interrupted) Error() string {
	if e.RunDir == "" {
		return fmt.Sprintf("%v; nothing was saved (no --run-dir): rerun with --run-dir DIR to make the run resumable", e.Err)
	}
	if e.Note != "" {
		return fmt.Sprintf("%v; %s", e.Err, e.Note)
	}
	return fmt.Sprintf("%v; %d of %d windows are saved in %s", e.Err, e.Done, e.Total, JournalPath(e.RunDir))
}

func (e *Interrupted) Unwrap() error { return e.Err }

// interruptedBy is the user-facing form of a run stopped by its context:
// "interrupted (SIGINT)" style wording without Go's "context canceled";
// errors.Is still finds the cause.
type interruptedBy struct{ cause error }

func (e interruptedBy) Error() string { return "interrupted" }
func (e interruptedBy) Unwrap() error { return e.cause }
