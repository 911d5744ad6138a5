package shared_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestCounterConcurrentAdders: N adders on N sessions, each adding its
// share, end at exactly the sum, on every store; every value an Add
// returned is distinct (each add applied once).
func TestCounterConcurrentAdders(t *testing.T) {
	const adders, adds = 8, 25
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := ctxFor(t)
		sts := backends.Open(t, b, adders)
		p := testDir(t) + "/count"
		var (
			wg   gosync.WaitGroup
			mu   gosync.Mutex
			seen = map[int64]bool{}
			errs = make(chan error, adders)
		)
		for i, st := range sts {
			c := shared.NewCounter(st, p)
			wg.Go(func() {
				for range adds {
					v, err := c.Add(ctx, int64(i+1))
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if seen[v] {
						errs <- fmt.Errorf("Add returned %d twice", v)
					}
					seen[v] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		want := int64(adds * adders * (adders + 1) / 2)
		if got, err := shared.NewCounter(sts[0], p).Get(ctx); err != nil || got != want {
			t.Errorf("Get after the adds = %d, %v; want %d", got, err, want)
		}
	})
}

// TestCounterEncodings: a counter keeps the encoding it finds, Curator's
// DistributedAtomicLong's (what it makes), kazoo's decimal text, or
// SharedCount's 4 bytes, and refuses data that is no counter's.
func TestCounterEncodings(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := ctxFor(t)
		st := backends.Open(t, b, 1)[0]
		dir := testDir(t)
		long := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
		short := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
		for _, tt := range []struct {
			name        string
			data        []byte // nil: no node
			delta, want int64
			after       []byte
			err         error
		}{
			{"new", nil, 5, 5, long(5), nil},
			{"empty", []byte{}, -3, -3, []byte("-3"), nil},
			{"long", long(1 << 40), 1, 1<<40 + 1, long(1<<40 + 1), nil},
			{"long negative", long(-7), 2, -5, long(-5), nil},
			{"kazoo", []byte("41"), 1, 42, []byte("42"), nil},
			{"kazoo 8 digits", []byte("12345678"), -8, 12345670, []byte("12345670"), nil},
			{"kazoo negative", []byte("-1"), -1, -2, []byte("-2"), nil},
			{"shared count", short(-2), 10, 8, short(8), nil},
			{"shared count overflow", short(math.MaxInt32), 1, 0, short(math.MaxInt32), shared.ErrOverflow},
			{"long overflow", long(math.MaxInt64), 1, 0, long(math.MaxInt64), shared.ErrOverflow},
			{"float", []byte("1.5"), 1, 0, []byte("1.5"), shared.ErrKindMismatch},
			{"text", []byte("hello"), 1, 0, []byte("hello"), shared.ErrKindMismatch},
			{"huge text", []byte("99999999999999999999"), 1, 0, []byte("99999999999999999999"), shared.ErrKindMismatch},
		} {
			p := dir + "/" + tt.name
			if tt.data != nil {
				if _, err := st.Create(ctx, p, tt.data, store.Persistent); err != nil {
					t.Fatal(err)
				}
			}
			got, err := shared.NewCounter(st, p).Add(ctx, tt.delta)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) || got != tt.want {
				t.Errorf("%s: Add(%d) = %d, %v; want %d, %v", tt.name, tt.delta, got, err, tt.want, tt.err)
			}
			n, err := st.Get(ctx, p)
			if err != nil || string(n.Data) != string(tt.after) {
				t.Errorf("%s: data after Add = %q, %v; want %q", tt.name, n.Data, err, tt.after)
			}
			if tt.err == nil {
				if v, err := shared.NewCounter(st, p).Get(ctx); v != tt.want || err != nil {
					t.Errorf("%s: Get = %d, %v; want %d", tt.name, v, err, tt.want)
				}
			}
		}
	})
}
