package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corralsync "github.com/corral-go/corral/sync"
)

func init() {
	commands["barrier"] = command{summary: "set, remove, wait on or enter a barrier", run: runBarrier, runner: entersCmd}
}

func runBarrier(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "barrier", "[flags] set|remove|wait PATH\n       corral barrier [flags] enter N PATH -- CMD [ARGS]",
		"set, remove: set or remove the barrier at PATH.\n"+
			"wait: block until the barrier at PATH is removed (at once if it is not set).\n"+
			"enter: a double barrier of N processes: wait until N have entered, run CMD,\n"+
			"then wait until all N have left. Exits with CMD's status.")
	timeout := fs.Duration("timeout", 0, "give up waiting after this long (exit 3; 124 for enter); 0 waits forever")
	pos, argv, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: want set, remove, wait or enter", errUsage)
	}
	verb, pos := pos[0], pos[1:]
	n := 0
	if verb == "enter" {
		if len(pos) != 2 || len(argv) == 0 {
			return fmt.Errorf("%w: want enter N PATH -- CMD", errUsage)
		}
		if n, err = strconv.Atoi(pos[0]); err != nil || n < 1 {
			return fmt.Errorf("%w: N must be a positive number, not %q", errUsage, pos[0])
		}
		if err := lookCmd(argv[0]); err != nil {
			return err
		}
		pos = pos[1:]
	} else if verb != "set" && verb != "remove" && verb != "wait" {
		return fmt.Errorf("%w: unknown barrier action %q (want set, remove, wait or enter)", errUsage, verb)
	}
	if err := wantArgs(pos, 1, "PATH"); err != nil {
		return err
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	sf.readOnly = verb == "wait"
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	wctx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	b := corralsync.NewBarrier(st, pos[0])
	switch verb {
	case "set":
		return b.Set(ctx)
	case "remove":
		return b.Remove(ctx)
	case "wait":
		return b.Wait(wctx)
	}
	return enter(ctx, wctx, corralsync.NewDoubleBarrier(st, pos[0], n), argv)
}

// entersCmd reports whether a barrier command line is "enter", which runs
// a CMD.
func entersCmd(args []string) bool { return slices.Contains(args, "enter") }

// enter runs argv inside a double barrier.
func enter(ctx, wctx context.Context, db *corralsync.DoubleBarrier, argv []string) error {
	if err := db.Enter(wctx); err != nil {
		return err
	}
	status, err := supervise(ctx, argv, 10*time.Second)
	if lerr := db.Leave(wctx); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		return err
	}
	if status != 0 {
		return &exitError{code: status, status: true}
	}
	return nil
}
