package countstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

func TestMain(m *testing.M) { backends.Main(m) }

func TestCounts(t *testing.T) {
	srv := memstore.NewServer()
	a, b := countstore.New(srv.Open()), countstore.New(srv.Open())
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	own, _, err := a.CreateAndList(ctx, "/d/n-", nil, store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Create(ctx, "/d/m", nil, store.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	_, _, evOwn, err := a.ExistsW(ctx, own.Path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, evOther, err := a.ExistsW(ctx, other.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, own.Path); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, other.Path); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []<-chan store.Event{evOwn, evOther} {
		select {
		case e := <-ev:
			if e.Type != store.EventDeleted {
				t.Errorf("event = %+v; want deleted", e)
			}
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	got := a.Counts()
	want := map[string]int{"CreateAndList": 1, "ExistsW": 2, "Delete": 1}
	for m, n := range want {
		if got.Calls[m] != n {
			t.Errorf("Calls[%q] = %d; want %d", m, got.Calls[m], n)
		}
	}
	if got.Total() != 4 {
		t.Errorf("Total() = %d; want 4", got.Total())
	}
	if got.Wakeups != 1 {
		t.Errorf("Wakeups = %d; want 1 (the own node's deletion is no wakeup)", got.Wakeups)
	}
	if err := a.Wait(ctx, func(c countstore.Counts) bool { return c.Wakeups == 1 }); err != nil {
		t.Errorf("Wait(met) = %v", err)
	}
	a.Reset()
	if got := a.Counts().Total(); got != 0 {
		t.Errorf("Total() after Reset = %d; want 0", got)
	}
}
