package sync_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strconv"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// stockUp splits units of stock into k segments, the node path/stock/<i>
// holding the count of segment i.
func stockUp(ctx context.Context, st store.Store, path string, k, units int) error {
	for i := range k {
		n := units / k
		if i < units%k {
			n++
		}
		if _, err := st.Create(ctx, fmt.Sprintf("%s/stock/%d", path, i), []byte(strconv.Itoa(n)), store.Persistent); err != nil {
			return err
		}
	}
	return nil
}

// payers counts the buyers paying at once, and the most there were.
type payers struct {
	mu        gosync.Mutex
	now, peak int
}

func (p *payers) pay(d time.Duration) {
	p.mu.Lock()
	p.now++
	p.peak = max(p.peak, p.now)
	p.mu.Unlock()
	time.Sleep(d) // the payment: work done while holding the stripe
	p.mu.Lock()
	p.now--
	p.mu.Unlock()
}

// flashSale runs one buyer per session until the stock at path is sold out,
// and returns the units they bought. Segment i of the stock is guarded by
// stripe i of a StripedMutex; a purchase holds its stripe for pay (the
// payment) while it takes one unit. A buyer whose segment is sold out
// releases it and moves on to the segments not sold out yet.
func flashSale(ctx context.Context, buyers []store.Store, path string, k int, pay time.Duration, p *payers) (int, error) {
	var (
		wg   gosync.WaitGroup
		mu   gosync.Mutex
		sold int
		errs []error
	)
	for _, st := range buyers {
		wg.Go(func() {
			n, err := buy(ctx, st, path, k, pay, p)
			mu.Lock()
			defer mu.Unlock()
			sold += n
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return sold, errors.Join(errs...)
}

// buy buys units, one at a time, until every segment is sold out.
func buy(ctx context.Context, st store.Store, path string, k int, pay time.Duration, p *payers) (bought int, err error) {
	locks := sync.NewStripedMutex(st, path+"/lock", k)
	left := make([]int, k) // the segments not known to be sold out
	for i := range left {
		left[i] = i
	}
	for len(left) > 0 {
		s, err := locks.Lock(ctx, left...)
		if err != nil {
			return bought, err
		}
		ok, err := take(ctx, st, fmt.Sprintf("%s/stock/%d", path, s.Index()), pay, p)
		if uerr := s.Unlock(ctx); err == nil {
			err = uerr
		}
		switch {
		case err != nil:
			return bought, err
		case ok:
			bought++
		default:
			// Sold out, and so may be others: a count read without
			// the stripe can be stale, but never too low, since
			// counts only go down.
			left = slices.DeleteFunc(left, func(i int) bool {
				if i == s.Index() {
					return true
				}
				n, err := st.Get(ctx, fmt.Sprintf("%s/stock/%d", path, i))
				return err == nil && string(n.Data) == "0"
			})
		}
	}
	return bought, nil
}

// take takes one unit of the segment whose count is at p, reporting false
// when it is sold out. Its caller holds the segment's stripe, so the count
// cannot change under it; the version check would catch a lost stripe.
func take(ctx context.Context, st store.Store, node string, pay time.Duration, p *payers) (bool, error) {
	n, err := st.Get(ctx, node)
	if err != nil {
		return false, err
	}
	count, err := strconv.Atoi(string(n.Data))
	if err != nil || count == 0 {
		return false, err
	}
	p.pay(pay)
	_, err = st.Set(ctx, node, []byte(strconv.Itoa(count-1)), n.Version)
	return err == nil, err
}

// A flash sale of 200 units: one purchase holds its lock for 1 ms. With one
// lock every buyer waits for every other (200 × 1 ms); with the stock split
// into 8 segments, each with a stripe of its own, 8 buyers pay at once.
func ExampleStripedMutex() {
	ctx := context.Background()
	srv := memstore.NewServer() // in production, zkstore or etcdstore
	const units, buyers = 200, 16
	for _, k := range []int{1, 8} {
		path := fmt.Sprintf("/sale/k%d", k)
		admin := srv.Open()
		if err := stockUp(ctx, admin, path, k, units); err != nil {
			log.Fatal(err)
		}
		sessions := make([]store.Store, buyers)
		for i := range sessions {
			sessions[i] = srv.Open()
		}
		var p payers
		sold, err := flashSale(ctx, sessions, path, k, time.Millisecond, &p)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d segment(s): %d units sold, never more than %d buyers paying at once: %v\n", k, sold, k, p.peak <= k)
		for _, st := range append(sessions, admin) {
			st.Close()
		}
	}
	// Output:
	// 1 segment(s): 200 units sold, never more than 1 buyers paying at once: true
	// 8 segment(s): 200 units sold, never more than 8 buyers paying at once: true
}

// TryLock hands out the free stripes, one per call, each with its own token.
func ExampleStripe() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	hot := sync.NewStripedMutex(st, "/counters/hits", 2)
	first, _, _ := hot.TryLock(ctx)
	second, _, _ := hot.TryLock(ctx)
	fmt.Println("two different stripes:", first.Index() != second.Index())
	_, ok, _ := hot.TryLock(ctx)
	fmt.Println("a third:", ok)

	// Work on segment first.Index() under first.Context(); fence writes
	// with first.Token().
	if err := first.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	again, ok, _ := hot.TryLock(ctx)
	fmt.Println("after an unlock:", ok, again.Index() == first.Index())
	_ = again.Unlock(ctx)
	_ = second.Unlock(ctx)
	// Output:
	// two different stripes: true
	// a third: false
	// after an unlock: true true
}
