package inspect

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-go/corral/store"
)

// The layout of a queue, as the queue package writes it (queue/name.go):
// items are children of items/ named "qi-<priority key>-..." followed by
// the store's sequence suffix, where the priority key is 16 hexadecimal
// digits that sort the other way round from the int64 priority; claims are
// children of claims/ named after the item they claim.
const (
	itemsDir  = "items"
	claimsDir = "claims"
	itemMark  = "qi-"
	keyLen    = 16
	signBit   = uint64(1) << 63
)

// itemPriority decodes the priority of the item named name; ok is false
// for names that are not items.
func itemPriority(name string) (prio int64, ok bool) {
	i := strings.Index(name, itemMark)
	if i < 0 {
		return 0, false
	}
	rest := name[i+len(itemMark):]
	if len(rest) < keyLen+1 || rest[keyLen] != '-' {
		return 0, false
	}
	k, err := strconv.ParseUint(rest[:keyLen], 16, 64)
	if err != nil {
		return 0, false
	}
	return int64(^k ^ signBit), true
}

func (r *reader) queue(ctx context.Context, rep *Report) error {
	q := &QueueState{Levels: []Level{}, Claims: []Claim{}}
	rep.Queue = q
	items, err := r.children(ctx, store.Join(rep.Path, itemsDir))
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		return err
	}
	claims, err := r.children(ctx, store.Join(rep.Path, claimsDir))
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
	present := map[string]bool{}
	for _, k := range items {
		p, ok := itemPriority(k.Name)
		if !ok {
			continue
		}
		present[k.Name] = true
		level(p).Items++
		q.Items++
	}
	for _, k := range claims {
		p, ok := itemPriority(k.Name)
		if !ok {
			continue
		}
		n, err := r.st.Get(ctx, store.Join(store.Join(rep.Path, claimsDir), k.Name))
		if errors.Is(err, store.ErrNoNode) {
			continue // released since the listing
		}
		if err != nil {
			return err
		}
		c := Claim{Item: k.Name, Priority: p, Session: n.Owner, Since: n.Created}
		c.Identity, c.Data = identify(n.Data)
		if c.Identity != nil {
			c.Since = c.Identity.Start
		}
		q.Claims = append(q.Claims, c)
		if present[k.Name] {
			level(p).Claimed++
			q.Claimed++
		}
	}
	for _, l := range levels {
		q.Levels = append(q.Levels, *l)
	}
	slices.SortFunc(q.Levels, func(a, b Level) int { return cmp.Compare(b.Priority, a.Priority) })
	return nil
}
