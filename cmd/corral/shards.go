package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["shards"] = command{summary: "owner, token and age of every shard of a partition", run: runShards}
}

const shardsHelp = `Shows every shard of the partition at PATH (package partition): the member id
that owns it, its fencing token, how long it has been owned (where the store
keeps creation times: ZooKeeper, not etcd), and the members waiting to take it
over. A shard nobody has contended for yet has no directory; with --shards K
every shard from 0 to K-1 is shown, "-" where nobody owns it.

With --json the output is one JSON document ({"path","shards"}).`

// shardJSON is one shard in corral shards --json.
type shardJSON struct {
	Shard   int                 `json:"shard"`
	Owner   *inspect.Contender  `json:"owner,omitempty"`
	Waiters []inspect.Contender `json:"waiters"`
}

func runShards(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "shards", "[flags] PATH", shardsHelp)
	k := fs.Int("shards", 0, "the number of shards, to show unowned ones too")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 1, "PATH"); err != nil {
		return err
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	if *k < 0 || *k > partition.MaxShards {
		return fmt.Errorf("%w: --shards %d: want 0 to %d", errUsage, *k, partition.MaxShards)
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	shards, err := readShards(ctx, st, pos[0], *k)
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(struct {
			Path   string      `json:"path"`
			Shards []shardJSON `json:"shards"`
		}{pos[0], shards})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	return printShards(e.stdout, pos[0], shards, time.Now())
}

// readShards reads the shards of the partition at path that have a
// directory, and those below k.
func readShards(ctx context.Context, st store.Store, path string, k int) ([]shardJSON, error) {
	dir := partition.ShardsDir(path)
	kids, err := st.Children(ctx, dir)
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		return nil, err
	}
	var ids []int
	for i := range k {
		ids = append(ids, i)
	}
	for _, c := range kids {
		if i, err := strconv.Atoi(c.Name); err == nil && i >= k {
			ids = append(ids, i)
		}
	}
	slices.Sort(ids)
	shards := make([]shardJSON, 0, len(ids))
	for _, i := range ids {
		rep, err := inspect.Read(ctx, st, store.Join(dir, strconv.Itoa(i)))
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			return nil, err
		}
		s := shardJSON{Shard: i, Waiters: rep.Waiters}
		if len(rep.Holders) > 0 {
			s.Owner = &rep.Holders[0]
		}
		if s.Waiters == nil {
			s.Waiters = []inspect.Contender{}
		}
		shards = append(shards, s)
	}
	return shards, nil
}

func printShards(w io.Writer, path string, shards []shardJSON, now time.Time) error {
	if len(shards) == 0 {
		_, err := fmt.Fprintf(w, "no shards under %s\n", path)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tOWNER\tTOKEN\tSESSION\tFOR\tNEXT")
	for _, s := range shards {
		next := "-"
		if len(s.Waiters) > 0 {
			next = who(s.Waiters[0].Identity, s.Waiters[0].Data)
		}
		if s.Owner == nil {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t%s\n", s.Shard, next)
			continue
		}
		o := s.Owner
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", s.Shard, who(o.Identity, o.Data), o.Seq, session(o.Session), age(o.Since, now), next)
	}
	return tw.Flush()
}
