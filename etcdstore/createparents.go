package etcdstore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// leaveParent takes back the parent of r, an abandoned create that made no
// node, when r made it (makeParents; see leftEmpty).
func (s *Store) leaveParent(r *createReq) {
	if r.madeParent {
		s.leftEmpty(r.parent)
	}
}

// leftEmpty removes dir, which a create made (makeParents) and then made
// no node in, if it holds nothing and was made implicitly: no delete in it
// would ever take it back. It goes as after the last node in it: at once
// with no reclaim delay, else once that is up.
func (s *Store) leftEmpty(dir string) {
	switch {
	case dir == "/":
	case s.later.Delay > 0:
		s.later.Emptied(dir)
	default:
		s.reclaimDir(dir)
	}
}

// ancestors returns the ancestors of p below the root, outermost first.
func ancestors(p string) []string {
	var as []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			as = append(as, p[:i])
		}
	}
	return as
}

// makeParents makes the missing ancestors of name as persistent empty keys,
// each marked as made implicitly (see reclaim.go), in one transaction (one
// attempt) that checks that none of them is attached to a lease:
// ErrEphemeralParent if one is.
func (s *Store) makeParents(ctx context.Context, name string) error {
	as := ancestors(name)
	var cmps []clientv3.Cmp
	var then []clientv3.Op
	for _, a := range as {
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(a), "=", 0))
		then = append(then, s.makeDir(a))
	}
	resp, err := do(s, ctx, func(actx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(actx, cmps, then, nil)
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(name), store.ErrEphemeralParent)
	}
	return nil
}

// parentsMissing makes the missing parents of r, whose transaction found
// its parent missing and could not make it (see createReq), for send to
// send r again. Its outcome does not matter (it makes directories, no
// node): one that fails as an attempt does is sent again after a pause
// while ctx lives, and paused says so (it was the i-th pause). A reply the
// server sent at ctx's deadline ("request timed out") comes this way too,
// just before ctx says it is done. Otherwise a failure is the error that
// ends the call, after handing to abandon what the call leaves behind.
func (s *Store) parentsMissing(ctx context.Context, r *createReq, i int, unknown bool) (paused bool, _ error) {
	s.dirs.drop(r.parent)
	r.madeParent = true
	err := s.makeParents(ctx, r.name)
	if s.madeParentsHook != nil {
		s.madeParentsHook()
	}
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, store.ErrEphemeralParent) && ctx.Err() == nil &&
		errors.Is(s.fail(ctx, "create", r.name, err), store.ErrDisconnected) &&
		s.sleep(ctx, backoff(i)) == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		s.abandon(r, nil, unknown)
	}
	if errors.Is(err, store.ErrEphemeralParent) {
		return false, err // its own answer, no client error to classify
	}
	return false, s.fail(ctx, "create", r.name, err)
}
