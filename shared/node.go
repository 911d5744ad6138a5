package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// NoVersion is the version of a value never set: its node does not exist.
// CompareAndSet with NoVersion sets a value only where none is.
const NoVersion int64 = -1

// Holder is a hold a guarded write is applied under: every hold of
// corral's is one (sync.Mutex, sync.RWMutex, sync.ReadHold, sync.Lease,
// sync.Stripe, election.Leadership, group.Membership, partition.Shard),
// and so is anything else whose Guard names the node that exists exactly
// while it is held. Guard returns the zero store.Guard when nothing is
// held.
type Holder interface {
	Guard() store.Guard
}

// guardOf returns h's guard, or ErrNotHeld when h holds nothing.
func guardOf(h Holder) (store.Guard, error) {
	if h == nil {
		return store.Guard{}, fmt.Errorf("%w: nil hold", ErrNotHeld)
	}
	g := h.Guard()
	if g.IsZero() {
		return store.Guard{}, ErrNotHeld
	}
	return g, nil
}

// node is the node at one path that a Value or a Counter keeps.
type node struct {
	st   store.Store
	path string
	kind string // the package's name for the handle, in errors
	rec  *telemetry.Recorder
	// err, when not nil, is why the handle is unusable (its constructor's
	// arguments were).
	err error
	// checked is set once a read found no other recipe at the path.
	checked atomic.Bool
}

func newNode(st store.Store, path, kind, telKind string, opts []Option) *node {
	o := newOptions(opts)
	n := &node{st: st, path: path, kind: kind}
	if err := o.check(st, path); err != nil {
		n.err = err
		return n
	}
	n.rec = telemetry.New(o.tel, telKind, path, ErrLost)
	return n
}

// usable returns why op cannot be called on n: nil or unmade, or made with
// arguments it refused.
func (n *node) usable(op string) error {
	if n == nil || n.st == nil && n.err == nil {
		return fmt.Errorf("shared: %s: %w: not made by its constructor", op, store.ErrInvalidArgument)
	}
	if n.err != nil {
		return fmt.Errorf("shared: %s %s %q: %w", n.kind, op, store.ShortPath(n.path), n.err)
	}
	return nil
}

// errf wraps err for op on n.
func (n *node) errf(op string, err error) error {
	return fmt.Errorf("shared: %s %s %q: %w", n.kind, op, store.ShortPath(n.path), err)
}

// read returns the node now, or ok false when there is none. A lost
// connection is ridden out, paced by recipe.Pause; so is nothing else.
// The first read of a handle checks that the path holds no other recipe.
func (n *node) read(ctx context.Context) (nd store.Node, ok bool, err error) {
	nd, err = recipe.Retry(ctx, n.st, func() (store.Node, error) { return n.st.Get(ctx, n.path) })
	switch {
	case errors.Is(err, store.ErrNoNode):
		return store.Node{}, false, nil
	case err != nil:
		return store.Node{}, false, recipe.CtxErr(ctx, err)
	}
	if err := n.check(ctx, nd); err != nil {
		return store.Node{}, false, err
	}
	return nd, true, nil
}

// check refuses, once per handle, a path that holds another recipe: a
// contender's node, a directory of contenders, or a queue's settings.
func (n *node) check(ctx context.Context, nd store.Node) error {
	if n.checked.Load() {
		return nil
	}
	if f, ok := contender(store.Base(n.path)); ok {
		return fmt.Errorf("%w: %q is a %v's contender", ErrKindMismatch, store.ShortPath(n.path), f)
	}
	if bytes.HasPrefix(nd.Data, []byte(names.ConfigMagic)) {
		return fmt.Errorf("%w: %q holds a queue's settings", ErrKindMismatch, store.ShortPath(n.path))
	}
	kids, err := recipe.Retry(ctx, n.st, func() ([]store.Child, error) { return n.st.Children(ctx, n.path) })
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		return recipe.CtxErr(ctx, err)
	}
	for _, k := range kids {
		if f := names.FamilyOf(k.Name); f != names.NoFamily {
			return fmt.Errorf("%w: %q holds %q (a %v)", ErrKindMismatch, store.ShortPath(n.path), k.Name, f)
		}
	}
	n.checked.Store(true)
	return nil
}

// put writes data to the node at the version given (NoVersion: only where
// there is none), or at any version with any set (making the node where
// there is none), under g unless g is the zero Guard. Its errors are
// ErrVersionMoved, an error wrapping ErrLost, and the store's.
func (n *node) put(ctx context.Context, data []byte, version int64, any bool, g store.Guard) (store.Node, error) {
	if err := store.ValidateData(data); err != nil {
		return store.Node{}, err
	}
	for attempt := 0; ; attempt++ {
		nd, err := n.try(ctx, data, version, any, g)
		switch {
		case err == nil:
			n.rec.Wrote(ctx, n.path, telemetry.Written, nil)
			return nd, nil
		case any && (errors.Is(err, store.ErrNoNode) || errors.Is(err, store.ErrNodeExists)) && !errors.Is(err, store.ErrGuardFailed):
			// Made or deleted by someone else between two tries: a
			// set of any version has not failed yet.
			if err := recipe.Pause(ctx, n.st, attempt); err != nil {
				return store.Node{}, err
			}
			continue
		}
		return store.Node{}, n.outcome(ctx, err)
	}
}

// outcome records and returns the error of a write not applied, as the
// package's errors.
func (n *node) outcome(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, store.ErrGuardFailed):
		n.rec.Wrote(ctx, n.path, telemetry.LostHold, err)
		return fmt.Errorf("%w: %w", ErrLost, err)
	case errors.Is(err, store.ErrBadVersion), errors.Is(err, store.ErrNoNode), errors.Is(err, store.ErrNodeExists):
		n.rec.Wrote(ctx, n.path, telemetry.Conflict, err)
		return fmt.Errorf("%w: %w", ErrVersionMoved, err)
	}
	n.rec.Wrote(ctx, n.path, telemetry.WriteFailed, err)
	return recipe.CtxErr(ctx, err)
}

// try is one try of put.
func (n *node) try(ctx context.Context, data []byte, version int64, any bool, g store.Guard) (store.Node, error) {
	if g.IsZero() {
		switch {
		case any:
			nd, err := n.st.Set(ctx, n.path, data, store.AnyVersion)
			if errors.Is(err, store.ErrNoNode) {
				return n.st.Create(ctx, n.path, data, store.Persistent)
			}
			return nd, err
		case version == NoVersion:
			return n.st.Create(ctx, n.path, data, store.Persistent)
		}
		return n.st.Set(ctx, n.path, data, version)
	}
	set := func(v int64) (store.Node, error) { return n.writeUnder(ctx, g, store.SetOp(n.path, data, v)) }
	switch {
	case any:
		nd, err := set(store.AnyVersion)
		if errors.Is(err, store.ErrNoNode) && !errors.Is(err, store.ErrGuardFailed) {
			return n.createUnder(ctx, g, data)
		}
		return nd, err
	case version == NoVersion:
		return n.createUnder(ctx, g, data)
	}
	return set(version)
}

// writeUnder applies op alone under g.
func (n *node) writeUnder(ctx context.Context, g store.Guard, op store.Op) (store.Node, error) {
	nodes, err := store.Write(ctx, n.st, []store.Guard{g}, []store.Op{op})
	if err != nil {
		return store.Node{}, err
	}
	return nodes[0], nil
}

// createUnder makes the node with data under g. A guarded create makes no
// parents: a missing directory is made first, apart (a directory alone
// holds nothing to guard), as an explicit node that stays.
func (n *node) createUnder(ctx context.Context, g store.Guard, data []byte) (store.Node, error) {
	nd, err := n.writeUnder(ctx, g, store.CreateOp(n.path, data))
	var we *store.WriteError
	if !errors.As(err, &we) || we.Op != 0 || !errors.Is(err, store.ErrNoNode) {
		return nd, err
	}
	dir := store.Parent(n.path)
	if _, err := n.st.Create(ctx, dir, nil, store.Persistent); err != nil && !errors.Is(err, store.ErrNodeExists) {
		return store.Node{}, err
	}
	return n.writeUnder(ctx, g, store.CreateOp(n.path, data))
}

// contender reports whether name is that of a recipe's contender, and its
// family: a marker followed by a store's unique suffix (10 digits on
// ZooKeeper and memstore, 16 hexadecimal digits on etcd), behind Curator's
// protected prefix or not.
func contender(name string) (names.Family, bool) {
	if m, ok := names.Marker(name); ok {
		return m.Family, true
	}
	rest := names.Strip(name)
	for _, m := range names.Marks() {
		if suffix, ok := strings.CutPrefix(rest, m.Text); ok && !m.Whole && len(suffix) == 16 && hex(suffix) {
			return m.Family, true
		}
	}
	return names.NoFamily, false
}

// hex reports whether s holds only lower-case hexadecimal digits.
func hex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
