package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// TestJSON: sessions travel as strings that a float64 JSON reader keeps
// apart, data as text or base64, and what is encoded decodes back.
func TestJSON(t *testing.T) {
	since := time.Date(2026, 8, 3, 10, 15, 30, 0, time.UTC)
	rep := inspect.Report{
		Path: "/locks/x", Kind: inspect.Election,
		Holders: []inspect.Contender{{Name: "a", Seq: 1, Mode: inspect.Candidate, Session: 0x100003a174c0003, Data: []byte("10.0.0.7:8080"), Since: since}},
		Waiters: []inspect.Contender{{Name: "b", Seq: 2, Mode: inspect.Candidate, Session: 0x100003a174c0004, Data: []byte{0xff, 0xfe}}},
		Queue:   &inspect.QueueState{Levels: []inspect.Level{}, Claims: []inspect.Claim{{Item: "qi", Session: -5, Data: []byte("x")}}},
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Holders, Waiters []map[string]any
	}
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	h, w := generic.Holders[0], generic.Waiters[0]
	if h["session"] != "0x100003a174c0003" || w["session"] != "0x100003a174c0004" {
		t.Errorf("sessions = %#v, %#v; want the hex strings", h["session"], w["session"])
	}
	if h["data"] != "10.0.0.7:8080" || w["data"] != nil || w["data_base64"] != "//4=" {
		t.Errorf("data = %#v; %#v, %#v; want text, then base64", h["data"], w["data"], w["data_base64"])
	}
	var back inspect.Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("decoded %+v; want %+v\n%s", back, rep, b)
	}
	var c inspect.Contender
	if err := json.Unmarshal([]byte(`{"session":"zz"}`), &c); err == nil {
		t.Errorf("a session that is no number decoded as %+v", c)
	}
}

// TestMisuse: a nil store, a nil walk func and the zero or nil Watcher,
// Kind and Contender give errors wrapping store.ErrInvalidArgument, never a
// panic or a channel that never closes.
func TestMisuse(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := inspect.Read(ctx, nil, "/x"); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Read(nil store) = %v; want ErrInvalidArgument", err)
	}
	if err := inspect.Walk(ctx, nil, "/x", func(inspect.Report) error { return nil }); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Walk(nil store) = %v; want ErrInvalidArgument", err)
	}
	if _, err := inspect.ImplicitDirs(ctx, nil, "/x"); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("ImplicitDirs(nil store) = %v; want ErrInvalidArgument", err)
	}
	st := memstore.New()
	defer st.Close()
	if _, err := st.Create(ctx, "/x/l/lock-", nil, store.EphemeralSequential); err != nil {
		t.Fatal(err)
	}
	if err := inspect.Walk(ctx, st, "/x", nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Walk(nil func) = %v; want ErrInvalidArgument", err)
	}
	w := inspect.Watch(ctx, nil, "/x")
	waitClosed(t, w)
	if err := w.Err(); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Watch(nil store): Err = %v; want ErrInvalidArgument", err)
	}
	for _, w := range []*inspect.Watcher{nil, new(inspect.Watcher)} {
		waitClosed(t, w)
		if err := w.Err(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%v Watcher: Err = %v; want ErrInvalidArgument", w, err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%v Watcher: Close = %v; want nil", w, err)
		}
	}
	var nk *inspect.Kind
	if err := nk.UnmarshalText([]byte("lock")); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("nil Kind: UnmarshalText = %v; want ErrInvalidArgument", err)
	}
	var k inspect.Kind
	if err := k.UnmarshalText([]byte("lok")); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("UnmarshalText(lok) = %v; want ErrInvalidArgument", err)
	}
	var nc *inspect.Contender
	if err := nc.UnmarshalJSON([]byte(`{}`)); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("nil Contender: UnmarshalJSON = %v; want ErrInvalidArgument", err)
	}
	for _, b := range []string{``, `[`, `{"session":"zz"}`, `{"data_base64":"!"}`} {
		var c inspect.Contender
		if err := c.UnmarshalJSON([]byte(b)); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Contender.UnmarshalJSON(%q) = %v; want ErrInvalidArgument", b, err)
		}
	}
}

// waitClosed fails unless w's Reports and Done channels are closed.
func waitClosed(t *testing.T, w *inspect.Watcher) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("%v Watcher: Done not closed", w)
	}
	if _, ok := <-w.Reports(); ok {
		t.Errorf("%v Watcher: Reports sent after Done", w)
	}
}
