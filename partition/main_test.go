package partition_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
)

func TestMain(m *testing.M) {
	if env := os.Getenv(chaosChildEnv); env != "" {
		os.Exit(chaosChild(env)) // a member process of TestChaos
	}
	backends.Main(m)
}

// timeout bounds every wait of the tests.
const timeout = 30 * time.Second

func dir(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/partitiontest/%s-%08x", name, rand.Uint32())
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// fence is the shared resource the shards' work writes to: it accepts a
// write for a shard only with a token at least the greatest it has seen,
// and it counts a write under an older token (a stale owner) as a
// violation; owners tracks which member works on each shard now.
type fence struct {
	mu         gosync.Mutex
	last       map[int]int64
	owner      map[int]string
	violations []string
}

func newFence() *fence { return &fence{last: map[int]int64{}, owner: map[int]string{}} }

// begin records that id starts working on shard s under token; it fails
// when another member works on it, or the token is older than one seen.
func (f *fence) begin(id string, s int, token int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.owner[s]; ok && o != id {
		f.violations = append(f.violations, fmt.Sprintf("shard %d: %s starts (token %d) while %s works on it", s, id, token, o))
	}
	if last, ok := f.last[s]; ok && token <= last {
		f.violations = append(f.violations, fmt.Sprintf("shard %d: %s starts with token %d, not above %d", s, id, token, last))
	}
	f.owner[s], f.last[s] = id, token
}

// end records that id stopped working on shard s.
func (f *fence) end(id string, s int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner[s] == id {
		delete(f.owner, s)
	}
}

func (f *fence) check(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		t.Error(v)
	}
}

// worker works on the shards of one member as a service would, in the
// member's Run: each shard it is given is recorded at the fence until its
// context ends; then its function returns, which releases it. It keeps
// what it works on for the tests to look at.
type worker struct {
	m     *partition.Member
	f     *fence
	done  chan struct{} // closed when Run has returned
	err   error         // what Run returned, set before done is closed
	mu    gosync.Mutex
	owned map[int]int64 // shard -> token, those worked on now
	tick  chan struct{} // cap 1: owned changed
}

func work(m *partition.Member, f *fence, tick chan struct{}) *worker {
	w := &worker{m: m, f: f, done: make(chan struct{}), owned: map[int]int64{}, tick: tick}
	go func() {
		defer close(w.done)
		w.err = m.Run(context.Background(), w.shard)
	}()
	return w
}

// shard is the work on one shard.
func (w *worker) shard(ctx context.Context, s *partition.Shard) error {
	w.f.begin(w.m.ID(), s.ID(), s.Token())
	w.set(s.ID(), s.Token(), true)
	<-ctx.Done()
	w.set(s.ID(), 0, false)
	w.f.end(w.m.ID(), s.ID())
	return nil
}

func (w *worker) set(s int, token int64, on bool) {
	w.mu.Lock()
	if on {
		w.owned[s] = token
	} else {
		delete(w.owned, s)
	}
	w.mu.Unlock()
	select {
	case w.tick <- struct{}{}:
	default:
	}
}

func (w *worker) shards() map[int]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.owned)
}

// balanced reports whether the workers work on exactly the shards Assign
// gives them (every one of k shards once, ⌊k/M⌋ or ⌈k/M⌉ each: see
// TestAssign). A weaker check, counts and coverage alone, also holds in
// passing while members still see different lists, before the shards
// settle where they stay.
func balanced(ws []*worker, k int) bool {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.m.ID()
	}
	owners, err := partition.Assign(ids, k)
	if err != nil {
		return false
	}
	for _, w := range ws {
		o := w.shards()
		for s, id := range owners {
			if _, ok := o[s]; ok != (id == w.m.ID()) {
				return false
			}
		}
	}
	return true
}

// gone records that id's session is about to end: the library ends its
// shards' contexts before anyone else is granted them, but its work may
// see that only after the next owner has begun.
func (f *fence) gone(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s, o := range f.owner {
		if o == id {
			delete(f.owner, s)
		}
	}
}

// waitBalanced waits until balanced(ws, k).
func waitBalanced(t testing.TB, tick <-chan struct{}, ws []*worker, k int) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for !balanced(ws, k) {
		select {
		case <-tick:
		case <-timer.C:
			var got []string
			for _, w := range ws {
				got = append(got, fmt.Sprintf("%s: %v", w.m.ID(), slices.Sorted(maps.Keys(w.shards()))))
			}
			t.Fatalf("not balanced over %d members after %v: %s", len(ws), timeout, strings.Join(got, "; "))
		}
	}
}

func join(t testing.TB, st store.Store, path string, k int, id string, opts ...partition.Option) *partition.Member {
	t.Helper()
	m, err := partition.Join(ctxFor(t), st, path, k, id, opts...)
	if err != nil {
		t.Fatalf("Join(%q, %d, %q) = %v", path, k, id, err)
	}
	// t.Context has ended by then: Leave cuts the grace short.
	t.Cleanup(func() { _ = m.Leave(t.Context()) })
	return m
}
