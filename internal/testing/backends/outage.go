package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// An OutageOp is one operation of an outage sweep (OutageSweep).
type OutageOp struct {
	Name string
	// Run sets the operation up under e.Dir, starts the outage of e.St
	// with e.Cut at the moment the operation needs it, and makes the call
	// under test through e.Call. Before it returns, nothing under e.Dir may
	// be held any more except what the call under test left (a hold of
	// e.Other that the operation needed is released).
	Run func(e *OutageEnv)
	// Again acquires under dir from a fresh session and releases: after
	// the outage nothing the operation left may stand in its way.
	Again func(ctx context.Context, st store.Store, dir string) error
	// Watch is the directory under Dir that must be empty within one
	// session timeout after the outage ("": Dir itself). A queue's items
	// outlive an outage by design; its claims must not.
	Watch string
}

// OutageEnv is what an OutageOp's Run works with.
type OutageEnv struct {
	T     testing.TB
	Ctx   context.Context // bounds the whole run
	St    store.Store     // the session the outage cuts off
	Other store.Store     // a session that stays connected
	Dir   string          // the operation's own directory
	// Cut starts the outage: the link of St is refused until the sweep
	// heals it, the outage's length after Cut.
	Cut func()
	// Call runs the call under test with a ctx that ends CallTimeout
	// after it starts, and records how long it took.
	Call func(call func(ctx context.Context) error) error

	cutAt time.Time
	took  time.Duration
}

// CallTimeout is the ctx of the call under test in an outage sweep.
const CallTimeout = time.Second

// OutageResult is the worst a case of an outage sweep saw.
type OutageResult struct {
	Store, Op string
	Outage    time.Duration
	Overrun   time.Duration // how long the call took beyond its ctx
	Orphans   int           // nodes left under the op's directory
}

// OutageSweep runs every op through every outage length on the named real
// store (zk, etcd), ops and lengths in parallel, with sessions of the given
// timeout for the cut-off session, and checks after each outage that the
// call returned within CallTimeout + bound and that, once the link healed
// (or the session ended), nothing is left under the op's directory (or its
// Watch) within one session timeout and a fresh session acquires there. It
// returns what each case saw, for a report.
func OutageSweep(t *testing.T, name string, session, bound time.Duration, outages []time.Duration, ops []OutageOp) []OutageResult {
	if !Selected(name) {
		t.Skipf("%s not in CORRAL_STORES", name)
	}
	short := Short(t, name, session)
	cutter, ok := short.(storetest.Disconnector)
	if !ok {
		t.Fatalf("backends: %s cannot cut a session off", name)
	}
	full := Get(t, name)
	var (
		mu      gosync.Mutex
		results []OutageResult
	)
	t.Run(name, func(t *testing.T) {
		for _, outage := range outages {
			for _, op := range ops {
				t.Run(fmt.Sprintf("%v/%s", outage, op.Name), func(t *testing.T) {
					t.Parallel()
					r := outageCase(t, short, cutter, full, session, outage, op)
					r.Store = name
					if r.Overrun > bound {
						t.Errorf("the call took %v beyond its %v ctx; want at most %v", r.Overrun, CallTimeout, bound)
					}
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				})
			}
		}
	})
	return results
}

func outageCase(t *testing.T, short storetest.Backend, cutter storetest.Disconnector, full storetest.Backend, session, outage time.Duration, op OutageOp) OutageResult {
	ctx, cancel := context.WithTimeout(t.Context(), outage+session+WaitTimeout)
	defer cancel()
	e := &OutageEnv{
		T: t, Ctx: ctx, St: short.Open(t), Other: full.Open(t),
		Dir: fmt.Sprintf("/outage/%s", strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())),
	}
	healed := make(chan struct{})
	e.Cut = func() {
		e.cutAt = time.Now()
		cutter.Disconnect(t, e.St)
		go func() {
			defer close(healed)
			timer := time.NewTimer(outage - time.Since(e.cutAt))
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}()
	}
	e.Call = func(call func(ctx context.Context) error) error {
		cctx, ccancel := context.WithTimeout(ctx, CallTimeout)
		defer ccancel()
		start := time.Now()
		err := call(cctx)
		e.took = time.Since(start)
		return err
	}
	op.Run(e)
	if e.cutAt.IsZero() {
		t.Fatal("the operation never started the outage")
	}
	<-healed
	cutter.Reconnect(t, e.St)

	// Within one session timeout, nothing is left: whatever the call
	// gave up has been removed by its session, or went with it.
	wctx, wcancel := context.WithTimeout(ctx, session+WaitTimeout/2)
	defer wcancel()
	watched := e.Dir
	if op.Watch != "" {
		watched = store.Join(e.Dir, op.Watch)
	}
	left, err := waitEmpty(wctx, e.Other, watched)
	switch {
	case err != nil:
		t.Errorf("listing %s after the outage: %v", watched, err)
	case left > 0:
		t.Errorf("%d nodes left under %s one session timeout after the outage", left, watched)
	}
	if err := op.Again(ctx, full.Open(t), e.Dir); err != nil {
		t.Errorf("a fresh session could not acquire after the outage: %v", err)
	}
	return OutageResult{Op: op.Name, Outage: outage, Overrun: max(e.took-CallTimeout, 0), Orphans: left}
}

// waitEmpty waits until dir has no children (or does not exist), or ctx
// ends, and returns how many are left.
func waitEmpty(ctx context.Context, st store.Store, dir string) (int, error) {
	for {
		kids, ev, err := st.ChildrenW(ctx, dir)
		switch {
		case errors.Is(err, store.ErrNoNode):
			return 0, nil // nothing was ever made there
		case err != nil:
			return -1, err
		case len(kids) == 0:
			return 0, nil
		}
		select {
		case <-ev:
		case <-ctx.Done():
			return len(kids), nil
		}
	}
}
