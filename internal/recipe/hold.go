package recipe

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/telemetry"
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
	// Lazy defers the watches (one round trip and two goroutines) to the
	// first call of Context, so that a holder who never looks at its
	// context pays only for the create, the listing and the delete.
	// Release still reports as lost a node found deleted, an ended
	// session, and a disconnection under the Disconnected policy.
	Lazy bool
	// OnEnd, when not nil, is called once when the hold ends: with nil
	// when it was released (Release, Stop) while live, and with the cause
	// when it was lost. A loss is reported when the hold notices it: by a
	// watch, by Context, or at the latest by Release, which first checks
	// whether the node is still there. It must not block.
	OnEnd func(lost error)
	// Front says that the hold is exclusive (granted as the first
	// contender under Predecessor, it stays first until its node goes)
	// and was granted after a wait (see AcquireWaited). Its release then
	// records that it left from the front, where the store can
	// (store.FrontDeleter), so that the contender behind it needs no
	// listing to know that it is first now.
	Front bool
	// Rec, when not nil, is the recorder of the primitive that holds: the
	// release's removal logs to it (see Remove).
	Rec *telemetry.Recorder
}

// Hold is a granted contender node, held until its Context is cancelled.
// Its methods are safe for concurrent use.
type Hold struct {
	st     store.Store
	node   store.Node
	opts   HoldOptions
	ctx    context.Context
	cancel context.CancelCauseFunc

	// disc is the Disconnected channel of the grant's time when
	// opts.Disconnected is set, nil otherwise: it stays closed once a
	// disconnection happened, so even an unwatched hold can tell.
	disc <-chan struct{}

	mu       gosync.Mutex
	watching bool // the watches were started
	stopped  bool // Stop or Release was called: start nothing more
	released bool // Release was called
	pending  bool // the last Release left the node to the cleaner
	wg       gosync.WaitGroup

	ended gosync.Once // guards opts.OnEnd
}

// NewHold starts holding node, a granted contender of st's session. The
// hold's context is derived from st.Context(). Unless opts.Lazy, NewHold
// starts a goroutine that watches the node, and one that watches the
// connection when opts.Disconnected is set; Release (or Stop) ends them.
func NewHold(st store.Store, node store.Node, opts HoldOptions) *Hold {
	ctx, cancel := context.WithCancelCause(st.Context())
	h := &Hold{st: st, node: node, opts: opts, ctx: ctx, cancel: cancel}
	if opts.Disconnected != nil {
		h.disc = st.Disconnected()
	}
	if !opts.Lazy {
		h.startWatch()
	}
	return h
}

// startWatch starts the watches once, unless the hold was stopped.
func (h *Hold) startWatch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watching || h.stopped {
		return
	}
	h.watching = true
	if h.disc != nil {
		// Apart from the node's watch, which may be blocked in a call
		// that waits for the connection to come back.
		h.wg.Go(func() {
			select {
			case <-h.disc:
				h.lose(h.opts.Disconnected)
			case <-h.ctx.Done():
			}
		})
	}
	h.wg.Go(h.watch)
}

// Context returns the hold's context, cancelled with a cause when the hold
// ends. Under HoldOptions.Lazy the first call starts the watches.
//
// Context first looks at what the store knows now: when the session has
// ended (the adapters check their session deadline when asked) or, under
// HoldOptions.Disconnected, the connection was lost since the grant, the
// context it returns is cancelled already, whether or not a watch has
// reported it yet.
func (h *Hold) Context() context.Context {
	h.check()
	h.startWatch()
	return h.ctx
}

// check ends the hold if the store reports, now, an end the watches may not
// have delivered yet.
func (h *Hold) check() {
	if h.ctx.Err() != nil {
		return
	}
	// Asking is what makes an adapter end a session whose deadline has
	// passed; the hold's context is derived from the session's.
	h.st.Context()
	SyncSession(h.st)
	if h.disc != nil {
		select {
		case <-h.disc:
			h.lose(h.opts.Disconnected)
		default:
		}
	}
	h.noticeEnd()
}

// Node returns the held node.
func (h *Hold) Node() store.Node { return h.node }

// Guard returns the guard of the held node (see store.Guard): a write
// guarded by it is applied only while the node is there, which is while
// the hold is held at the server.
func (h *Hold) Guard() store.Guard { return store.Guard{Path: h.node.Path, Seq: h.node.Seq} }

// Token returns the fencing token of the hold: the node's, which grows
// with every successive grant at the same path, across the reclaiming of
// its directory too (see store.Node.Fence).
func (h *Hold) Token() int64 { return h.node.Fence() }

// Release ends the hold with cause and removes the node (see Remove: it
// tries within ctx and CleanupGrace, then leaves the node to the session's
// cleaner and reports ErrRemovalPending). It returns lost, the cause of an
// end that came before the release (nil if the hold was still live;
// HoldOptions.Deleted if the node was found already deleted), and err, the
// failure to remove the node.
//
// Release is idempotent: a later call reports no loss (the first did) and
// removes nothing new, returning holderr.ErrReleased, unless the removal
// was left pending, which it then tries again as the first did (nil once
// the node is gone). Concurrent calls are one release and later calls.
func (h *Hold) Release(ctx context.Context, cause error) (lost, err error) {
	h.mu.Lock()
	again, pending := h.released, h.pending
	h.released = true
	h.mu.Unlock()
	switch {
	case again && !pending:
		return nil, holderr.ErrReleased
	case again:
		_, err = h.remove(ctx)
		return nil, err
	}
	h.check() // an end nobody watched for
	if h.ctx.Err() != nil {
		lost = context.Cause(h.ctx)
	}
	h.stop(cause)
	gone, err := h.remove(ctx)
	if lost == nil && gone {
		// Deleted by someone else or with the session, and nobody
		// watched it go.
		SyncSession(h.st)
		lost = h.opts.Deleted
		if c := context.Cause(h.st.Context()); c != nil {
			lost = c
		}
	}
	h.report(lost)
	return lost, err
}

// remove removes the node, and records whether its removal is left
// pending.
func (h *Hold) remove(ctx context.Context) (gone bool, err error) {
	gone, err = remove(ctx, h.st, h.opts.Rec, nodeID{path: h.node.Path, seq: h.node.Seq, front: h.opts.Front})
	h.mu.Lock()
	h.pending = errors.Is(err, ErrRemovalPending)
	h.mu.Unlock()
	return gone, err
}

// Stop ends the hold with cause, if it has not ended yet, and waits for its
// goroutines; it leaves the node in place.
func (h *Hold) Stop(cause error) {
	h.stop(cause)
	if cause == nil {
		cause = context.Canceled // what cancel(nil) sets
	}
	var lost error
	if c := context.Cause(h.ctx); c != cause {
		lost = c // it had ended before
	}
	h.report(lost)
}

func (h *Hold) stop(cause error) {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.cancel(cause)
	h.wg.Wait()
}

// noticeEnd reports an end found while the hold was not being stopped (a
// stopping Release or Stop reports the end itself, once it knows whether the
// hold was lost).
func (h *Hold) noticeEnd() {
	if h.ctx.Err() == nil {
		return
	}
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if !stopped {
		h.report(context.Cause(h.ctx))
	}
}

// report calls opts.OnEnd, once.
func (h *Hold) report(lost error) {
	if h.opts.OnEnd != nil {
		h.ended.Do(func() { h.opts.OnEnd(lost) })
	}
}

// watch cancels the hold when the own node goes or the session ends.
func (h *Hold) watch() {
	for attempt := 0; ; attempt++ {
		wctx, stop := context.WithCancel(h.ctx)
		stat, ev, err := store.WatchNode(wctx, h.st, h.node.Path)
		gone := errors.Is(err, store.ErrNoNode)
		if err != nil && !gone {
			stop()
			if h.ctx.Err() != nil {
				h.noticeEnd() // the session's end, say
				return
			}
			if errors.Is(err, store.ErrDisconnected) {
				if err := Pause(h.ctx, h.st, attempt); err != nil {
					h.lose(err)
					return
				}
				continue
			}
			h.lose(err)
			return
		}
		if gone || stat.Seq != h.node.Seq {
			// Gone, or gone and made again under its name by someone
			// else: not ours any more.
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
			h.noticeEnd()
			return
		}
	}
}

// lose ends the hold with cause, unless the session ended, whose own cause
// then wins: an expiry also deletes the node and cuts the connection, and
// the holder should be told the real reason.
func (h *Hold) lose(cause error) {
	SyncSession(h.st)
	if c := context.Cause(h.st.Context()); c != nil {
		cause = c
	}
	// Reported before the context is cancelled, so that whoever sees
	// it end finds the loss recorded.
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if !stopped && h.ctx.Err() == nil {
		h.report(cause)
	}
	h.cancel(cause)
	h.noticeEnd()
}

// DisconnectPolicy says what a lost connection does to a hold. The sync and
// election packages export it under their own names and documentation.
type DisconnectPolicy int

const (
	// LoseOnDisconnect ends a hold when the connection is lost.
	LoseOnDisconnect DisconnectPolicy = iota
	// KeepOnDisconnect ends a hold only when the session ends or its node
	// goes.
	KeepOnDisconnect
)

func (p DisconnectPolicy) String() string {
	switch p {
	case LoseOnDisconnect:
		return "lose-on-disconnect"
	case KeepOnDisconnect:
		return "keep-on-disconnect"
	}
	return fmt.Sprintf("DisconnectPolicy(%d)", int(p))
}
