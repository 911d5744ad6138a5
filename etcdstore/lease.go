package etcdstore

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

var (
	_ store.Leaser     = (*Store)(nil)
	_ store.GetDeleter = (*Store)(nil)
)

// CreateLeased creates the node at p attached to a new lease of its own;
// see [store.Leaser]. It grants the lease (the TTL rounded up to whole
// seconds, raised by the server to its minimum) and then creates the node
// as Create does, two requests in all. When the create fails the lease is
// revoked, in the background if ctx has ended; a lease whose grant's reply
// was lost holds no node and expires by itself.
func (s *Store) CreateLeased(ctx context.Context, p string, data []byte, ttl time.Duration) (store.Node, store.Lease, error) {
	if err := store.ValidateCreate(p, data, store.Persistent); err != nil {
		return store.Node{}, nil, err
	}
	if ttl < time.Millisecond {
		return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w: lease TTL %v", store.ShortPath(p), store.ErrInvalidArgument, ttl)
	}
	l, err := s.grant(ctx, p, ttl)
	if err != nil {
		return store.Node{}, nil, err
	}
	n, _, _, err := s.create(ctx, p, data, store.Persistent, listNone, 0, l.id)
	if err != nil {
		l.revokeSoon(ctx)
		return store.Node{}, nil, err
	}
	return n, l, nil
}

// grant grants a lease of ttl for the node at p, as one attempt.
func (s *Store) grant(ctx context.Context, p string, ttl time.Duration) (*lease, error) {
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(p), err)
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	sent := time.Now()
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
		return s.cli.Grant(ctx, secs)
	})
	if err != nil {
		return nil, s.fail(ctx, "create", p, fmt.Errorf("grant lease: %w", err))
	}
	granted := time.Duration(resp.TTL) * time.Second
	return &lease{s: s, id: resp.ID, path: p, ttl: granted, deadline: sent.Add(granted)}, nil
}

// lease is a store.Lease: an etcd lease that holds one node.
type lease struct {
	s    *Store
	id   clientv3.LeaseID
	path string
	ttl  time.Duration

	mu       gosync.Mutex
	deadline time.Time
}

func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Renew renews the lease once (one request). A lease the server no longer
// knows fails with store.ErrNoNode: its node is gone.
func (l *lease) Renew(ctx context.Context) error {
	s := l.s
	if err := s.enter(ctx); err != nil {
		return fmt.Errorf("etcdstore: renew lease of %q: %w", store.ShortPath(l.path), err)
	}
	sent := time.Now()
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.LeaseKeepAliveResponse, error) {
		return s.cli.KeepAliveOnce(ctx, l.id)
	})
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("etcdstore: renew lease of %q: %w (lease %x ended)", store.ShortPath(l.path), store.ErrNoNode, int64(l.id))
	case err != nil:
		return classifyErr(s, ctx, "renew lease of", l.path, err)
	}
	l.mu.Lock()
	if d := sent.Add(time.Duration(resp.TTL) * time.Second); d.After(l.deadline) {
		l.deadline = d
	}
	l.mu.Unlock()
	return nil
}

// Revoke revokes the lease (one request), which deletes its node.
func (l *lease) Revoke(ctx context.Context) error {
	s := l.s
	if err := s.enter(ctx); err != nil {
		return fmt.Errorf("etcdstore: revoke lease of %q: %w", store.ShortPath(l.path), err)
	}
	_, err := do(s, ctx, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
		return s.cli.Revoke(ctx, l.id)
	})
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return classifyErr(s, ctx, "revoke lease of", l.path, err)
	}
	l.mu.Lock()
	l.deadline = time.Time{}
	l.mu.Unlock()
	return nil
}

// revokeSoon revokes the lease of a create that failed, which deletes the
// node if the create made it after all: once while ctx lives, then in a
// goroutine of the Store's, retried (10 ms apart, doubling up to 1 s)
// until it is done, the lease has expired by itself, or the session ends.
func (l *lease) revokeSoon(ctx context.Context) {
	if ctx.Err() == nil && l.Revoke(ctx) == nil {
		return
	}
	l.s.goWatch(func() {
		for i := 1; time.Now().Before(l.Deadline().Add(l.ttl)); i++ {
			if l.Revoke(l.s.ctx) == nil || l.s.sleep(l.s.ctx, backoff(i)) != nil {
				return
			}
		}
	})
}

// classifyErr is fail for calls that must not end the session on
// ErrLeaseNotFound (the lease is the node's, not the session's).
func classifyErr(s *Store, ctx context.Context, op, p string, err error) error {
	if serr := s.sessionErr(); serr != nil {
		return fmt.Errorf("etcdstore: %s %q: %w", op, store.ShortPath(p), serr)
	}
	err = classify(ctx, err)
	if errors.Is(err, store.ErrDisconnected) {
		s.probe()
	}
	return fmt.Errorf("etcdstore: %s %q: %w", op, store.ShortPath(p), err)
}

// GetDelete deletes the node at p and returns it as it was, in one
// transaction; see [store.GetDeleter]. Like Delete, it fails with
// ErrNotEmpty when p has children, and an attempt given up after the
// attempt timeout fails with ErrDisconnected: the node may then be gone.
func (s *Store) GetDelete(ctx context.Context, p string) (store.Node, error) {
	if err := store.ValidatePath(p); err != nil {
		return store.Node{}, err
	}
	if p == "/" {
		return store.Node{}, fmt.Errorf("etcdstore: delete %q: %w: the root cannot be deleted", store.ShortPath(p), store.ErrInvalidPath)
	}
	if err := s.enter(ctx); err != nil {
		return store.Node{}, fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), err)
	}
	s.dirs.drop(p)
	then := []clientv3.Op{clientv3.OpDelete(p, clientv3.WithPrevKV()), clientv3.OpDelete(s.dirKey(p)), clientv3.OpDelete(s.frontOf(p))}
	op, dirs, ok := s.reclaimNow(p)
	if ok {
		then = append(then, op)
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix()).
			Then(then...).
			Else(clientv3.OpGet(p, clientv3.WithCountOnly())).
			Commit()
	})
	if err != nil {
		return store.Node{}, s.fail(ctx, "delete", p, err)
	}
	if resp.Succeeded {
		s.deleted(ctx, p, resp, ok, dirs)
	}
	if resp.Succeeded {
		dr := resp.Responses[0].GetResponseDeleteRange()
		if dr.Deleted == 0 || len(dr.PrevKvs) == 0 {
			return store.Node{}, fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), store.ErrNoNode)
		}
		return node(dr.PrevKvs[0]), nil
	}
	if resp.Responses[0].GetResponseRange().Count == 0 {
		return store.Node{}, fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), store.ErrNoNode)
	}
	return store.Node{}, fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), store.ErrNotEmpty)
}
