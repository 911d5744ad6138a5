package inspect

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// isQueue tells a queue from a directory that only has a child named
// "config" (ZooKeeper's own /zookeeper, an application's settings): a
// queue has its items, claims or deliveries directory, or a config node
// that the queue package wrote.
func (r *reader) isQueue(ctx context.Context, p string, kids []store.Child) (bool, error) {
	config := false
	for _, k := range kids {
		switch k.Name {
		case names.Items, names.Claims, names.Deliveries:
			return true, nil
		case names.Config:
			config = true
		}
	}
	if !config {
		return false, nil
	}
	n, err := r.st.Get(ctx, store.Join(p, names.Config))
	switch {
	case errors.Is(err, store.ErrNoNode):
		return false, nil
	case err != nil:
		return false, err
	}
	return bytes.HasPrefix(n.Data, []byte(names.ConfigMagic)), nil
}

func (r *reader) queue(ctx context.Context, rep *Report) error {
	q := &QueueState{Levels: []Level{}, Claims: []Claim{}}
	rep.Queue = q
	items, err := r.children(ctx, store.Join(rep.Path, names.Items))
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		return err
	}
	claims, err := r.children(ctx, store.Join(rep.Path, names.Claims))
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		return err
	}
	levels := map[int64]*Level{}
	level := func(p int64) *Level {
		l, ok := levels[p]
		if !ok {
			l = &Level{Priority: p}
			levels[p] = l
		}
		return l
	}
	type item struct {
		name string
		prio int64
	}
	byID := map[string]item{} // and by name, for claims named by it
	for _, k := range items {
		e, ok := names.ParseItem(k.Name, k.Seq)
		if !ok {
			continue
		}
		byID[e.ID], byID[k.Name] = item{k.Name, e.Prio}, item{k.Name, e.Prio}
		level(e.Prio).Items++
		q.Items++
	}
	for _, k := range claims {
		it, present := byID[k.Name]
		if !present {
			// Its item was acked since the listing, or the claim is
			// named by an item of an earlier corral that is gone.
			e, ok := names.ParseItem(k.Name, k.Seq)
			if !ok {
				continue
			}
			it = item{k.Name, e.Prio}
		}
		n, err := r.st.Get(ctx, store.Join(store.Join(rep.Path, names.Claims), k.Name))
		if errors.Is(err, store.ErrNoNode) {
			continue // released since the listing
		}
		if err != nil {
			return err
		}
		c := Claim{Item: it.name, Priority: it.prio, Session: n.Owner, Since: n.Created}
		c.Identity, _, c.Data = identify(n.Data)
		if c.Identity != nil {
			c.Since = c.Identity.Start
		}
		q.Claims = append(q.Claims, c)
		if present {
			level(it.prio).Claimed++
			q.Claimed++
		}
	}
	for _, l := range levels {
		q.Levels = append(q.Levels, *l)
	}
	slices.SortFunc(q.Levels, func(a, b Level) int { return cmp.Compare(b.Priority, a.Priority) })
	return nil
}
