package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Value is a node as a Node cache sees it.
type Value struct {
	// Node is the node: its Path always; its data and Stat when it
	// exists.
	store.Node
	// Exists reports whether the node exists.
	Exists bool
	// Stale reports that the connection is lost: the node may have
	// changed since this value was read. A value that is stale repeats
	// the last one read.
	Stale bool
}

func (v Value) String() string {
	stale := ""
	if v.Stale {
		stale = ", stale"
	}
	if !v.Exists {
		return fmt.Sprintf("%s: no node%s", v.Path, stale)
	}
	return fmt.Sprintf("%s: version %d, %d bytes%s", v.Path, v.Version, len(v.Data), stale)
}

func (v Value) equal(w Value) bool {
	return v.Exists == w.Exists && v.Stale == w.Stale && (!v.Exists || same(&v.Node, &w.Node))
}

func (v Value) clone() Value {
	v.Node = clone(&v.Node)
	return v
}

// NewNode follows the node at path, on the Node's Values channel: first
// the node as it is now (Exists false when it is missing), then after
// every change (see the package doc for what may merge). It follows a
// path that does not exist yet into its creation, and on through
// deletions and re-creations.
//
// NewNode returns at once. The Node runs in a goroutine of its own until
// ctx ends, the session ends, Close is called, or a read fails for a
// reason other than a lost connection (which is ridden out, and reported
// as a stale value); then Values is closed and Err says why. A nil store,
// an invalid path, a nil option or an option of a Tree give a Node that
// has stopped already, with Err wrapping store.ErrInvalidArgument or
// store.ErrInvalidPath. NewNode is safe for concurrent use.
func NewNode(ctx context.Context, st store.Store, path string, opts ...Option) *Node {
	o, err := newOptions(st, path, false, opts)
	if err != nil {
		return &Node{l: runner.Stopped[Value](fmt.Errorf("cache: node %q: %w", path, err))}
	}
	w := &nodeWatch{st: st, path: path, rec: telemetry.New(o.tel, telemetry.KindCacheNode, path, nil)}
	return &Node{l: runner.Start(ctx, w.run)}
}

// Node follows one node; see NewNode. Its methods are safe for concurrent
// use. The zero Node (and a nil one) has stopped.
type Node struct{ l *runner.Loop[Value] }

// Values returns the channel the node's values come on. It is closed when
// the Node has stopped; Err then says why. Each value is the receiver's
// own.
func (n *Node) Values() <-chan Value { return n.loop().C() }

// Done returns a channel that is closed when the Node has stopped, after
// its Values channel.
func (n *Node) Done() <-chan struct{} { return n.loop().Done() }

// Err returns nil while the Node runs and, once it stopped, why: the
// cause of its ctx, the end of the session (store.ErrSessionExpired,
// store.ErrClosed), ErrClosed after Close, or the error that stopped it.
// For the zero Node it returns an error wrapping store.ErrInvalidArgument.
func (n *Node) Err() error { return n.loop().Err(errZeroNode) }

var errZeroNode = fmt.Errorf("cache: node: %w: not made by NewNode", store.ErrInvalidArgument)

// Close stops the Node and waits until it has stopped, its watch and
// goroutine released. It does not need Values to be drained. It is
// idempotent and returns nil.
func (n *Node) Close() error { return n.loop().Close(ErrClosed) }

func (n *Node) loop() *runner.Loop[Value] {
	if n == nil {
		return nil
	}
	return n.l
}

// nodeWatch is the state of one Node's goroutine.
type nodeWatch struct {
	st    store.Store
	path  string
	rec   *telemetry.Recorder
	last  Value // the last value read
	tries int   // reads while disconnected
}

// run sends the node's values on out, until ctx or the session ends or a
// read fails for good, and returns why.
func (w *nodeWatch) run(ctx context.Context, out chan<- Value) error {
	w.last = Value{Node: store.Node{Path: w.path}}
	stale := false
	defer func() {
		if stale {
			w.rec.CacheStale(context.WithoutCancel(ctx), false) // a Node that stopped is not counted
		}
	}()
	return recipe.Follow(ctx, w.st, out, recipe.Follower[Value]{
		Read:  w.read,
		Equal: Value.equal,
		Copy:  Value.clone,
		Changed: func(ctx context.Context, v Value, first bool) {
			if v.Stale != stale {
				stale = v.Stale
				w.rec.CacheStale(ctx, stale)
			}
			if !first && !v.Stale {
				w.rec.CacheChanged(ctx, 1, -1)
			}
		},
		Failed: func(err error) error { return fmt.Errorf("cache: node %q: %w", w.path, err) },
	})
}

// read reads the node with a watch that fires on its next change, and one
// that fires when the connection is lost. While it is lost, it returns
// the last value, stale, and a watch that fires after a pause, to look
// again.
func (w *nodeWatch) read(ctx context.Context) (Value, []<-chan store.Event, error) {
	disc := w.st.Disconnected()
	select {
	case <-disc:
		v := w.last
		v.Stale = true
		w.tries++
		return v, []<-chan store.Event{after(ctx, pause(w.tries-1))}, nil
	default:
	}
	exists, _, ev, err := w.st.ExistsW(ctx, w.path)
	if err != nil {
		return Value{}, nil, err
	}
	watches := []<-chan store.Event{ev, closing(ctx, disc)}
	v := Value{Node: store.Node{Path: w.path}}
	if exists {
		n, err := w.st.Get(ctx, w.path)
		switch {
		case errors.Is(err, store.ErrNoNode):
			// Gone since: the watch fires for it.
		case err != nil:
			return Value{}, nil, err
		default:
			v = Value{Node: n, Exists: true}
		}
	}
	w.last, w.tries = v, 0
	return v, watches, nil
}

// pause is how long a Node waits before it looks again at a lost
// connection, the attempt-th time: as recipe.Pause.
func pause(attempt int) time.Duration {
	return min(10*time.Millisecond<<min(attempt, 6), 500*time.Millisecond)
}

// after returns a watch that fires after d, or with ctx's error when ctx
// ends first.
func after(ctx context.Context, d time.Duration) <-chan store.Event {
	ch := make(chan store.Event, 1)
	t := time.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C:
			ch <- store.Event{}
		case <-ctx.Done():
			ch <- store.Event{Err: ctx.Err()}
		}
		close(ch)
	}()
	return ch
}

// closing returns a watch that fires when c is closed, or with ctx's error
// when ctx ends first.
func closing(ctx context.Context, c <-chan struct{}) <-chan store.Event {
	ch := make(chan store.Event, 1)
	go func() {
		select {
		case <-c:
			ch <- store.Event{}
		case <-ctx.Done():
			ch <- store.Event{Err: ctx.Err()}
		}
		close(ch)
	}()
	return ch
}
