package inspect_test

import (
	"context"
	"strings"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// kinds is the inspect Kind of each recipe family of internal/names.
var kinds = map[names.Family]inspect.Kind{
	names.Locks:   inspect.Lock,
	names.Latches: inspect.Election,
	names.Leases:  inspect.Semaphore,
	names.Members: inspect.DoubleBarrier,
	names.Queues:  inspect.Queue,
	names.Groups:  inspect.Group,
	// A partition's members read as a group; its path holds directories.
	names.Partitions:    inspect.Group,
	names.PartitionDirs: inspect.None,
}

// A maker makes, with a primitive, the nodes of one recipe at path p (or
// below it) and returns the directory that holds them; what it holds is
// released at the end of the test.
type maker func(ctx context.Context, t *testing.T, st store.Store, p string) string

// release releases a hold at the end of the test, on a context of its own
// (the test's is done by then).
func release(t *testing.T, what string, fn func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := fn(ctx); err != nil {
			t.Errorf("%s = %v", what, err)
		}
	})
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s = %v", what, err)
	}
}

func mutexMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	m := sync.NewMutex(st, p)
	must(t, "Lock", m.Lock(ctx))
	release(t, "Unlock", m.Unlock)
	return p
}

func readerMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	r, err := sync.NewRWMutex(st, p).RLock(ctx)
	must(t, "RLock", err)
	release(t, "ReadHold.Unlock", r.Unlock)
	return p
}

func writerMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	rw := sync.NewRWMutex(st, p)
	must(t, "Lock", rw.Lock(ctx))
	release(t, "Unlock", rw.Unlock)
	return p
}

func candidateMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	l, err := election.New(st, p).Campaign(ctx, []byte("c"))
	must(t, "Campaign", err)
	release(t, "Resign", l.Resign)
	return p
}

func leaseMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	l, err := sync.NewSemaphore(st, p, 2).Acquire(ctx)
	must(t, "Acquire", err)
	release(t, "Release", l.Release)
	return p
}

// barrierMaker enters a double barrier of one, which releases its round
// at once: it writes the ready node too.
func barrierMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	b := sync.NewDoubleBarrier(st, p, 1)
	must(t, "Enter", b.Enter(ctx))
	release(t, "Leave", b.Leave)
	return p
}

func memberMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	m, err := group.Join(ctx, st, p, []byte("m"))
	must(t, "Join", err)
	release(t, "Leave", m.Leave)
	return p
}

// partitionMaker runs a member of a partition of one shard at p, until it
// holds the shard, and returns the directory below p named below ("" for
// p itself).
func partitionMaker(below string) maker {
	return func(ctx context.Context, t *testing.T, st store.Store, p string) string {
		m, err := partition.Join(ctx, st, p, 1, "m")
		must(t, "Join", err)
		release(t, "Leave", m.Leave)
		held := make(chan struct{})
		go m.Run(context.Background(), func(ctx context.Context, _ *partition.Shard) error {
			close(held)
			<-ctx.Done()
			return nil
		})
		select {
		case <-held:
		case <-ctx.Done():
			t.Fatalf("the only member was not given the only shard: %v", ctx.Err())
		}
		if below == "" {
			return p
		}
		return store.Join(p, below)
	}
}

// queueMaker takes an item from an at-least-once queue and holds it: the
// queue then has its config, its items, a claim and a delivery count.
func queueMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	q := queue.New(st, p, queue.WithDelivery(queue.AtLeastOnce))
	must(t, "Put", q.Put(ctx, []byte("job")))
	it, err := q.Take(ctx)
	must(t, "Take", err)
	release(t, "Ack", it.Ack)
	return p
}

// kazooMaker makes the node kazoo's lock or read lock makes (kazoo is no Go
// client; the name is what it writes).
func kazooMaker(marker string) maker {
	return func(ctx context.Context, t *testing.T, st store.Store, p string) string {
		_, err := st.Create(ctx, p+"/8c1f0e2d3b4a59687766554433221100"+marker, nil, store.EphemeralSequential)
		must(t, "Create", err)
		return p
	}
}

// partyMaker makes the node kazoo's Party makes (an ephemeral node named by
// a uuid and the mark, its identifier as data).
func partyMaker(ctx context.Context, t *testing.T, st store.Store, p string) string {
	_, err := st.Create(ctx, p+"/8c1f0e2d3b4a59687766554433221100"+names.KazooParty, []byte("k"), store.Ephemeral)
	must(t, "Create", err)
	return p
}

// TestNamesAgree: inspect reads the layout the recipes write. For every
// mark of internal/names, a primitive (kazoo's marks: the node as kazoo
// names it) makes a node that carries the mark, and inspect reads the
// directory as the recipe of the mark's family. A mark no case makes fails
// the test, so a new name comes with its check here.
func TestNamesAgree(t *testing.T) {
	makers := map[string]maker{
		names.Lock:        mutexMaker,
		names.Read:        readerMaker,
		names.Write:       writerMaker,
		names.Latch:       candidateMaker,
		names.KazooLock:   kazooMaker(names.KazooLock),
		names.KazooRead:   kazooMaker(names.KazooRead),
		names.Lease:       leaseMaker,
		names.Member:      barrierMaker,
		names.Ready:       barrierMaker,
		names.Group:       memberMaker,
		names.GroupMember: memberMaker,
		names.KazooParty:  partyMaker,
		names.Items:       queueMaker,
		names.Claims:      queueMaker,
		names.Deliveries:  queueMaker,
		names.Config:      queueMaker,
		// A partition's path holds its members' and shards' directories.
		names.PartitionMembers: partitionMaker(""),
		names.PartitionShards:  partitionMaker(""),
		names.Partition:        partitionMaker(names.PartitionMembers),
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		for _, m := range names.Marks() {
			t.Run(m.Text, func(t *testing.T) {
				mk, ok := makers[m.Text]
				if !ok {
					t.Fatalf("names.Marks() has %q (a %v), which no case of this test makes", m.Text, m.Family)
				}
				want, ok := kinds[m.Family]
				if !ok {
					t.Fatalf("mark %q is of family %v, which has no inspect.Kind in this test", m.Text, m.Family)
				}
				ctx := testCtx(t)
				d := mk(ctx, t, st, dir(t))
				kids, err := st.Children(ctx, d)
				must(t, "Children", err)
				if !carries(kids, m) {
					t.Errorf("the primitive made %v under %q; want a node that carries the mark %q", kids, d, m.Text)
				}
				if rep := read(t, st, d); rep.Kind != want {
					t.Errorf("Read(%q) = %v; want %v (the %v of mark %q)", d, rep.Kind, want, m.Family, m.Text)
				}
			})
		}
	})
}

func carries(kids []store.Child, m names.Mark) bool {
	for _, k := range kids {
		if m.Whole && k.Name == m.Text || !m.Whole && strings.Contains(k.Name, m.Text) {
			return true
		}
	}
	return false
}

// TestNamesAgreeBelow: the directories that the primitives of several
// directories make below their path read as the recipe each one is.
func TestNamesAgreeBelow(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		t.Run("StripedMutex", func(t *testing.T) {
			ctx, p := testCtx(t), dir(t)
			s, err := sync.NewStripedMutex(st, p, 4).Lock(ctx, 1)
			must(t, "Lock", err)
			release(t, "Stripe.Unlock", s.Unlock)
			if rep := read(t, st, p+"/stripes"); rep.Kind != inspect.Lock || len(rep.Holders) != 1 {
				t.Errorf("Read(stripes) = %v holders %v; want a lock with one holder", rep.Kind, who(rep.Holders))
			}
		})
		t.Run("Partition", func(t *testing.T) {
			ctx, p := testCtx(t), dir(t)
			m, err := partition.Join(ctx, st, p, 1, "m", partition.WithGrace(0))
			must(t, "Join", err)
			release(t, "Leave", m.Leave)
			// The member is given the only shard once it holds it.
			held := make(chan struct{})
			go m.Run(ctx, func(ctx context.Context, _ *partition.Shard) error {
				close(held)
				<-ctx.Done()
				return nil
			})
			select {
			case <-held:
			case <-ctx.Done():
				t.Fatalf("the only member was not given the only shard: %v", ctx.Err())
			}
			for _, tt := range []struct {
				dir  string
				want inspect.Kind
			}{
				{partition.MembersDir(p), inspect.Group},
				{partition.ShardsDir(p) + "/0", inspect.Lock},
			} {
				if rep := read(t, st, tt.dir); rep.Kind != tt.want || len(rep.Holders) != 1 {
					t.Errorf("Read(%q) = %v holders %v; want a %v with one holder", tt.dir, rep.Kind, who(rep.Holders), tt.want)
				}
			}
		})
	})
}
