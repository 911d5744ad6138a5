package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

var _ store.ImplicitDirLister = (*Store)(nil)

// ImplicitDirs returns the directories below p that are no key but have
// keys below them (store.ImplicitDirLister): those of etcd's own
// concurrency recipes, say, whose "<prefix>/<lease>" keys come with no key
// at "<prefix>". It reads the keys of p's subtree once, keys only.
func (s *Store) ImplicitDirs(ctx context.Context, p string) ([]string, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: implicit dirs %q: %w", store.ShortPath(p), err)
	}
	key, opts := listRange(p)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, key, opts...)
	})
	if err != nil {
		return nil, s.fail(ctx, "implicit dirs", p, err)
	}
	prefix := p + "/"
	if p == "/" {
		prefix = "/"
	}
	keys := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = true
	}
	dirs := map[string]bool{}
	for k := range keys {
		if !strings.HasPrefix(k, prefix) || store.ValidatePath(k) != nil {
			continue
		}
		// Every ancestor of k below p that is no key.
		for d := store.Parent(k); len(d) > len(p); d = store.Parent(d) {
			if !keys[d] {
				dirs[d] = true
			}
		}
	}
	out := make([]string, 0, len(dirs))
	for d := range dirs {
		out = append(out, d)
	}
	slices.Sort(out)
	return out, nil
}
