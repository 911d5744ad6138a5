package inspect

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-go/corral/store"
)

// The layout of a queue, as the queue package writes it (queue/name.go):
// items are children of items/ named "qi-<priority key>-i<id>-..."
// followed by the store's sequence suffix, where the priority key is 16
// hexadecimal digits that sort the other way round from the int64
// priority and the id 16 hexadecimal digits; claims are children of
// claims/ named by the id of the item they claim (by the item's whole name
// in a queue of an earlier corral, whose items have no id).
const (
	itemsDir   = "items"
	claimsDir  = "claims"
	countsDir  = "deliveries"
	configName = "config"
	itemMark   = "qi-"
	keyLen     = 16
	signBit    = uint64(1) << 63
)

// parseItem decodes the priority and the id of the item named name (the
// name itself when it has no id); ok is false for names that are not
// items.
func parseItem(name string) (prio int64, id string, ok bool) {
	i := strings.Index(name, itemMark)
	if i < 0 {
		return 0, "", false
	}
	rest := name[i+len(itemMark):]
	if len(rest) < keyLen+1 || rest[keyLen] != '-' {
		return 0, "", false
	}
	k, err := strconv.ParseUint(rest[:keyLen], 16, 64)
	if err != nil {
		return 0, "", false
	}
	id = name
	for f := range strings.SplitSeq(rest[keyLen+1:], "-") {
		if len(f) == keyLen+1 && f[0] == 'i' {
			if _, err := strconv.ParseUint(f[1:], 16, 64); err == nil {
				id = f[1:]
				break
			}
		}
	}
	return int64(^k ^ signBit), id, true
}

// configHeader starts the data of a queue's config node (queue/config.go).
const configHeader = "corral queue "

// isQueue tells a queue from a directory that only has a child named
// "config" (ZooKeeper's own /zookeeper, an application's settings): a
// queue has its items, claims or deliveries directory, or a config node
// that the queue package wrote.
func (r *reader) isQueue(ctx context.Context, p string, kids []store.Child) (bool, error) {
	config := false
	for _, k := range kids {
		switch k.Name {
		case itemsDir, claimsDir, countsDir:
			return true, nil
		case configName:
			config = true
		}
	}
	if !config {
		return false, nil
	}
	n, err := r.st.Get(ctx, store.Join(p, configName))
	switch {
	case errors.Is(err, store.ErrNoNode):
		return false, nil
	case err != nil:
		return false, err
	}
	return bytes.HasPrefix(n.Data, []byte(configHeader)), nil
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
	type item struct {
		name string
		prio int64
	}
	byID := map[string]item{} // and by name, for claims named by it
	for _, k := range items {
		p, id, ok := parseItem(k.Name)
		if !ok {
			continue
		}
		byID[id], byID[k.Name] = item{k.Name, p}, item{k.Name, p}
		level(p).Items++
		q.Items++
	}
	for _, k := range claims {
		it, present := byID[k.Name]
		if !present {
			// Its item was acked since the listing, or the claim is
			// named by an item of an earlier corral that is gone.
			p, _, ok := parseItem(k.Name)
			if !ok {
				continue
			}
			it = item{k.Name, p}
		}
		n, err := r.st.Get(ctx, store.Join(store.Join(rep.Path, claimsDir), k.Name))
		if errors.Is(err, store.ErrNoNode) {
			continue // released since the listing
		}
		if err != nil {
			return err
		}
		c := Claim{Item: it.name, Priority: it.prio, Session: n.Owner, Since: n.Created}
		c.Identity, c.Data = identify(n.Data)
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
