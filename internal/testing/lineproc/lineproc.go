// Package lineproc runs a helper program that takes commands on its
// standard input, one per line, and answers each with one line on its
// standard output: "ok" and what it returns, or anything else for an
// error. The foreign clients the interoperability tests and benchmarks
// drive (kazoo in Python, Curator in a JVM) are such programs; this package
// is how they are started, spoken to and stopped. It is a test rig.
package lineproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrExited: the program ended before it answered.
var ErrExited = errors.New("lineproc: the program exited")

// stopWait is how long Close waits for the program to end once its input
// is closed, before it kills it.
const stopWait = 10 * time.Second

// Proc is a running program. Its methods are safe for concurrent use, but
// commands must be sent one at a time: answers are matched to commands by
// their order.
type Proc struct {
	name   string // in errors: "kazoo", "curator"
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string   // the program's answers; closed at the end of its output
	exited chan struct{} // closed once the program has ended and waitErr is set
	stderr *tail

	waitErr   error // how the program ended
	closeOnce sync.Once
}

// Start starts cmd, which must not have been started, and waits for its
// first answer, the one it gives once ready; name prefixes its errors.
// The program dies with this process (SIGKILL when it ends). Close stops
// it.
func Start(ctx context.Context, name string, cmd *exec.Cmd) (*Proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &Proc{name: name, cmd: cmd, lines: make(chan string, 1), exited: make(chan struct{}), stderr: &tail{}}
	cmd.Stderr = p.stderr
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		// Wait reads out the standard error too, for the error that
		// reports the exit.
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if _, err := p.answer(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Pid returns the program's process id, to read its CPU time.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Send sends command and returns what follows the "ok " of its answer. An
// answer that is no "ok" is an error, and the answer less its "err " is
// returned beside it.
func (p *Proc) Send(ctx context.Context, command string) (string, error) {
	if _, err := io.WriteString(p.in, command+"\n"); err != nil {
		return "", fmt.Errorf("%s: %s: %w", p.name, command, err)
	}
	line, err := p.answer(ctx)
	if err != nil {
		return line, fmt.Errorf("%s: %s: %w", p.name, command, err)
	}
	return line, nil
}

// answer waits for the next answer, at most until ctx ends.
func (p *Proc) answer(ctx context.Context) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			select {
			case <-p.exited:
				return "", fmt.Errorf("%w (%v): %s", ErrExited, p.waitErr, p.stderr)
			case <-ctx.Done():
				return "", fmt.Errorf("%w: %s", ErrExited, p.stderr)
			}
		}
		rest, found := strings.CutPrefix(line, "ok ")
		if !found && line != "ok" {
			return strings.TrimPrefix(line, "err "), errors.New(line)
		}
		return rest, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Close closes the program's input, which tells it to stop (a client
// closes its session at the end of its input), waits for it to end and
// returns how it ended; it kills a program that has not ended after 10
// seconds. It is idempotent.
func (p *Proc) Close() error {
	p.closeOnce.Do(func() {
		p.in.Close()
		go func() {
			for range p.lines { // answers nobody will read
			}
		}()
		select {
		case <-p.exited:
		case <-time.After(stopWait):
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p.waitErr
}

// tail keeps the last 16 KiB the program wrote to its standard error, for
// the error that reports its exit.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if n := len(t.buf); n > 16<<10 {
		t.buf = t.buf[n-16<<10:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
