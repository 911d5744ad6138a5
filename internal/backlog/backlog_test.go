package backlog_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/corral-go/corral/internal/backlog"
	"pgregory.net/rapid"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestBacklog: against a model, through any sequence of adds, holds,
// wakes, takes and an end: every change is taken once, in order; the
// channel of a Take is closed exactly when something was recorded or woken
// since, or the follow has ended; the end comes after the last change.
func TestBacklog(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b backlog.Backlog[int]
		var (
			next    int
			want    []int // recorded, not taken
			got     []int
			ready   <-chan struct{}
			woken   bool // since the last Take
			ended   bool
			endErr  = errors.New("ended")
			took    bool
			taken   []int
			wantAll []int
		)
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				n := rapid.IntRange(0, 3).Draw(t, "n")
				var cs []int
				for range n {
					cs = append(cs, next)
					next++
				}
				b.Add(cs...)
				want = append(want, cs...)
				wantAll = append(wantAll, cs...)
				woken = true
			},
			"hold": func(t *rapid.T) {
				b.Hold(next)
				want = append(want, next)
				wantAll = append(wantAll, next)
				next++
			},
			"wake": func(t *rapid.T) {
				b.Wake()
				woken = true
			},
			"end": func(t *rapid.T) {
				if b.End(endErr) == ended {
					t.Fatalf("End reported %v on a follow ended %v", !ended, ended)
				}
				ended, woken = true, true
			},
			"take": func(t *rapid.T) {
				if took && closed(ready) != (woken || ended) {
					t.Fatalf("the last Take's channel closed %v; woken %v, ended %v", closed(ready), woken, ended)
				}
				cs, c, err := b.Take()
				ready, took = c, true
				if !slices.Equal(cs, want) {
					t.Fatalf("took %v; want %v", cs, want)
				}
				got = append(got, cs...)
				if len(cs) == 0 && ended != (err != nil) {
					t.Fatalf("an empty Take's error %v; ended %v", err, ended)
				}
				if len(cs) > 0 && err != nil {
					t.Fatalf("a Take with changes has error %v", err)
				}
				woken = ended
				want = nil
				taken = got
				if b.Len() != 0 {
					t.Fatalf("Len %d after Take", b.Len())
				}
			},
		})
		if !slices.Equal(taken, wantAll[:len(taken)]) {
			t.Fatalf("taken %v; recorded %v", taken, wantAll)
		}
	})
}

// TestZero: the zero Backlog is an empty one of a follow that has not
// ended, whose Take gives a channel not closed.
func TestZero(t *testing.T) {
	var b backlog.Backlog[string]
	cs, c, err := b.Take()
	if cs != nil || err != nil || c == nil || closed(c) {
		t.Fatalf("Take of the zero Backlog = %v, %v (closed %v), %v", cs, c, c != nil && closed(c), err)
	}
	if b.Err() != nil || b.Len() != 0 {
		t.Fatalf("zero Backlog: Err %v, Len %d", b.Err(), b.Len())
	}
}
