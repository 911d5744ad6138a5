package memstore

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/store"
)

var _ store.GuardedWriter = (*Store)(nil)

// WriteIf implements store.GuardedWriter: every guard and every op's
// condition is checked under the server's lock, then every op is applied,
// in one step.
func (st *Store) WriteIf(ctx context.Context, guards []store.Guard, ops []store.Op) ([]store.Node, error) {
	if err := store.ValidateWrite(guards, ops); err != nil {
		return nil, err
	}
	p := "/"
	if len(ops) > 0 {
		p = ops[0].Path
	}
	if err := st.begin(ctx, "write", p); err != nil {
		return nil, err
	}
	defer st.srv.mu.Unlock()
	s := st.srv
	for i, g := range guards {
		if n := s.lookup(g.Path); n == nil || n.seq != g.Seq {
			return nil, fmt.Errorf("memstore: write: %w", store.GuardRefused(guards, i))
		}
	}
	for i, op := range ops {
		if err := s.writable(op); err != nil {
			return nil, fmt.Errorf("memstore: write: %w", store.OpRefused(ops, i, err))
		}
	}
	out := make([]store.Node, len(ops))
	for i, op := range ops {
		out[i] = s.apply(op)
	}
	return out, nil
}

// writable returns the sentinel that refuses op, or nil.
func (s *Server) writable(op store.Op) error {
	n := s.lookup(op.Path)
	if op.Type == store.OpCreate {
		parent := s.lookup(store.Parent(op.Path))
		switch {
		case parent == nil:
			return store.ErrNoNode
		case n != nil:
			return store.ErrNodeExists
		case parent.owner != 0:
			return store.ErrEphemeralParent
		}
		return nil
	}
	switch {
	case n == nil:
		return store.ErrNoNode
	case op.Version != store.AnyVersion && op.Version != n.version:
		return store.ErrBadVersion
	case op.Type == store.OpDelete && len(n.children) > 0:
		return store.ErrNotEmpty
	}
	return nil
}

// apply applies op, which writable let through, and returns its result.
func (s *Server) apply(op store.Op) store.Node {
	switch op.Type {
	case store.OpCreate:
		n, _ := s.create(op.Path, op.Data, store.Persistent, 0) // its parent exists: it cannot fail
		return n
	case store.OpSet:
		n := s.lookup(op.Path)
		n.data = append([]byte(nil), op.Data...)
		n.version++
		s.fire(s.existsW, op.Path, store.EventDataChanged)
		return n.public(op.Path)
	case store.OpDelete:
		_ = s.delete(op.Path) // a node with no children: it cannot fail
	}
	return store.Node{Path: op.Path}
}
