package lineproc_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/lineproc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a program of the protocol: ready, then "ok" and the command for
// "echo ...", an error for "fail", and it exits (saying why on stderr) on
// "exit".
const echo = `echo "ok ready"
while read -r cmd arg; do
	case $cmd in
	echo) echo "ok $arg" ;;
	fail) echo "err no good" ;;
	exit) echo "going away" >&2; exit 3 ;;
	esac
done`

func start(t *testing.T) *lineproc.Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := lineproc.Start(ctx, "echo", exec.Command("sh", "-c", echo))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestProc(t *testing.T) {
	p := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := p.Send(ctx, "echo hello"); err != nil || got != "hello" {
		t.Fatalf(`Send("echo hello") = %q, %v; want "hello"`, got, err)
	}
	got, err := p.Send(ctx, "fail")
	if err == nil || got != "no good" || !strings.Contains(err.Error(), "echo: fail: err no good") {
		t.Fatalf(`Send("fail") = %q, %v; want "no good" and an error naming the command and the answer`, got, err)
	}
	if _, err := p.Send(ctx, "exit"); !errors.Is(err, lineproc.ErrExited) || !strings.Contains(err.Error(), "going away") {
		t.Fatalf(`Send("exit") = %v; want ErrExited with the program's stderr`, err)
	}
	if err := p.Close(); err == nil {
		t.Fatal("Close of a program that exited 3 = nil")
	}
	if err := p.Close(); err == nil {
		t.Fatal("a second Close forgot how the program ended")
	}
}

// TestCloseStopsIt: Close ends a program that waits for commands, by
// closing its input.
func TestCloseStopsIt(t *testing.T) {
	p := start(t)
	if err := p.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// TestSendCanceled: a Send whose ctx ends before the answer returns.
func TestSendCanceled(t *testing.T) {
	p := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Send(ctx, "nothing-answers-this"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with a cancelled ctx = %v; want context.Canceled", err)
	}
}
