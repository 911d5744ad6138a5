package recipe

import (
	"context"
	"errors"
	"time"

	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// An Order says how the contenders of a directory block one another: what
// a contender waits for before it is granted. It is a primitive's policy;
// everything else about a grant (the create, the wait, the confirmation,
// the hold) is the engine's, the same for every primitive.
type Order struct {
	// Block returns the watches of the nodes that block the contender at
	// index own of cs (the contenders of dir up to and including it, and
	// those after it where the view has them), or none when it is
	// granted. A watch with Touch also fires when its node is touched
	// (see Watch): how a primitive wakes one chosen waiter. nil: nothing
	// blocks.
	Block func(dir string, cs []Contender, own int) []Watch
	// Window is how many contenders up to its own a contender needs to
	// see to know what blocks it, where the store reads windows of
	// children (store.WindowLister); a window that shows no blocker and
	// does not start at the first contender is followed by the full
	// listing. 0: a contender needs all of them, always listed.
	Window int
	// Front says that a contender granted after a wait for the one before
	// it stays first until its node goes (an exclusive order): its
	// release records that it left from the front (see HoldOptions.Front).
	Front bool
	// Granted, when not nil, is the last step of a grant, given the number
	// of contenders behind the granted one in the view that granted it
	// (all of them when Window is 0): a semaphore touches its node to hand
	// its wait on to the next in line.
	Granted func(ctx context.Context, st store.Store, own store.Node, behind int) error
}

// The orders of the recipes that line up by Seq alone.
var (
	// Predecessor is the order of a mutex, a writer, an election
	// candidate and a shard: a contender waits for the one just before
	// it, whatever its kind.
	Predecessor = Order{Block: predecessor, Window: 4, Front: true}
	// LastWriter is the order of a reader: it waits for the last earlier
	// contender that is not a reader. Its window looks past other readers.
	LastWriter = Order{Block: lastWriter, Window: 16}
	// Unordered is the order of nodes that nothing blocks (a group's
	// members): a contender is granted as soon as it is made.
	Unordered = Order{}
)

func predecessor(dir string, cs []Contender, own int) []Watch {
	if own == 0 {
		return nil
	}
	return []Watch{cs[own-1].Watch(dir)}
}

func lastWriter(dir string, cs []Contender, own int) []Watch {
	for i := own - 1; i >= 0; i-- {
		if cs[i].Kind != Reader {
			return []Watch{cs[i].Watch(dir)}
		}
	}
	return nil
}

// Watch returns the watch that waits for c, a contender of dir, to go.
func (c Contender) Watch(dir string) Watch { return Watch{Path: store.Join(dir, c.Name), Seq: c.Seq} }

// Grants reports whether o grants the contender at index own of cs, the
// contenders of a directory (all of them, or those up to own for an order
// with a Window): whether nothing blocks it. A reader of the directory
// (inspect) tells holders from waiters with it.
func (o Order) Grants(cs []Contender, own int) bool { return len(o.block("", cs, own)) == 0 }

// block returns what blocks the contender at index own of cs under o.
func (o *Order) block(dir string, cs []Contender, own int) []Watch {
	if o.Block == nil {
		return nil
	}
	return o.Block(dir, cs, own)
}

// Spec is what a primitive's acquisitions make, and how they wait and hold:
// the whole of what tells one primitive's grants from another's.
type Spec struct {
	// Dir is the directory of the contenders, Prefix the name every
	// contender node starts with (before the store's unique suffix): its
	// marker tells the contender's kind and family (package names).
	Dir, Prefix string
	// Data returns the data of a contender node, given when its attempt
	// began (the identity record's start); nil: no data.
	Data func(start time.Time) []byte
	// Order says what a contender waits for.
	Order Order
	// Setting, when not nil, is what the contenders must agree on: Enter
	// refuses a contender whose view shows an earlier one with another
	// value (ErrMismatch). Prefix must record it (Setting.Prefix).
	Setting *Setting
	// Rec records the acquisitions and holds, and the removals of their
	// nodes; nil records nothing.
	Rec *telemetry.Recorder
	// Hold says what the grants' holds report. The engine sets Front, and
	// OnEnd (to Rec's record of the hold, before the primitive's own
	// OnEnd); Rec is Spec.Rec.
	Hold HoldOptions
}

// Acquire is the grant path of every primitive that waits: it records the
// attempt, creates a contender node, waits until the order grants it,
// confirms the grant (Confirm) and returns the node's hold. It blocks until
// then, ctx is done or the session ends.
//
// A lost connection is ridden out, the same way for every primitive: an
// attempt that fails with store.ErrDisconnected (its create, a read of the
// line, a wait) gives its place up, leaving no node behind or handing it to
// the session's cleaner, and starts again after a pause (Pause) while ctx
// and the session live. A connection lost while a waiter watches needs no
// new attempt: the wait itself rides it out (WaitAny).
//
// On any other error, or when ctx or the session ends, Acquire returns the
// error (with the session's end in front when it ended, see SessionErr)
// and leaves no node behind, or says it will be removed
// (ErrRemovalPending). It may be called concurrently.
func Acquire(ctx context.Context, st store.Store, spec *Spec) (*Hold, error) {
	a := spec.Rec.Begin(ctx)
	for attempt := 0; ; attempt++ {
		l, err := Enter(ctx, st, spec, a)
		if err == nil {
			var h *Hold
			if h, err = l.grant(ctx); err == nil {
				return h, nil
			}
			err = errors.Join(SessionErr(st, err), l.Leave(ctx))
		}
		if !RideOut(ctx, st, err, attempt) {
			a.Failed(ctx, err)
			return nil, err
		}
	}
}

// grant waits until the contender is granted and returns its hold.
func (l *Line) grant(ctx context.Context) (*Hold, error) {
	for {
		touched, err := l.Wait(ctx)
		if err != nil {
			return nil, err
		}
		if !touched {
			return l.Hold(ctx)
		}
	}
}

// TryAcquire is Acquire without the wait: a contender that the order does
// not grant at once is removed and TryAcquire returns nil and no error. A
// lost connection is the caller's error: a Try waits for nobody.
func TryAcquire(ctx context.Context, st store.Store, spec *Spec) (*Hold, error) {
	a := spec.Rec.Try()
	l, err := Enter(ctx, st, spec, a)
	if err != nil {
		a.Failed(ctx, err)
		return nil, err
	}
	blocked, err := l.Blocked(ctx)
	if err == nil && !blocked {
		var h *Hold
		if h, err = l.Hold(ctx); err == nil {
			return h, nil
		}
	}
	if err = errors.Join(err, l.Leave(ctx)); err != nil {
		a.Failed(ctx, err)
		return nil, err
	}
	a.Busy(ctx)
	return nil, nil
}

// A Line is one contender in its directory's line, from its create (Enter)
// until it holds (Hold) or leaves (Leave). Acquire and TryAcquire are made
// of it; a primitive that chooses among several lines (a striped lock)
// walks them with it. A Line is not safe for concurrent use.
type Line struct {
	st     store.Store
	spec   *Spec
	a      telemetry.Attempt
	node   store.Node
	v      view
	waited bool // for a blocker, at least once
	// touch is the Touch watches of the last wait, with the versions
	// they saw: a watch of the same node in the next wait starts from
	// there, so that a touch between two waits is not missed.
	touch []Watch
}

// Enter creates a contender node of spec, for the attempt a, and reads its
// view of the line: in one round trip where the store can (store.
// WindowLister for an order with a Window, else store.CreateLister). It
// first removes the session's own abandoned nodes in the directory (Flush),
// so that the new node never lines up behind one of them. On error no node
// is left behind, or the error says it will be removed (ErrRemovalPending);
// a directory that holds another recipe's nodes fails with
// ErrKindMismatch, and a contender whose setting differs from one before it
// with ErrMismatch.
func Enter(ctx context.Context, st store.Store, spec *Spec, a telemetry.Attempt) (*Line, error) {
	var data []byte
	if spec.Data != nil {
		data = spec.Data(a.Start())
	}
	l := &Line{st: st, spec: spec, a: a}
	var err error
	if spec.Order.Window == 0 || spec.Setting != nil {
		// A setting is agreed on with every contender before.
		var cs []Contender
		l.node, cs, err = Create(ctx, st, spec.Rec, spec.Dir, spec.Prefix, data)
		l.v = view{cs: cs, complete: true}
	} else {
		l.node, l.v, err = create(ctx, st, spec.Rec, spec.Dir, spec.Prefix, data, spec.Order.Window)
	}
	if err != nil {
		return nil, err
	}
	if s := spec.Setting; s != nil {
		i := Index(l.v.cs, l.node.Name())
		if i < 0 {
			return nil, errors.Join(OwnGone(st, l.node.Path), l.Leave(ctx))
		}
		if err := s.Agree(spec.Dir, l.v.cs, i); err != nil {
			return nil, errors.Join(err, l.Leave(ctx))
		}
	}
	return l, nil
}

// Node returns the contender's node.
func (l *Line) Node() store.Node { return l.node }

// Contenders returns the contenders of the line's latest view: all of them
// when the order's Window is 0.
func (l *Line) Contenders() []Contender { return l.v.cs }

// Blocked reports whether the order blocks the contender now, reading the
// full listing where the view read so far cannot tell. A contender whose
// node is gone fails with an error wrapping store.ErrNoNode or the session's
// end (OwnGone).
func (l *Line) Blocked(ctx context.Context) (bool, error) {
	ws, err := l.blockers(ctx)
	return len(ws) > 0, err
}

// blockers returns what blocks the contender now (see Blocked).
func (l *Line) blockers(ctx context.Context) ([]Watch, error) {
	dir, name := store.Parent(l.node.Path), l.node.Name()
	ws, decided, err := l.decide(dir, name)
	if err != nil || decided {
		return ws, err
	}
	if l.v, err = list(ctx, l.st, dir, name); err != nil {
		return nil, err
	}
	ws, _, err = l.decide(dir, name)
	return ws, err
}

// decide returns what blocks the contender in its view, and whether the
// view decides that: a complete view does, and so does a window that shows
// a blocker, or that lacks the own node (which is then gone).
func (l *Line) decide(dir, name string) (ws []Watch, decided bool, err error) {
	i := Index(l.v.cs, name)
	if i < 0 {
		return nil, true, OwnGone(l.st, l.node.Path)
	}
	ws = l.spec.Order.block(dir, l.v.cs, i)
	return ws, l.v.complete || len(ws) > 0, nil
}

// Wait blocks until the order grants the contender, confirmed (Confirm),
// ctx is done or the session ends, reading its view again after every wait
// (a contender it waited for that gave up was not the holder, and one that
// was touched has handed something on). It returns early, with touched
// true and a nil error, when the order watched the contender's own node
// with Touch and it was touched: whoever touched it wants this waiter to
// act (a striped lock hands it another stripe).
func (l *Line) Wait(ctx context.Context) (touched bool, err error) {
	dir, name := store.Parent(l.node.Path), l.node.Name()
	for {
		ws, err := l.blockers(ctx)
		if err != nil {
			return false, err
		}
		if len(ws) == 0 {
			return false, Confirm(ctx, l.st, l.node)
		}
		l.waited = true
		l.resume(ws)
		i, touched, err := WaitAny(ctx, l.st, ws)
		l.remember(ws)
		if err != nil {
			return false, err
		}
		if touched && ws[i].Path == l.node.Path {
			return true, nil
		}
		first, err := l.followsFront(ctx, ws, i, touched)
		if err != nil {
			return false, err
		}
		if first {
			l.v = view{cs: []Contender{{Name: name, Seq: l.node.Seq, Kind: kindOf(name)}}, complete: true}
			continue
		}
		if l.v, err = l.read(ctx, dir, name); err != nil {
			return false, err
		}
	}
}

// resume starts each Touch watch of ws that the last wait had from the
// version it saw then.
func (l *Line) resume(ws []Watch) {
	for i := range ws {
		for _, w := range l.touch {
			if ws[i].Touch && w.Path == ws[i].Path && w.Seq == ws[i].Seq {
				ws[i].Version = w.Version
			}
		}
	}
}

// remember keeps the Touch watches of ws, with the versions WaitAny saw,
// for the next wait.
func (l *Line) remember(ws []Watch) {
	l.touch = l.touch[:0]
	for _, w := range ws {
		if w.Touch {
			l.touch = append(l.touch, w)
		}
	}
}

// read reads the contender's view again: the window that ends with it
// where the order has one and the store reads windows, else the full
// listing.
func (l *Line) read(ctx context.Context, dir, name string) (view, error) {
	if l.spec.Order.Window == 0 {
		return list(ctx, l.st, dir, name)
	}
	return read(ctx, l.st, l.node, l.spec.Order.Window)
}

// followsFront reports whether the contender is first now because the one
// it waited for, the only node of ws, went (it was not touched) and left
// from the front (see followsFront), where the order is exclusive.
func (l *Line) followsFront(ctx context.Context, ws []Watch, i int, touched bool) (bool, error) {
	if !l.spec.Order.Front || len(ws) != 1 || touched {
		return false, nil
	}
	name := store.Base(ws[i].Path)
	return followsFront(ctx, l.st, l.node, Contender{Name: name, Seq: ws[i].Seq, Kind: kindOf(name)})
}

// Hold turns the granted contender into its hold: the order's last step
// (Order.Granted), the attempt's record of the grant, and NewHold with the
// spec's options. A failed last step is the caller's to clean up (Leave).
func (l *Line) Hold(ctx context.Context) (*Hold, error) {
	if g := l.spec.Order.Granted; g != nil {
		behind := len(l.v.cs) - Index(l.v.cs, l.node.Name()) - 1
		if err := g(ctx, l.st, l.node, behind); err != nil {
			return nil, err
		}
	}
	opts := l.spec.Hold
	opts.Rec = l.spec.Rec
	opts.Front = l.waited && l.spec.Order.Front
	end := l.a.Granted(ctx, l.node).End
	if own := opts.OnEnd; own != nil {
		opts.OnEnd = func(lost error) { end(lost); own(lost) }
	} else {
		opts.OnEnd = end
	}
	return NewHold(l.st, l.node, opts), nil
}

// Leave removes the contender's node (see Remove).
func (l *Line) Leave(ctx context.Context) error { return Remove(ctx, l.st, l.spec.Rec, l.node) }
