package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// ErrMismatch: a member joined a partition with a number of shards that
// differs from that of a member already there. The joiner is refused and
// the members there are not disturbed.
var ErrMismatch = errors.New("partition: number of shards differs from the members'")

// countMarker is the prefix of a member's node in the shard-count
// directory; the store's unique suffix follows the count. It contains
// names.Group, so the directory reads as a group.
const countMarker = names.Group + "k"

// ShardCountDir returns the directory of the partition at path
// ("<path>/shardcount") where each member keeps, for as long as it is a
// member, an ephemeral node that names its number of shards ("group-k16-…"
// for 16) and holds its id; "" when path is no partition's path, as
// MembersDir does.
func ShardCountDir(path string) string { return below(path, "shardcount") }

// claimCount creates the member's shard-count node and checks it against
// those of the members that came before it: a node with another count
// among them refuses the joiner with ErrMismatch (and removes its node).
// Comparing with every earlier node, not only the oldest, means two
// members with different counts are never both admitted, however their
// joins interleave; a joiner may be refused while a mismatched joiner
// before it is still being refused. A lost connection is ridden out, as
// group.Join does.
func claimCount(ctx context.Context, st store.Store, path string, shards int, id string) (store.Node, error) {
	for attempt := 0; ; attempt++ {
		n, err := tryClaimCount(ctx, st, path, shards, id)
		if err == nil || errors.Is(err, ErrMismatch) || !recipe.RideOut(ctx, st, err, attempt) {
			return n, err
		}
	}
}

func tryClaimCount(ctx context.Context, st store.Store, path string, shards int, id string) (store.Node, error) {
	dir := ShardCountDir(path)
	n, _, err := recipe.Create(ctx, st, nil, dir, fmt.Sprintf("%s%d-", countMarker, shards), []byte(id))
	if err != nil {
		return store.Node{}, err
	}
	kids, err := st.Children(ctx, dir)
	if err == nil {
		err = checkCount(ctx, st, dir, kids, n, shards)
	}
	if err != nil {
		return store.Node{}, errors.Join(err, recipe.Remove(ctx, st, nil, n))
	}
	return n, nil
}

// checkCount returns an error wrapping ErrMismatch if a node of kids
// created before own names another count than shards.
func checkCount(ctx context.Context, st store.Store, dir string, kids []store.Child, own store.Node, shards int) error {
	for _, k := range kids {
		if k.Seq >= own.Seq {
			break // kids are sorted by Seq
		}
		got, ok := parseCount(k.Name)
		if !ok || got == shards {
			continue
		}
		who := "a member"
		if n, err := st.Get(ctx, store.Join(dir, k.Name)); err == nil {
			who = fmt.Sprintf("member %q", n.Data)
		}
		return fmt.Errorf("%w: %d here, %d for %s", ErrMismatch, shards, got, who)
	}
	return nil
}

// parseCount returns the number of shards a shard-count node's name
// states, and whether it states one.
func parseCount(name string) (int, bool) {
	_, rest, ok := strings.Cut(name, countMarker)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(digits)
	return k, err == nil && k >= 1
}
