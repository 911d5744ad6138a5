package etcdstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// txnSpy keeps the transactions a client sends and, once armed, runs a
// function when the reply of a transaction that was refused (a create's)
// has arrived, before the Store sees it.
type txnSpy struct {
	mu      sync.Mutex
	txns    []*pb.TxnRequest
	refused atomic.Pointer[func()]
}

func (s *txnSpy) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	r, ok := req.(*pb.TxnRequest)
	if !ok {
		return err
	}
	s.mu.Lock()
	s.txns = append(s.txns, r)
	s.mu.Unlock()
	if err == nil && !reply.(*pb.TxnResponse).Succeeded && len(r.Compare) > 0 {
		if f := s.refused.Swap(nil); f != nil {
			(*f)()
		}
	}
	return err
}

// since returns the transactions sent since the n-th.
func (s *txnSpy) since(n int) []*pb.TxnRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pb.TxnRequest(nil), s.txns[n:]...)
}

func (s *txnSpy) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.txns)
}

// openSpied opens a session on a client of its own whose transactions spy
// sees.
func openSpied(t *testing.T, c *etcdserver.Cluster, spy *txnSpy) *etcdstore.Store {
	t.Helper()
	cfg := c.ClientConfig()
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(spy.intercept))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	st, err := etcdstore.Open(ctxFor(t), cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCreateReadsOnlyWhenRefused: a create's transaction reads nothing in
// its Else branch (but for the nested branch that makes missing
// ancestors, which reads nothing either); a refused create reads why in one
// read-only transaction of its own, and still tells ErrNodeExists and
// ErrEphemeralParent apart.
func TestCreateReadsOnlyWhenRefused(t *testing.T) {
	c := etcdserver.Start(t, 1)
	spy := new(txnSpy)
	st := openSpied(t, c, spy)
	ctx := ctxFor(t)
	must[store.Node](t)(st.Create(ctx, "/refuse/dir", nil, store.Persistent))
	reused := must[store.Node](t)(st.Create(ctx, "/refuse/dir/r-", nil, store.EphemeralSequential))
	if err := st.DeleteSeq(ctx, reused.Path, reused.Seq); err != nil {
		t.Fatal(err)
	}
	creates := []struct {
		name   string
		nested bool // the parent is missing: its ancestors are made inline
		create func() error
	}{
		{"ephemeral sequential", false, func() error {
			_, err := st.Create(ctx, "/refuse/dir/c-", []byte("x"), store.EphemeralSequential)
			return err
		}},
		{"reused name", false, func() error {
			n, err := st.Create(ctx, "/refuse/dir/r-", []byte("x"), store.EphemeralSequential)
			if err == nil && n.Path != reused.Path {
				t.Errorf("Create = %q; want the reused name %q", n.Path, reused.Path)
			}
			return err
		}},
		{"persistent", false, func() error {
			_, err := st.Create(ctx, "/refuse/dir/p", nil, store.Persistent)
			return err
		}},
		{"CreateAndList", false, func() error {
			_, _, err := st.CreateAndList(ctx, "/refuse/dir/l-", nil, store.EphemeralSequential)
			return err
		}},
		{"CreateAndWindow", false, func() error {
			_, _, _, err := st.CreateAndWindow(ctx, "/refuse/dir/w-", nil, store.EphemeralSequential, 2)
			return err
		}},
		{"missing parent", true, func() error {
			_, err := st.Create(ctx, "/refuse/new/deeper/c-", nil, store.EphemeralSequential)
			return err
		}},
	}
	for _, tc := range creates {
		from := spy.count()
		if err := tc.create(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		txns := spy.since(from)
		if len(txns) != 1 {
			t.Fatalf("%s: %d transactions; want 1", tc.name, len(txns))
		}
		els := txns[0].Failure
		if tc.nested {
			if len(els) != 1 || els[0].GetRequestTxn() == nil {
				t.Fatalf("%s: Else branch %v; want the nested transaction alone", tc.name, els)
			}
			els = els[0].GetRequestTxn().Failure
		}
		if len(els) != 0 {
			t.Errorf("%s: Else branch of %d operations; want none", tc.name, len(els))
		}
	}

	other := open(t, etcdbackend.New(c))
	must[store.Node](t)(other.Create(ctx, "/refuse/eph", nil, store.Ephemeral))
	refusals := []struct {
		name, path string
		want       error
	}{
		{"existing node", "/refuse/dir/p", store.ErrNodeExists},
		{"ephemeral parent", "/refuse/eph/c", store.ErrEphemeralParent},
		// The parent is missing: the read finds that, and the
		// transaction that makes the parents finds the ephemeral one.
		{"ephemeral grandparent", "/refuse/eph/a/c", store.ErrEphemeralParent},
	}
	for _, tc := range refusals {
		from := spy.count()
		_, err := st.Create(ctx, tc.path, nil, store.Persistent)
		if !errors.Is(err, tc.want) || errors.Is(err, store.ErrDisconnected) {
			t.Errorf("%s: Create(%q) = %v; want %v alone", tc.name, tc.path, err, tc.want)
		}
		txns := spy.since(from)
		if tc.name == "ephemeral grandparent" {
			// The create, the read, the parents' transaction.
			if len(txns) != 3 {
				t.Errorf("%s: %d transactions; want 3", tc.name, len(txns))
			}
			continue
		}
		if len(txns) != 2 || len(txns[1].Compare) != 0 || len(txns[1].Failure) != 0 {
			t.Errorf("%s: %d transactions, then %v; want the create, then one read", tc.name, len(txns), txns[1:])
			continue
		}
		for _, op := range txns[1].Success {
			if op.GetRequestRange() == nil {
				t.Errorf("%s: the read after the refusal holds %v", tc.name, op)
			}
		}
	}
}

// TestCreateRefusedThenChanged: what refused a create may be gone by the
// time the Store reads why; the answer is then the one a create sent at the
// read gets: made, when nothing refuses it any more (the node deleted; its
// parent deleted too, made again), or refused for what the read finds (a
// parent that is now ephemeral).
func TestCreateRefusedThenChanged(t *testing.T) {
	c := etcdserver.Start(t, 1)
	spy := new(txnSpy)
	st := openSpied(t, c, spy)
	other := open(t, etcdbackend.New(c))
	ctx := ctxFor(t)
	del := func(p string) {
		if err := other.Delete(ctx, p); err != nil {
			t.Error(err)
		}
	}
	cases := []struct {
		name, path string
		change     func()
		want       error
	}{
		{"node deleted", "/changed/a/x", func() { del("/changed/a/x") }, nil},
		{"parent deleted", "/changed/b/x", func() { del("/changed/b/x"); del("/changed/b") }, nil},
		{"parent now ephemeral", "/changed/c/x", func() {
			del("/changed/c/x")
			del("/changed/c")
			if _, err := other.Create(ctx, "/changed/c", nil, store.Ephemeral); err != nil {
				t.Error(err)
			}
		}, store.ErrEphemeralParent},
	}
	for _, tc := range cases {
		must[store.Node](t)(other.Create(ctx, tc.path, []byte("theirs"), store.Persistent))
		spy.refused.Store(&tc.change)
		n, err := st.Create(ctx, tc.path, []byte("ours"), store.Persistent)
		if spy.refused.Load() != nil {
			t.Fatalf("%s: the create was not refused", tc.name)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Create(%q) = %v; want %v", tc.name, tc.path, err, tc.want)
			continue
		}
		if tc.want != nil {
			continue
		}
		got := must[store.Node](t)(other.Get(ctx, tc.path))
		if string(got.Data) != "ours" || got.Seq != n.Seq {
			t.Errorf("%s: Get(%q) = %q, Seq %d; want %q, Seq %d (the node Create made)", tc.name, tc.path, got.Data, got.Seq, "ours", n.Seq)
		}
	}
}

// TestDeleteSeqReadsOnlyWhenRefused: DeleteSeq's transaction reads nothing
// in its Else branch; a refused one reads why in a read-only transaction of
// its own, and tells ErrNotEmpty (the node with that Seq has children) from
// ErrNoNode (no node with that Seq). Delete by name keeps its read in the
// transaction: a node may be made at the name in between.
func TestDeleteSeqReadsOnlyWhenRefused(t *testing.T) {
	c := etcdserver.Start(t, 1)
	spy := new(txnSpy)
	st := openSpied(t, c, spy)
	ctx := ctxFor(t)
	parent := must[store.Node](t)(st.Create(ctx, "/delseq/p", nil, store.Persistent))
	must[store.Node](t)(st.Create(ctx, "/delseq/p/child", nil, store.Persistent))
	leaf := must[store.Node](t)(st.Create(ctx, "/delseq/c-", nil, store.EphemeralSequential))
	cases := []struct {
		name   string
		delete func() error
		want   error
		reads  int // operations of the Else branch
		txns   int
	}{
		{"deleted", func() error { return st.DeleteSeq(ctx, leaf.Path, leaf.Seq) }, nil, 0, 1},
		{"gone", func() error { return st.DeleteSeq(ctx, leaf.Path, leaf.Seq) }, store.ErrNoNode, 0, 2},
		{"other Seq", func() error { return st.DeleteSeq(ctx, parent.Path, parent.Seq+1) }, store.ErrNoNode, 0, 2},
		{"children", func() error { return st.DeleteSeq(ctx, parent.Path, parent.Seq) }, store.ErrNotEmpty, 0, 2},
		{"by name, children", func() error { return st.Delete(ctx, parent.Path) }, store.ErrNotEmpty, 1, 1},
	}
	for _, tc := range cases {
		from := spy.count()
		if err := tc.delete(); !errors.Is(err, tc.want) {
			t.Errorf("%s: delete = %v; want %v", tc.name, err, tc.want)
		}
		txns := spy.since(from)
		if len(txns) != tc.txns {
			t.Errorf("%s: %d transactions; want %d", tc.name, len(txns), tc.txns)
			continue
		}
		if n := len(txns[0].Failure); n != tc.reads {
			t.Errorf("%s: Else branch of %d operations; want %d", tc.name, n, tc.reads)
		}
		if tc.txns == 2 && (len(txns[1].Compare) != 0 || len(txns[1].Success) != 1 || txns[1].Success[0].GetRequestRange() == nil) {
			t.Errorf("%s: second transaction %v; want one read", tc.name, txns[1])
		}
	}
}
