package zkstore

import (
	"context"
	"testing"
)

// BenchmarkCallOverhead measures what zkstore adds to every request, with
// no server: the goroutine that lets a cancellable ctx abandon the call,
// and the direct path taken when ctx cannot be cancelled.
func BenchmarkCallOverhead(b *testing.B) {
	s := &Store{}
	f := func(<-chan struct{}) (int, error) { return 1, nil }
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
