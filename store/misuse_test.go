package store_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/store"
)

// TestMisuseValues: the contract's helpers and value methods given bad or
// zero input answer with a sentinel or a printable value, never a panic.
func TestMisuseValues(t *testing.T) {
	if err := store.ValidateData(make([]byte, store.MaxDataSize+1)); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("ValidateData(MaxDataSize+1 bytes) = %v; want ErrTooLarge", err)
	}
	if err := store.ValidateData(nil); err != nil {
		t.Errorf("ValidateData(nil) = %v; want nil", err)
	}
	if _, ev, err := store.WatchNode(t.Context(), nil, "/a"); !errors.Is(err, store.ErrInvalidArgument) || ev != nil {
		t.Errorf("WatchNode(nil store) = %v, %v; want ErrInvalidArgument and no channel", ev, err)
	}
	kids := []store.Child{{Name: "a", Seq: 1}, {Name: "b", Seq: 2}}
	for _, tt := range []struct {
		kids []store.Child
		seq  int64
		n    int
	}{{nil, 5, 1}, {kids, -1, 1}, {kids, 2, 0}, {kids, 2, -3}, {kids, 1 << 62, 1 << 30}} {
		w, complete := store.Window(tt.kids, tt.seq, tt.n)
		if len(w) > max(tt.n, 0) || (complete && len(w) < countUpTo(tt.kids, tt.seq)) {
			t.Errorf("Window(%v, %d, %d) = %v, %v", tt.kids, tt.seq, tt.n, w, complete)
		}
	}
	if s := store.Mode(99).String(); s == "" || store.Mode(99).Valid() {
		t.Errorf("Mode(99): String %q, Valid %v; want a name and false", s, store.Mode(99).Valid())
	}
	if s := store.EventType(99).String(); s == "" {
		t.Errorf("EventType(99).String() is empty")
	}
	if got := (store.Node{}).Stat(); got != (store.Stat{}) {
		t.Errorf("zero Node's Stat() = %+v; want zero", got)
	}
	if got := (store.Node{}).Fence(); got != 0 {
		t.Errorf("zero Node's Fence() = %d; want 0", got)
	}
	if got := (store.Node{Seq: 3}).Fence(); got != 3 {
		t.Errorf("Fence() with no Token = %d; want the Seq, 3", got)
	}
	if got := (store.Node{Seq: 3, Token: 40}).Fence(); got != 40 {
		t.Errorf("Fence() with a Token = %d; want the Token, 40", got)
	}
}

func countUpTo(kids []store.Child, seq int64) int {
	n := 0
	for _, k := range kids {
		if k.Seq <= seq {
			n++
		}
	}
	return n
}
