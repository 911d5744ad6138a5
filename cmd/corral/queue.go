package main

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/queue"
)

func init() {
	commands["queue"] = command{summary: "put items into, and take them from, a queue", run: runQueue}
}

func runQueue(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "queue", "[flags] put PATH DATA | take PATH | consume PATH",
		"put: add DATA to the queue at PATH (--priority: higher first).\n"+
			"take: wait for one item and print it.\n"+
			"consume: print items, one per line, until interrupted.\n"+
			"take and consume remove an item only once it has been written out\n"+
			"(at-least-once): an item being taken when corral is killed stays queued.")
	prio := fs.Int("priority", 0, "priority of the item put")
	timeout := fs.Duration("timeout", 0, "take: give up after this long (exit 3); 0 waits forever")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: want put, take or consume", errUsage)
	}
	verb, pos := pos[0], pos[1:]
	switch verb {
	case "put":
		err = wantArgs(pos, 2, "PATH DATA")
	case "take", "consume":
		err = wantArgs(pos, 1, "PATH")
	default:
		err = fmt.Errorf("%w: unknown queue action %q (want put, take or consume)", errUsage, verb)
	}
	if err != nil {
		return err
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	q, err := queue.New(st, pos[0], queue.WithDelivery(queue.AtLeastOnce))
	if err != nil {
		return err
	}
	switch verb {
	case "put":
		return q.PutPriority(ctx, []byte(pos[1]), *prio)
	case "take":
		tctx := ctx
		if *timeout > 0 {
			var cancel context.CancelFunc
			tctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		it, err := q.Take(tctx)
		if err != nil {
			return err
		}
		return emit(ctx, e, it)
	}
	c := q.Consume(ctx)
	defer c.Close()
	for it := range c.Items() {
		if err := emit(ctx, e, it); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return errInterrupted // the normal end of consume
	}
	return c.Err()
}

// emit writes an item out, then acknowledges it; an item that cannot be
// written goes back to the queue.
func emit(ctx context.Context, e *env, it *queue.Item) error {
	actx := context.WithoutCancel(ctx)
	if _, err := fmt.Fprintf(e.stdout, "%s\n", it.Data); err != nil {
		_ = it.Nack(actx)
		return err
	}
	return it.Ack(actx)
}
