package etcdstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// ChildrenUpTo returns the window of the children of p that ends at seq;
// see [store.WindowLister]. It is one range of p's subtree sorted by
// CreateRevision, with CreateRevision at most seq and at most n keys: what
// the server sends does not grow with the number of children (it still
// reads them all to sort them). Keys deeper than a child share the range and
// are skipped, so a window may hold fewer than n children without being
// complete.
func (s *Store) ChildrenUpTo(ctx context.Context, p string, seq int64, n int) ([]store.Child, bool, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, false, err
	}
	if n < 1 {
		return nil, false, fmt.Errorf("etcdstore: children %q: %w: window of %d", store.ShortPath(p), store.ErrInvalidArgument, n)
	}
	if err := s.enter(ctx); err != nil {
		return nil, false, fmt.Errorf("etcdstore: children %q: %w", store.ShortPath(p), err)
	}
	if seq < 1 {
		return nil, true, nil
	}
	key, opts := windowRange(p, seq, n)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, key, opts...)
	})
	if err != nil {
		return nil, false, s.fail(ctx, "children", p, err)
	}
	kids, complete := window(p, (*etcdserverpb.RangeResponse)(resp), n)
	return kids, complete, nil
}

// windowRange returns the range of the last n keys below p, by
// CreateRevision, whose CreateRevision is at most maxRev (any, when 0),
// highest first.
func windowRange(p string, maxRev int64, n int) (string, []clientv3.OpOption) {
	opts := make([]clientv3.OpOption, 3, 5)
	opts[0], opts[1], opts[2] = clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithLimit(int64(n))
	if maxRev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(maxRev))
	}
	if p == "/" {
		return "/", append(opts, clientv3.WithPrefix())
	}
	return p + "/", append(opts, clientv3.WithRange(p+"0"))
}

// window picks the direct children of p out of a read of windowRange,
// sorted as Children sorts them, and tells whether the read reached the
// first key below p.
func window(p string, resp *etcdserverpb.RangeResponse, n int) ([]store.Child, bool) {
	kids := make([]store.Child, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if name, ok := childName(p, kv.Key); ok {
			kids = append(kids, store.Child{Name: name, Seq: kv.CreateRevision})
		}
	}
	slices.SortFunc(kids, cmpChild)
	return kids, !resp.More && len(resp.Kvs) <= n
}

// childName returns the name of the child of p that key is, if it is one.
func childName(p string, key []byte) (string, bool) {
	// p and the slash compared apart: p + "/" would cost a listing an
	// allocation per key for a path past 32 bytes.
	n := len(p) + 1
	if p == "/" {
		n = 1
	}
	if len(key) <= n || key[n-1] != '/' || string(key[:n-1]) != p[:n-1] {
		return "", false
	}
	name := key[n:]
	if bytes.IndexByte(name, '/') >= 0 {
		return "", false
	}
	return string(name), true
}

// Children returns the direct children of p sorted by Seq (CreateRevision),
// then name, or ErrNoNode. It reads p and its whole subtree in one range.
// A path that is no key but has keys below it lists them as a directory
// would, so that a corral observer sees the contenders of an election or
// lock run only by etcd's concurrency package, which never writes its prefix
// key; Get still reports such a path as missing.
func (s *Store) Children(ctx context.Context, p string) ([]store.Child, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: children %q: %w", store.ShortPath(p), err)
	}
	key, opts := listRange(p)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, key, opts...)
	})
	if err != nil {
		return nil, s.fail(ctx, "children", p, err)
	}
	exists, kids := children(p, resp.Kvs)
	if !exists {
		return nil, fmt.Errorf("etcdstore: children %q: %w", store.ShortPath(p), store.ErrNoNode)
	}
	return kids, nil
}

// listRange returns the range that holds p and its subtree: [p, p+"0"),
// since '0' follows '/'. It also holds siblings of p whose name continues
// p's with a byte below '0' ("p-x", "p.x"); children skips them. For the
// root it is every key that starts with '/'.
func listRange(p string) (string, []clientv3.OpOption) {
	if p == "/" {
		return "/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	}
	return p, []clientv3.OpOption{clientv3.WithRange(p + "0"), clientv3.WithKeysOnly()}
}

// children picks p and its direct children out of the keys of listRange(p).
// etcd returns them sorted by key; they are usually sorted by create
// revision too (names made in order), so the sort is most often a check.
func children(p string, kvs []*mvccpb.KeyValue) (exists bool, kids []store.Child) {
	prefix := p + "/"
	if p == "/" {
		exists, prefix = true, "/"
	}
	kids = make([]store.Child, 0, len(kvs))
	for _, kv := range kvs {
		k := kv.Key
		if string(k) == p {
			exists = true
			continue
		}
		if len(k) <= len(prefix) || string(k[:len(prefix)]) != prefix {
			continue
		}
		// A key below p makes p a directory even when p is no key:
		// etcd's own concurrency recipes never write their prefix key.
		exists = true
		name := k[len(prefix):]
		if bytes.IndexByte(name, '/') >= 0 {
			continue
		}
		kids = append(kids, store.Child{Name: string(name), Seq: kv.CreateRevision})
	}
	if !slices.IsSortedFunc(kids, cmpChild) {
		slices.SortFunc(kids, cmpChild)
	}
	return exists, kids
}

func cmpChild(a, b store.Child) int {
	if a.Seq != b.Seq {
		return cmpInt(a.Seq, b.Seq)
	}
	return strings.Compare(a.Name, b.Name)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
