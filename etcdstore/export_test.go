package etcdstore

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// WithExpiryHook makes the keepalive loop call f when its timer finds the
// session's deadline passed, before it ends the session: a test that blocks
// in f holds the timer back, and so shows that the deadline is enforced
// without it.
func WithExpiryHook(f func()) Option {
	return func(o *options) { o.expiryHook = f }
}

// WithMadeParentsHook makes a create or a batch call f right after it made
// its missing parents in a transaction of their own (a parent it believed
// there was gone, or any for a batch), before it goes on: a test that
// cancels its ctx in f leaves it with a directory made for a node it will
// not make.
func WithMadeParentsHook(f func()) Option {
	return func(o *options) { o.madeParentsHook = f }
}

// Deadline returns the session's deadline as the Store knows it now.
func Deadline(s *Store) time.Time { return s.leaseDeadline() }

// FenceKey returns the key of the session's create fence.
func FenceKey(s *Store) string { return s.fenceKey }

// WaitUndos waits until no abandoned create of s is being undone.
func WaitUndos(s *Store) { s.undos.Wait() }

// StaleCreate builds the transaction a create of name in an existing parent
// would send now, and returns a function that sends it: a request held in
// the network, which reaches the server later.
func StaleCreate(s *Store, name string, data []byte, mode store.Mode) func(context.Context) (*clientv3.TxnResponse, error) {
	r := &createReq{name: name, parent: store.Parent(name), data: data, mode: mode}
	if mode&store.Ephemeral != 0 {
		r.lease = s.lease
	}
	r.fence = s.fenceRev()
	cmps, then, els := r.txn(s)
	return func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.kv.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	}
}

// Classify is the sentinel mapping of every etcd client error.
func Classify(ctx context.Context, err error) error { return classify(ctx, err) }

// MaxNest is the number of directories above a deleted node that its
// delete's own transaction may remove.
const MaxNest = maxNest

// InlineDepth is the number of ancestors a create makes in its own
// transaction.
const InlineDepth = inlineDepth

// FreshName is the name of a new sequential node requested at p.
func FreshName(p string) string { return freshName(p) }

// End returns when the session ends on the client unless renewed: its
// deadline less the guard.
func End(s *Store) time.Time { return s.ends() }
