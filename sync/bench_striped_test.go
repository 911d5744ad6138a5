package sync_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/store"
)

// BenchmarkStripedInventory runs the flash sale of ExampleStripedMutex: b.N
// units split into k segments, each guarded by one stripe, bought by 32
// buyers with a session each; a purchase holds its stripe for a 5 ms
// payment plus a read and a conditional write of the segment's count.
// purchases/s is the throughput; one lock (k=1) caps it at 1/(5 ms + the
// store's round trips), k stripes lift the cap k times until the store or
// the buyers run out.
func BenchmarkStripedInventory(b *testing.B) {
	const buyers, pay = 32, 5 * time.Millisecond
	for _, name := range backends.Names {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			be := backends.Get(b, name)
			for _, k := range []int{1, 4, 16} {
				b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
					ctx, path := b.Context(), bpath(b)
					sessions := make([]store.Store, buyers)
					counted := make([]*countstore.Store, buyers)
					for i := range sessions {
						counted[i] = countstore.New(be.Open(b))
						sessions[i] = counted[i]
						defer counted[i].Close()
					}
					if err := stockUp(ctx, sessions[0], path, k, b.N); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					var p payers
					sold, err := flashSale(ctx, sessions, path, k, pay, &p)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if sold != b.N {
						b.Fatalf("sold %d of %d units", sold, b.N)
					}
					b.ReportMetric(float64(sold)/b.Elapsed().Seconds(), "purchases/s")
					b.ReportMetric(float64(p.peak), "peak-payers")
					reportCounts(b, counted)
				})
			}
		})
	}
}
