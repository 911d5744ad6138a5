package election_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { backends.Main(m) }

// timeout bounds every wait of the tests; real servers are slower than
// memstore, and a shared machine slower still.
const timeout = 20 * time.Second

// dir returns a fresh election path for one test.
func dir(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/electiontest/%s-%08x", name, rand.Uint32())
}

// open opens a session that is closed when the test ends.
func open(t testing.TB, b storetest.Backend) store.Store {
	t.Helper()
	st := b.Open(t)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	l   *election.Leadership
	err error
}

// campaign runs e.Campaign in the background; its result arrives on the
// returned channel.
func campaign(ctx context.Context, e *election.Election, value string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := e.Campaign(ctx, []byte(value))
		ch <- result{l, err}
	}()
	return ch
}

// recv receives from ch within timeout.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, timeout)
	}
	var zero T
	return zero
}

// next receives from ch within timeout and reports whether ch is still
// open.
func next[T any](t testing.TB, what string, ch <-chan T) (T, bool) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, timeout)
	}
	var zero T
	return zero, false
}

// elected waits for a background campaign to win.
func elected(t testing.TB, what string, ch <-chan result) *election.Leadership {
	t.Helper()
	r := recv(t, what, ch)
	if r.err != nil {
		t.Fatalf("%s: Campaign = %v; want leadership", what, r.err)
	}
	return r.l
}

// waitDone waits for a leadership to end.
func waitDone(t testing.TB, what string, l *election.Leadership) {
	t.Helper()
	recv(t, what+": Done", l.Done())
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitCandidates waits until the election directory holds n children.
func waitCandidates(t testing.TB, st store.Store, path string, n int) []store.Child {
	t.Helper()
	return backends.WaitChildren(t, st, path, backends.Count(n))
}

// children lists the election directory; a missing directory is empty.
func children(t testing.TB, st store.Store, path string) []store.Child {
	t.Helper()
	kids, err := st.Children(ctxFor(t), path)
	if err != nil && !isNoNode(err) {
		t.Fatalf("Children(%q) = %v", path, err)
	}
	return kids
}
