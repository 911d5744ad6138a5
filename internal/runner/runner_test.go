package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/runner"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errClosed = errors.New("closed")
	errUnmade = errors.New("unmade")
	errBody   = errors.New("body failed")
)

// wait fails t unless ch is closed within a second.
func wait(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatalf("%s not closed", what)
	}
}

// counter sends 0, 1, 2, ... on out until ctx ends, and returns why.
func counter(ctx context.Context, out chan<- int) error {
	for i := 0; ; i++ {
		select {
		case out <- i:
		case <-ctx.Done():
			return runner.Cause(ctx, errBody)
		}
	}
}

// TestClose: a running loop sends, stops on Close without C being
// drained, and reports Close's cause; Close again changes nothing.
func TestClose(t *testing.T) {
	l := runner.Start(t.Context(), counter)
	for want := range 3 {
		select {
		case got := <-l.C():
			if got != want {
				t.Fatalf("C() sent %d; want %d", got, want)
			}
		case <-time.After(time.Second):
			t.Fatal("C() sent nothing")
		}
	}
	if err := l.Err(errUnmade); err != nil {
		t.Errorf("Err of a running loop = %v; want nil", err)
	}
	l.Close(errClosed)
	wait(t, "Done", l.Done())
	if _, ok := <-l.C(); ok {
		t.Error("C() open after Close")
	}
	if err := l.Err(errUnmade); !errors.Is(err, errClosed) {
		t.Errorf("Err after Close = %v; want %v", err, errClosed)
	}
	l.Close(errBody)
	if err := l.Err(errUnmade); !errors.Is(err, errClosed) {
		t.Errorf("Err after a second Close = %v; want %v", err, errClosed)
	}
}

// TestBodyReturns: a body that stops by itself gives its error, which is
// there as soon as C is closed, and its context ends with that cause.
func TestBodyReturns(t *testing.T) {
	bodyCtx := make(chan context.Context, 1)
	l := runner.Start(t.Context(), func(ctx context.Context, out chan<- string) error {
		bodyCtx <- ctx
		out <- "one"
		return errBody
	})
	var got []string
	for s := range l.C() {
		got = append(got, s)
	}
	if len(got) != 1 || got[0] != "one" {
		t.Errorf("C() sent %q; want [one]", got)
	}
	if err := l.Err(errUnmade); !errors.Is(err, errBody) {
		t.Errorf("Err once C is closed = %v; want %v", err, errBody)
	}
	wait(t, "Done", l.Done())
	ctx := <-bodyCtx
	if cause := context.Cause(ctx); !errors.Is(cause, errBody) {
		t.Errorf("body's context cause = %v; want %v", cause, errBody)
	}
}

// TestParentEnds: a loop stops when the ctx it was started with ends, with
// that ctx's cause.
func TestParentEnds(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	l := runner.Start(ctx, counter)
	cancel(errClosed)
	wait(t, "Done", l.Done())
	if err := l.Err(errUnmade); !errors.Is(err, errClosed) {
		t.Errorf("Err after the parent ended = %v; want %v", err, errClosed)
	}
}

// TestStopDoesNotWait: Stop returns while the body is still busy; the loop
// is done once the body returns.
func TestStopDoesNotWait(t *testing.T) {
	release := make(chan struct{})
	l := runner.Start(t.Context(), func(ctx context.Context, _ chan<- int) error {
		<-ctx.Done()
		<-release
		return context.Cause(ctx)
	})
	l.Stop(errClosed)
	select {
	case <-l.Done():
		t.Fatal("Done closed while the body still runs")
	default:
	}
	close(release)
	wait(t, "Done", l.Done())
	if err := l.Err(errUnmade); !errors.Is(err, errClosed) {
		t.Errorf("Err after Stop = %v; want %v", err, errClosed)
	}
}

// TestStopped: a loop refused at its start has stopped with its error, and
// Close returns at once.
func TestStopped(t *testing.T) {
	l := runner.Stopped[int](errBody)
	wait(t, "Done", l.Done())
	if _, ok := <-l.C(); ok {
		t.Error("C() of a stopped loop is open")
	}
	l.Close(errClosed)
	if err := l.Err(errUnmade); !errors.Is(err, errBody) {
		t.Errorf("Err = %v; want %v", err, errBody)
	}
}

// TestNil: a nil Loop, the zero value of a type holding one, has stopped
// and says it was not made.
func TestNil(t *testing.T) {
	var l *runner.Loop[int]
	wait(t, "Done", l.Done())
	if _, ok := <-l.C(); ok {
		t.Error("C() of a nil loop is open")
	}
	l.Stop(errClosed)
	l.Close(errClosed)
	if err := l.Err(errUnmade); !errors.Is(err, errUnmade) {
		t.Errorf("Err = %v; want %v", err, errUnmade)
	}
}

// TestCause: the cause of an ended ctx wins over the error it made a call
// return; a live ctx leaves the error alone.
func TestCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	if err := runner.Cause(ctx, errBody); !errors.Is(err, errBody) {
		t.Errorf("Cause(live ctx, %v) = %v; want %v", errBody, err, errBody)
	}
	cancel(errClosed)
	if err := runner.Cause(ctx, context.Canceled); !errors.Is(err, errClosed) {
		t.Errorf("Cause(ended ctx, Canceled) = %v; want %v", err, errClosed)
	}
}
