package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts turns SIGINT and SIGTERM into the cancellation of a context.
// The first signal cancels: a running evaluation abandons its current
// window (or finishes it when the backend does not look at the context),
// the journal keeps every window finished before, and run exits 130
// (SIGINT) or 143 (SIGTERM) after printing how to resume. A second signal
// exits at once with the same code: journaled windows are fsync'd already,
// so nothing is lost but the window in flight.
type interrupts struct {
	ch     chan os.Signal
	cancel context.CancelFunc
	stderr io.Writer
	exit   func(int)
	// journaled: the command has a --run-dir, so finished windows are kept.
	journaled bool

	mu   sync.Mutex
	sig  os.Signal
	stop chan struct{}
	done chan struct{}
}

// watchInterrupts starts watching; call stop when the command returns.
func watchInterrupts(parent context.Context, stderr io.Writer) (context.Context, *interrupts) {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{ch: make(chan os.Signal, 2), cancel: cancel, stderr: stderr, exit: os.Exit,
		stop: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
	go in.loop()
	return ctx, in
}

func (in *interrupts) loop() {
	defer close(in.done)
	for {
		select {
		case <-in.stop:
			return
		case s := <-in.ch:
			in.mu.Lock()
			first := in.sig == nil
			if first {
				in.sig = s
			}
			journaled := in.journaled
			in.mu.Unlock()
			if first {
				kept := "finished ones are kept"
				if !journaled {
					kept = "nothing is saved without --run-dir"
				}
				fmt.Fprintf(in.stderr, "\nqppl: %s: stopping: the window in flight is abandoned, %s (send it again to exit at once)\n", signalName(s), kept)
				in.cancel()
				continue
			}
			fmt.Fprintf(in.stderr, "\nqppl: %s again: exiting now\n", signalName(s))
			in.exit(signalCode(s))
		}
	}
}

// signal returns the first signal received, nil when none.
func (in *interrupts) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// close stops watching and restores the default signal behaviour.
func (in *interrupts) close() {
	signal.Stop(in.ch)
	close(in.stop)
	<-in.done
	in.cancel()
}

// signalCode is the shell convention 128 + signal number: 130 for SIGINT,
// 143 for SIGTERM.
func signalCode(s os.Signal) int {
	if s == syscall.SIGTERM {
		return exitSIGTERM
	}
	return exitSIGINT
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}
