package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestReconnectRearmsWatchesRaceFree provokes the data race in go-zookeeper
// v1.0.4 that the Store guards against (see the package doc, "Re-armed
// watches"): after a reconnection the client re-arms its watches with a
// request that reads the latest zxid it has seen, while its receive loop
// already writes that zxid for every answer. Many watches are outstanding,
// the connection is cut and restored again and again, and many calls wait
// for the reconnection so that they go out the moment the session is back,
// ahead of the re-arming request. Under -race, the unguarded client reports
// the race in nearly every run; the guard makes it impossible.
//
// Each watch must also survive every reconnection: it fires once, for the
// change made at the end, and not before. With credentials, the client
// sends them again on each connection and waits for their answer before
// it sends anything else.
func TestReconnectRearmsWatchesRaceFree(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []zkstore.Option
		node bool
	}{
		{"plain", nil, false},
		{"digest", []zkstore.Option{zkstore.WithDigestAuth("rearm", "secret")}, false},
		// NodeW's watches are direct requests, which the Store itself
		// sets again after the first reconnection (see directwatch.go).
		{"node watches", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) { rearmRounds(t, tc.opts, tc.node) })
	}
}

func rearmRounds(t *testing.T, opts []zkstore.Option, node bool) {
	const (
		watches = 40
		callers = 48
		rounds  = 30
	)
	_, b := server(t)
	st, proxies := b.OpenWithProxies(t, opts...)
	other, _ := b.OpenWithProxies(t, opts...)
	ctx, dir := ctxFor(t), dirFor(t)

	evs := make([]<-chan store.Event, watches)
	for i := range evs {
		p := must[store.Node](t)(st.Create(ctx, fmt.Sprintf("%s/w%d", dir, i), nil, store.Persistent)).Path
		if node {
			_, ev, err := st.NodeW(ctx, p)
			if err != nil {
				t.Fatalf("NodeW(%s) = %v", p, err)
			}
			evs[i] = ev
			continue
		}
		ok, _, ev, err := st.ExistsW(ctx, p)
		if err != nil || !ok {
			t.Fatalf("ExistsW(%s) = %v, %v; want true", p, ok, err)
		}
		evs[i] = ev
	}

	// Callers read without pause; while the connection is down their calls
	// wait in the Store and all go out as soon as it is back.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			p := fmt.Sprintf("%s/w%d", dir, i%watches)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := st.Get(ctx, p); err != nil && !errors.Is(err, store.ErrDisconnected) {
					errs <- fmt.Errorf("Get(%s) = %w", p, err)
					return
				}
			}
		})
	}
	for range rounds {
		before := st.Disconnected()
		for _, p := range proxies {
			p.Cut()
		}
		select {
		case <-before:
		case <-ctx.Done():
			t.Fatalf("the Store never saw its connection cut: %v", ctx.Err())
		}
		zkbackend.WaitConnected(t, ctx, st)
		if err := context.Cause(st.Context()); err != nil {
			t.Fatalf("session ended: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	for i, ev := range evs {
		select {
		case e := <-ev:
			t.Fatalf("watch %d fired before its node changed: %+v", i, e)
		default:
		}
	}
	for i, ev := range evs {
		if err := other.Delete(ctx, fmt.Sprintf("%s/w%d", dir, i)); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-ev:
			if e.Err != nil || e.Type != store.EventDeleted {
				t.Errorf("watch %d after %d reconnections: %+v; want its node deleted", i, rounds, e)
			}
		case <-ctx.Done():
			t.Fatalf("watch %d never fired after %d reconnections", i, rounds)
		}
	}
}
