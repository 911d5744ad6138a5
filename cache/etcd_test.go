package cache_test

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/store"
)

// On etcd a Tree rides out a lost connection by resuming its watch; when
// the revisions it would resume from were compacted meanwhile, it reads
// the subtree again and tells what changed, between Stale and Current.
func TestTreeCompaction(t *testing.T) {
	if !backends.Selected("etcd") {
		t.Skip("etcd not in CORRAL_STORES")
	}
	b := backends.Get(t, "etcd").(*etcdbackend.Backend)
	raw := b.Cluster().Client(t)
	st, w := open(t, b), open(t, b)
	ctx, p := ctxFor(t), dir(t)
	must[store.Node](t)(w.Create(ctx, p+"/n", []byte("1"), store.Persistent))
	must[store.Node](t)(w.Create(ctx, p+"/gone", nil, store.Persistent))
	mr := metrictest.New(t)
	tr := cache.NewTree(ctx, st, p, cache.WithMeterProvider(mr.Provider()))
	defer tr.Close()
	v := newView(t)
	v.until(tr, subtree(t, ctx, w, p, store.MaxPathDepth))

	b.Disconnect(t, st)
	for v.current {
		v.apply(next(t, "event after the cut", tr.Events(), tr.Err))
	}
	must[store.Node](t)(w.Set(ctx, p+"/n", []byte("2"), store.AnyVersion))
	must[store.Node](t)(w.Create(ctx, p+"/new", nil, store.Persistent))
	if err := w.Delete(ctx, p+"/gone"); err != nil {
		t.Fatal(err)
	}
	resp := must[*clientv3.GetResponse](t)(raw.Get(ctx, "/"))
	if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	b.Reconnect(t, st)
	v.until(tr, subtree(t, ctx, w, p, store.MaxPathDepth))
	m := mr.Collect()
	if n := m.Int("corral.cache.reads", telemetry.KeyCause.String("gap")); n != 1 {
		t.Errorf("reads of the subtree after a gap = %d; want 1 (the compaction's)", n)
	}
	if n := m.Int("corral.cache.reads", telemetry.KeyCause.String("start")); n != 1 {
		t.Errorf("first reads of the subtree = %d; want 1", n)
	}
}
