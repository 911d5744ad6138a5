package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/store"
)

// Leader describes who leads an election at one moment. The zero Leader
// means that nobody leads.
type Leader struct {
	// Path is the leader's node, or "" when nobody leads.
	Path string
	// Value is the value the leader proclaimed.
	Value []byte
	// Token is the fencing token of the leader's term (its node's, store.Node.Fence).
	Token int64
}

// IsZero reports whether l is the zero Leader: nobody leads.
func (l Leader) IsZero() bool { return l.Path == "" }

func (l Leader) String() string {
	if l.IsZero() {
		return "no leader"
	}
	return fmt.Sprintf("%s (token %d, value %q)", l.Path, l.Token, l.Value)
}

func (l Leader) equal(m Leader) bool {
	return l.Path == m.Path && l.Token == m.Token && bytes.Equal(l.Value, m.Value)
}

// Leader returns the current leader: the candidate with the lowest node,
// which leads or is about to learn that it does. It fails with ErrNoLeader
// when there is no candidate. It blocks for a few round trips at most.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.validate(); err != nil {
		return Leader{}, fmt.Errorf("election: leader of %q: %w", store.ShortPath(e.Path()), err)
	}
	for {
		kids, err := e.st.Children(ctx, e.path)
		if errors.Is(err, store.ErrNoNode) {
			return Leader{}, ErrNoLeader
		}
		if err == nil {
			err = recipe.CheckFamily(e.path, kids, names.Latches)
		}
		if err != nil {
			return Leader{}, fmt.Errorf("election: leader of %q: %w", store.ShortPath(e.path), err)
		}
		cs := recipe.Contenders(kids)
		if len(cs) == 0 {
			return Leader{}, ErrNoLeader
		}
		p := store.Join(e.path, cs[0].Name)
		n, err := e.st.Get(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			continue // it just left; look again
		}
		if err != nil {
			return Leader{}, fmt.Errorf("election: leader of %q: %w", store.ShortPath(e.path), err)
		}
		return Leader{Path: p, Value: n.Data, Token: n.Fence()}, nil
	}
}

// Observe reports the leader of the election as it changes, on the
// Observer's Leaders channel. The first value sent is the leader now (the
// zero Leader when there is none); then every change is sent in order: a new
// leader, a new value proclaimed by the leader, and "no leader" (the zero
// Leader) when the last candidate leaves. A value not yet received when the
// observer learns that it is out of date is replaced by the newer one, so a
// leader already known to be gone is never sent, and changes faster than a
// round trip may be merged.
//
// The leader reported is the candidate with the lowest node: it may not have
// been told yet, and a leader that lost its connection under
// LoseOnDisconnect is still reported until its node goes, since nobody else
// can lead meanwhile.
//
// Observe returns at once. The observer runs in a goroutine of its own until
// ctx ends, the session ends, Close is called, or a read fails for a reason
// other than a lost connection (which is waited out); then Leaders is closed
// and Err says why. An Election that cannot be used (see New) gives an
// Observer that has stopped already. Observe is safe for concurrent use and
// needs no campaign: any session can observe.
func (e *Election) Observe(ctx context.Context) *Observer {
	if err := e.validate(); err != nil {
		return &Observer{l: runner.Stopped[Leader](fmt.Errorf("election: observe %q: %w", store.ShortPath(e.Path()), err))}
	}
	return &Observer{l: runner.Start(ctx, e.observe)}
}

// Observer follows the leader of an election; see Election.Observe. Its
// methods are safe for concurrent use. The zero Observer has stopped.
type Observer struct{ l *runner.Loop[Leader] }

// ErrObserverClosed is the Err of an Observer after Close. It is the same
// error as every other Close's in corral.
var ErrObserverClosed = runner.ErrClosed

// Leaders returns the channel the observer sends the leader on. It is closed
// when the observer has stopped; Err then says why.
func (o *Observer) Leaders() <-chan Leader { return o.loop().C() }

// Done returns a channel that is closed when the observer has stopped, after
// its Leaders channel.
func (o *Observer) Done() <-chan struct{} { return o.loop().Done() }

// Err returns nil while the observer runs and, once it stopped, why: the
// cause of its ctx (context.Canceled, context.DeadlineExceeded or the cause
// given to a context.CancelCauseFunc), the end of the session
// (store.ErrSessionExpired, store.ErrClosed), ErrObserverClosed after Close,
// or the error that stopped it (store.ErrInvalidPath, say).
func (o *Observer) Err() error { return o.loop().Err(errZeroObserver) }

var errZeroObserver = fmt.Errorf("election: observer: %w: not made by Election.Observe", store.ErrInvalidArgument)

// Close stops the observer and waits until it has stopped. It does not need
// the Leaders channel to be drained. It is idempotent and returns nil.
func (o *Observer) Close() error { return o.loop().Close(ErrObserverClosed) }

// loop returns the loop of o, nil for a nil Observer.
func (o *Observer) loop() *runner.Loop[Leader] {
	if o == nil {
		return nil
	}
	return o.l
}

// observe sends the leader on out as it changes, until ctx or the session
// ends or a read fails for good, and returns why.
func (e *Election) observe(ctx context.Context, out chan<- Leader) error {
	var counted Leader // the last leader the metrics know of
	return recipe.Follow(ctx, e.st, out, recipe.Follower[Leader]{
		Read: func(ctx context.Context) (Leader, []<-chan store.Event, error) {
			l, ch, err := e.current(ctx)
			return l, []<-chan store.Event{ch}, err
		},
		Equal: Leader.equal,
		Changed: func(ctx context.Context, cur Leader, first bool) {
			if !first && (cur.Path != counted.Path || cur.Token != counted.Token) {
				e.rec.LeaderChanged(ctx, cur.Path, cur.Token)
			}
			counted = cur
		},
		Failed: func(err error) error { return fmt.Errorf("election: observe %q: %w", store.ShortPath(e.path), err) },
	})
}

// current returns the leader now and a watch, set on ctx, that fires when it
// may have changed.
func (e *Election) current(ctx context.Context) (l Leader, ch <-chan store.Event, err error) {
	for {
		var kids []store.Child
		kids, ch, err = recipe.WatchChildren(ctx, e.st, e.path)
		if err == nil {
			err = recipe.CheckFamily(e.path, kids, names.Latches)
		}
		if err != nil {
			return Leader{}, nil, err
		}
		cs := recipe.Contenders(kids)
		if len(cs) == 0 {
			return Leader{}, ch, nil
		}
		// Watch before reading, so that a value proclaimed after the
		// read always fires the watch.
		p := store.Join(e.path, cs[0].Name)
		stat, ch, err := store.WatchNode(ctx, e.st, p)
		if errors.Is(err, store.ErrNoNode) {
			continue // gone: list again
		}
		if err != nil {
			return Leader{}, nil, err
		}
		if stat.Seq != cs[0].Seq {
			continue // gone and made again under its name: list again
		}
		n, err := e.st.Get(ctx, p)
		if errors.Is(err, store.ErrNoNode) || err == nil && n.Seq != cs[0].Seq {
			continue
		}
		if err != nil {
			return Leader{}, nil, err
		}
		return Leader{Path: p, Value: n.Data, Token: n.Fence()}, ch, nil
	}
}
