package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Leader describes who leads an election at one moment. The zero Leader
// means that nobody leads.
type Leader struct {
	// Path is the leader's node, or "" when nobody leads.
	Path string
	// Value is the value the leader proclaimed.
	Value []byte
	// Token is the fencing token of the leader's term (its node's Seq).
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

// pollInterval is how often an observer looks for a first candidate on a
// store without store.ChildrenWatcher.
const pollInterval = 100 * time.Millisecond

// Leader returns the current leader: the candidate with the lowest node,
// which leads or is about to learn that it does. It fails with ErrNoLeader
// when there is no candidate. It blocks for a few round trips at most.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.validate(); err != nil {
		return Leader{}, err
	}
	for {
		kids, err := e.st.Children(ctx, e.path)
		if errors.Is(err, store.ErrNoNode) {
			return Leader{}, ErrNoLeader
		}
		if err != nil {
			return Leader{}, fmt.Errorf("election: leader of %q: %w", e.path, err)
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
			return Leader{}, fmt.Errorf("election: leader of %q: %w", e.path, err)
		}
		return Leader{Path: p, Value: n.Data, Token: n.Seq}, nil
	}
}

// Observe reports the leader of the election as it changes. The first value
// sent is the leader now (the zero Leader when there is none); then every
// change is sent in order: a new leader, a new value proclaimed by the
// leader, and "no leader" (the zero Leader) when the last candidate leaves.
// A value not yet received when the observer learns that it is out of date
// is replaced by the newer one, so a leader already known to be gone is
// never sent, and changes faster than a round trip may be merged.
//
// The leader reported is the candidate with the lowest node: it may not have
// been told yet, and a leader that lost its connection under
// LoseOnDisconnect is still reported until its node goes, since nobody else
// can lead meanwhile.
//
// Observe returns at once. The channel is closed, and the goroutine that
// feeds it exits, when ctx ends or the session ends; until then a lost
// connection is waited out. Observe is safe for concurrent use and needs no
// campaign: any session can observe.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	if e.validate() != nil {
		return
	}
	var (
		b    backoff
		last Leader
		sent bool
	)
	for e.alive(ctx) == nil {
		wctx, cancel := context.WithCancel(ctx)
		cur, ch, poll, err := e.current(wctx)
		if err != nil {
			cancel()
			if !e.transient(ctx, err) || b.wait(ctx) != nil {
				return
			}
			continue
		}
		b.reset()
		var tick <-chan time.Time
		if poll {
			tick = time.After(pollInterval)
		}
		if !sent || !cur.equal(last) {
			select {
			case out <- cur:
				last, sent = cur, true
			case <-ch:
				cancel()
				continue
			case <-tick:
				cancel()
				continue
			case <-ctx.Done():
				cancel()
				return
			}
		}
		select {
		case <-ch:
		case <-tick:
		case <-ctx.Done():
		}
		cancel()
	}
}

// current returns the leader now and a watch, set on ctx, that fires when it
// may have changed; poll is set instead when the store cannot watch for the
// first candidate.
func (e *Election) current(ctx context.Context) (l Leader, ch <-chan store.Event, poll bool, err error) {
	for {
		var kids []store.Child
		cw, canWatch := e.st.(store.ChildrenWatcher)
		if canWatch {
			kids, ch, err = cw.ChildrenW(ctx, e.path)
		} else {
			kids, err = e.st.Children(ctx, e.path)
		}
		if errors.Is(err, store.ErrNoNode) {
			exists, _, ch, err := e.st.ExistsW(ctx, e.path)
			if err != nil || exists {
				if err != nil {
					return Leader{}, nil, false, err
				}
				continue
			}
			return Leader{}, ch, false, nil
		}
		if err != nil {
			return Leader{}, nil, false, err
		}
		cs := recipe.Contenders(kids)
		if len(cs) == 0 {
			return Leader{}, ch, !canWatch, nil
		}
		// Watch before reading, so that a value proclaimed after the
		// read always fires the watch.
		p := store.Join(e.path, cs[0].Name)
		exists, stat, ch, err := e.st.ExistsW(ctx, p)
		if err != nil {
			return Leader{}, nil, false, err
		}
		if !exists || stat.Seq != cs[0].Seq {
			continue // gone, maybe made again under its name: list again
		}
		n, err := e.st.Get(ctx, p)
		if errors.Is(err, store.ErrNoNode) || err == nil && n.Seq != cs[0].Seq {
			continue
		}
		if err != nil {
			return Leader{}, nil, false, err
		}
		return Leader{Path: p, Value: n.Data, Token: n.Seq}, ch, false, nil
	}
}
