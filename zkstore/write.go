package zkstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
)

var _ store.GuardedWriter = (*Store)(nil)

// WriteIf applies ops under guards in one multi request: a check of each
// guard's node, then the ops, which the server applies all or none; see
// [store.GuardedWriter]. A guard's Seq is the one its name tells (see Seq
// in store's doc): a guard whose Seq is not its name's never holds, and a
// guard on a name with no sequence suffix (Seq 0) holds for any node at
// its path. The multi is one request: one whose reply is lost is not sent
// again (ErrDisconnected, its outcome unknown).
func (s *Store) WriteIf(ctx context.Context, guards []store.Guard, ops []store.Op) ([]store.Node, error) {
	if err := store.ValidateWrite(guards, ops); err != nil {
		return nil, err
	}
	ops = slices.Clone(ops)
	for i := range ops {
		ops[i].Data = slices.Clone(ops[i].Data)
		if ops[i].Type == store.OpCreate {
			s.later.Keep(store.Parent(ops[i].Path))
		}
	}
	res, err := call(s, ctx, func(*caller) ([]zk.MultiResponse, error) {
		return s.conn.WriteMulti(guards, ops, s.acl)
	}, nil)
	if err != nil {
		return nil, s.writeErr(guards, ops, res, err)
	}
	out := make([]store.Node, len(ops))
	for i, op := range ops {
		r := res[len(guards)+i]
		switch op.Type {
		case store.OpCreate:
			out[i] = node(r.String, op.Data, &zk.Stat{})
		case store.OpSet:
			out[i] = node(op.Path, op.Data, r.Stat)
		default:
			out[i] = store.Node{Path: op.Path}
			if op.Type == store.OpDelete && store.Parent(op.Path) != "/" {
				s.later.Emptied(store.Parent(op.Path))
			}
		}
	}
	return out, nil
}

// writeErr returns the error of a multi of WriteIf that failed with err:
// the *store.WriteError of the first guard or op the server refused, else
// err onto the store's sentinels.
func (s *Store) writeErr(guards []store.Guard, ops []store.Op, res []zk.MultiResponse, err error) error {
	path := "/"
	if len(ops) > 0 {
		path = ops[0].Path
	}
	if s.endErr() != nil || len(res) != len(guards)+len(ops) {
		return s.fail("write", path, err)
	}
	for i, r := range res {
		cause := sentinelOf(r.Error)
		switch {
		case r.Error == nil:
			continue
		case i < len(guards) && (errors.Is(cause, store.ErrNoNode) || errors.Is(cause, store.ErrBadVersion)):
			return fmt.Errorf("zkstore: write %s: %w", store.ShortPath(path), store.GuardRefused(guards, i))
		case i >= len(guards) && refusal(cause):
			return fmt.Errorf("zkstore: write %s: %w (%w)", store.ShortPath(path), store.OpRefused(ops, i-len(guards), cause), r.Error)
		}
		break
	}
	return s.fail("write", path, err)
}

// refusal reports whether sentinel is the answer of a tree that is not as
// an op requires.
func refusal(sentinel error) bool {
	for _, want := range []error{store.ErrNoNode, store.ErrNodeExists, store.ErrBadVersion, store.ErrNotEmpty, store.ErrEphemeralParent} {
		if errors.Is(sentinel, want) {
			return true
		}
	}
	return false
}

// WriteMulti sends the multi of a guarded write: a check of each guard,
// then ops, with the Store's paths moved under the chroot, and those made
// back from it.
func (c *client) WriteMulti(guards []store.Guard, ops []store.Op, acl []zk.ACL) ([]zk.MultiResponse, error) {
	reqs := make([]any, 0, len(guards)+len(ops))
	for _, g := range guards {
		version := int32(-1)
		if seq, _ := store.ParseSeq(store.Base(g.Path)); seq != g.Seq {
			version = impossibleVersion // the node of that Seq cannot be at that name
		}
		reqs = append(reqs, &zk.CheckVersionRequest{Path: c.abs(g.Path), Version: version})
	}
	for _, op := range ops {
		p := c.abs(op.Path)
		switch op.Type {
		case store.OpCheck:
			reqs = append(reqs, &zk.CheckVersionRequest{Path: p, Version: zkVersion(op.Version)})
		case store.OpCreate:
			reqs = append(reqs, &zk.CreateRequest{Path: p, Data: op.Data, Acl: acl})
		case store.OpSet:
			reqs = append(reqs, &zk.SetDataRequest{Path: p, Data: op.Data, Version: zkVersion(op.Version)})
		case store.OpDelete:
			reqs = append(reqs, &zk.DeleteRequest{Path: p, Version: zkVersion(op.Version)})
		}
	}
	res, err := c.zk.Multi(reqs...)
	for i := range res {
		if res[i].Error == nil && res[i].String != "" {
			res[i].String = c.rel(res[i].String)
		}
	}
	return res, err
}

// impossibleVersion is a version no node has: the server answers a check
// or write that requires it with ErrBadVersion, or ErrNoNode.
const impossibleVersion = -2

// zkVersion returns the ZooKeeper version a store version requires.
// ZooKeeper versions are int32: a larger one matches no node.
func zkVersion(v int64) int32 {
	if v > math.MaxInt32 {
		return impossibleVersion
	}
	return int32(v)
}
