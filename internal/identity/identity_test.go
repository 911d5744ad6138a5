package identity

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRoundTrip(t *testing.T) {
	start := time.Date(2026, 8, 3, 10, 15, 30, 123456789, time.FixedZone("CEST", 2*3600))
	for _, label := range []string{"", "deploy", `quo"te\back`, "ünïcode ✓", "line\nbreak"} {
		data := NewEncoder(label).Encode(start)
		r, ok := Parse(data)
		if !ok {
			t.Fatalf("Parse(%s) = false; want a record", data)
		}
		want := Record{Host: host(), PID: os.Getpid(), Start: start.Truncate(time.Millisecond), Label: label}
		if r.Host != want.Host || r.PID != want.PID || !r.Start.Equal(want.Start) || r.Label != want.Label {
			t.Errorf("Parse(%s) = %+v; want %+v", data, r, want)
		}
	}
}

// TestGranted: a holder's record of its grant carries the grant's time,
// and a record without one parses with none.
func TestGranted(t *testing.T) {
	start := time.Date(2026, 8, 3, 10, 15, 30, 0, time.UTC)
	granted := start.Add(6 * time.Second)
	data := NewEncoder("worker-1").EncodeGranted(start, granted)
	if want := `,"start":"2026-08-03T10:15:30.000Z","granted":"2026-08-03T10:15:36.000Z","label":"worker-1"}`; !strings.HasSuffix(string(data), want) {
		t.Errorf("EncodeGranted = %s; want it to end with %s", data, want)
	}
	r, ok := Parse(data)
	if !ok || !r.Start.Equal(start) || !r.Granted.Equal(granted) || r.Label != "worker-1" {
		t.Errorf("Parse(%s) = %+v, %v; want start %v, granted %v, label worker-1", data, r, ok, start, granted)
	}
	if r, ok := Parse(NewEncoder("").Encode(start)); !ok || !r.Granted.IsZero() {
		t.Errorf("Parse(a record with no grant) = %+v, %v; want a zero Granted", r, ok)
	}
	bad := []byte(`{"host":"h","pid":1,"start":"2026-08-03T10:15:30.000Z","granted":"soon"}`)
	if r, ok := Parse(bad); ok {
		t.Errorf("Parse(%s) = %+v; want no record", bad, r)
	}
}

func TestFormat(t *testing.T) {
	start := time.Date(2026, 8, 3, 10, 15, 30, 0, time.UTC)
	got := string(NewEncoder("").Encode(start))
	if !strings.HasSuffix(got, `,"start":"2026-08-03T10:15:30.000Z"}`) || !strings.HasPrefix(got, `{"host":`) {
		t.Errorf("Encode = %s; want {\"host\":...,\"pid\":...,\"start\":\"2026-08-03T10:15:30.000Z\"}", got)
	}
	if strings.Contains(got, "label") {
		t.Errorf("Encode without label = %s; want no label field", got)
	}
}

// TestForeign: data other clients write is never taken for a record.
func TestForeign(t *testing.T) {
	for _, data := range []string{
		"",             // etcd's concurrency.Mutex and Election keys
		"10.1.2.3",     // Curator's default: the host address
		"web-1",        // kazoo's identifier
		"{}",           // someone's JSON
		`{"host":"h"}`, // incomplete
		`{"host":"h","pid":1}`,
		`{"host":"h","pid":0,"start":"2026-08-03T10:15:30Z"}`,
		`{"host":"h","pid":"1","start":"2026-08-03T10:15:30Z"}`,
		`{"host":"h","pid":1,"start":"yesterday"}`,
		`{"host":"h","pid":1,"start":"2026-08-03T10:15:30Z"`,
		"{\xff\xfe}",
		"[1,2,3]",
		"{" + strings.Repeat(" ", MaxSize) + "}",
	} {
		if r, ok := Parse([]byte(data)); ok {
			t.Errorf("Parse(%q) = %+v, true; want false", data, r)
		}
	}
	// Unknown fields are ignored: a later version may add some.
	if _, ok := Parse([]byte(`{"host":"h","pid":7,"start":"2026-08-03T10:15:30Z","zone":"eu"}`)); !ok {
		t.Error("Parse with an unknown field = false; want a record")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"host":"h","pid":7,"start":"2026-08-03T10:15:30Z"}`))
	f.Add([]byte("10.0.0.1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		Parse(data) // must not panic
	})
}

func BenchmarkEncode(b *testing.B) {
	e := NewEncoder("deploy")
	now := time.Now()
	for b.Loop() {
		e.Encode(now)
	}
}

// TestSize pins the size the docs give: 53 bytes plus the host name and the
// digits of the pid, and 11 plus the label when there is one.
func TestSize(t *testing.T) {
	h, pid := host(), len(strconv.Itoa(os.Getpid()))
	if strings.ContainsAny(h, "\"\\<>&") {
		t.Skipf("host name %q is escaped in JSON", h)
	}
	now := time.Now()
	if got, want := len(NewEncoder("").Encode(now)), 53+len(h)+pid; got != want {
		t.Errorf("record size = %d; want %d", got, want)
	}
	if got, want := len(NewEncoder("deploy").Encode(now)), 53+len(h)+pid+11+len("deploy"); got != want {
		t.Errorf("labelled record size = %d; want %d", got, want)
	}
}
