package inspect_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/corral-go/corral/inspect"
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
