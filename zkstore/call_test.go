package zkstore

import (
	"context"
	"testing"
)

// BenchmarkCallOverhead measures what zkstore adds to every request, with
// no server: the goroutine that lets a cancellable ctx abandon the call
// (one the Store keeps, see workers.go), and the direct path taken when ctx
// cannot be cancelled.
func BenchmarkCallOverhead(b *testing.B) {
	up := make(chan struct{})
	close(up)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // lets the Store's idle goroutines go
	s := &Store{ctx: ctx, up: up, workers: workers{jobs: make(chan runner)}}
	f := func(*caller) (int, error) { return 1, nil }
	b.Run("cancellable", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := call(s, ctx, f, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("background", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := call(s, context.Background(), f, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
