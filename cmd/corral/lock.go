package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	corralsync "github.com/corral-go/corral/sync"
)

func init() {
	commands["lock"] = command{summary: "run a command while holding a lock", run: runLock, runner: runsCmd}
}

// releaseTimeout bounds the cleanup that runs after the work is done or
// interrupted.
const releaseTimeout = 10 * time.Second

func runLock(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "lock", "[flags] PATH -- CMD [ARGS]",
		"Runs CMD while holding the lock at PATH and exits with CMD's exit status.\n"+
			"If the lock is lost while CMD runs, CMD gets SIGTERM, then SIGKILL after --grace,\n"+
			"and corral exits with status 125. Locks exclude Curator, go-zookeeper and etcd\n"+
			"concurrency.Mutex clients on the same path.")
	timeout := fs.Duration("timeout", 0, "give up acquiring after this long (exit 124); 0 waits forever")
	shared := fs.Bool("shared", false, "take a shared (read) lock: shared holders run together, exclusive ones alone")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lock is lost")
	label := fs.String("label", "", "a label for the lock's node, beside the host and pid (shown by corral locks)")
	keep := fs.Bool("keep-on-disconnect", false, "keep running through a lost connection until the session expires (default: stop CMD at once, since ownership is unknown)")
	path, argv, err := parsePathCmd(fs, args)
	if err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()

	policy := corralsync.LoseOnDisconnect
	if *keep {
		policy = corralsync.KeepOnDisconnect
	}
	opts := []corralsync.LockOption{corralsync.WithDisconnectPolicy(policy), corralsync.WithLabel(*label)}
	var l locker
	if *shared {
		l = readLocker(corralsync.NewRWMutex(st, path, opts...))
	} else {
		m := corralsync.NewMutex(st, path, opts...)
		l = locker{m.Lock, m.Unlock, m.Context, m.Token}
	}
	return holdAndRun(ctx, e, l, *timeout, *grace, argv)
}

// runsCmd is the runner of commands that always run a CMD.
func runsCmd([]string) bool { return true }

// locker is the part of a Mutex or a shared RWMutex that lock needs.
type locker struct {
	lock, unlock func(context.Context) error
	context      func() context.Context
	token        func() int64
}

// readLocker is the locker of one read hold of rw at a time.
func readLocker(rw *corralsync.RWMutex) locker {
	var r *corralsync.ReadHold // nil until lock: its Context is cancelled, its Token -1
	return locker{
		lock: func(ctx context.Context) (err error) {
			r, err = rw.RLock(ctx)
			return err
		},
		unlock:  func(ctx context.Context) error { return r.Unlock(ctx) },
		context: func() context.Context { return r.Context() },
		token:   func() int64 { return r.Token() },
	}
}

func holdAndRun(ctx context.Context, e *env, l locker, timeout, grace time.Duration, argv []string) error {
	actx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := l.lock(actx); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("lock not acquired within %v: %w", timeout, err)
		}
		return err
	}
	fmt.Fprintf(e.stderr, "corral: lock held, fencing token %d\n", l.token())
	return runHeld(ctx, l.context(), grace, argv, "lock", func(c context.Context) error { return l.unlock(c) })
}

// runHeld runs argv while held lasts and ctx is not interrupted, then
// releases. It is shared by lock and elect. Every failure of the release
// is reported, and fails corral, whatever became of the command.
func runHeld(ctx, held context.Context, grace time.Duration, argv []string, what string, release func(context.Context) error) error {
	both, cancel := context.WithCancelCause(held)
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()

	status, serr := supervise(both, argv, grace)
	// Whether the hold ended under the command, read before the release
	// ends it anyway.
	lost := held.Err() != nil && ctx.Err() == nil
	cause := context.Cause(held)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	rerr := release(rctx)
	if rerr != nil {
		rerr = fmt.Errorf("release of the %s failed: %w", what, rerr)
	}
	var ran error // what became of the command, when it is news
	switch {
	case lost && serr != nil:
		ran = fmt.Errorf("%w: %s lost while the command ran (%v); command stopped", errLost, what, cause)
	case lost:
		// The command finished, but the hold had ended under it.
		ran = fmt.Errorf("%w: %s lost before the command finished (%v)", errLost, what, cause)
	case ctx.Err() != nil:
		ran = fmt.Errorf("%v: command stopped", context.Cause(ctx))
		if rerr == nil {
			return &exitError{code: signalCode(ctx), err: fmt.Errorf("%w, %s released", ran, what)}
		}
	case serr != nil:
		ran = serr
	case status != 0 && rerr != nil:
		ran = fmt.Errorf("the command exited with status %d", status)
	case status != 0:
		return &exitError{code: status, status: true}
	}
	switch {
	case rerr == nil:
		return ran
	case ran == nil:
		return rerr
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("%v; %w", ran, rerr)}
}
