package recipe

import (
	"context"
	"errors"
	gosync "sync"

	"github.com/corral-go/corral/store"
)

// HoldOptions say which causes a Hold reports for the ends it detects
// itself.
type HoldOptions struct {
	// Deleted is the cause when the own node is deleted by someone else
	// while the session lives. It must not be nil.
	Deleted error
	// Disconnected, when not nil, ends the hold with this cause as soon as
	// the connection is lost (ownership unknown). When nil the hold
	// survives disconnections and ends only when the session does or the
	// node goes.
	Disconnected error
}

// Hold is a granted contender node, held until its Context is cancelled.
// Its methods are safe for concurrent use.
type Hold struct {
	st     store.Store
	node   store.Node
	opts   HoldOptions
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the hold's goroutines have exited
}

// NewHold starts holding node, a granted contender of st's session. The
// hold's context is derived from st.Context(). NewHold starts a goroutine
// that watches the node, and one that watches the connection when
// opts.Disconnected is set; Release (or Stop) ends them.
func NewHold(st store.Store, node store.Node, opts HoldOptions) *Hold {
	ctx, cancel := context.WithCancelCause(st.Context())
	h := &Hold{st: st, node: node, opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	var wg gosync.WaitGroup
	if opts.Disconnected != nil {
		// Apart from the node's watch, which may be blocked in a call
		// that waits for the connection to come back.
		disc := st.Disconnected()
		wg.Go(func() {
			select {
			case <-disc:
				h.lose(opts.Disconnected)
			case <-ctx.Done():
			}
		})
	}
	go func() {
		h.watch()
		wg.Wait()
		close(h.done)
	}()
	return h
}

// Context returns the hold's context, cancelled with a cause when the hold
// ends.
func (h *Hold) Context() context.Context { return h.ctx }

// Node returns the held node.
func (h *Hold) Node() store.Node { return h.node }

// Token returns the fencing token of the hold: the node's Seq, which grows
// with every successive grant under the same directory.
func (h *Hold) Token() int64 { return h.node.Seq }

// Release ends the hold with cause and removes the node (on
// context.WithoutCancel(ctx), bounded by CleanupTimeout). It returns lost,
// the cause of an end that came before the release (nil if the hold was
// still live), and err, the failure to remove the node. A second Release
// reports the first one's cause as lost and removes nothing new.
func (h *Hold) Release(ctx context.Context, cause error) (lost, err error) {
	if h.ctx.Err() != nil {
		lost = context.Cause(h.ctx)
	}
	h.Stop(cause)
	return lost, Remove(ctx, h.st, h.node.Path)
}

// Stop ends the hold with cause, if it has not ended yet, and waits for its
// goroutine; it leaves the node in place.
func (h *Hold) Stop(cause error) {
	h.cancel(cause)
	<-h.done
}

// watch cancels the hold when the own node goes or the session ends.
func (h *Hold) watch() {
	for attempt := 0; ; attempt++ {
		wctx, stop := context.WithCancel(h.ctx)
		exists, ev, err := h.st.ExistsW(wctx, h.node.Path)
		if err != nil {
			stop()
			if h.ctx.Err() != nil {
				return
			}
			if errors.Is(err, store.ErrDisconnected) {
				if err := pause(h.ctx, h.st, attempt); err != nil {
					h.lose(err)
					return
				}
				continue
			}
			h.lose(err)
			return
		}
		if !exists {
			stop()
			h.lose(h.opts.Deleted)
			return
		}
		select {
		case e := <-ev:
			stop()
			if e.Err == nil && e.Type == store.EventDeleted {
				h.lose(h.opts.Deleted)
				return
			}
		case <-h.ctx.Done():
			stop()
			return
		}
	}
}

// lose ends the hold with cause, unless the session ended, whose own cause
// then wins: an expiry also deletes the node and cuts the connection, and
// the holder should be told the real reason.
func (h *Hold) lose(cause error) {
	syncSession(h.st)
	if c := context.Cause(h.st.Context()); c != nil {
		cause = c
	}
	h.cancel(cause)
}
