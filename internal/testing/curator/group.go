package curator

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corral-go/corral/internal/testing/lineproc"
)

// Group is the GroupMember program, running: a Curator client with its own
// session, holding any number of GroupMembers by id. Its methods must not
// be called concurrently (one command at a time).
type Group struct{ *lineproc.Proc }

// StartGroup compiles the GroupMember program into dir (a temporary
// directory of the caller's) and starts it, connected to the ZooKeeper
// server at addr ("host:port"). It returns once the client has its
// session. Close stops it, and with it its members.
func StartGroup(ctx context.Context, dir, addr string) (*Group, error) {
	p, err := start(ctx, dir, addr, "CuratorGroup", groupSource)
	if err != nil {
		return nil, err
	}
	return &Group{p}, nil
}

// Join starts a GroupMember with id id and payload value in the group at
// path. Curator makes its node in the background: Join returns before it
// is there.
func (g *Group) Join(ctx context.Context, path, id string, value []byte) error {
	_, err := g.Send(ctx, fmt.Sprintf("join %s %s %s", path, id, hexOf(value)))
	return err
}

// SetValue changes member id's payload with setThisData.
func (g *Group) SetValue(ctx context.Context, id string, value []byte) error {
	_, err := g.Send(ctx, fmt.Sprintf("set %s %s", id, hexOf(value)))
	return err
}

// Leave closes member id, which removes its node.
func (g *Group) Leave(ctx context.Context, id string) error {
	_, err := g.Send(ctx, "leave "+id)
	return err
}

// AwaitMembers waits, up to 20 seconds, until member id's
// getCurrentMembers() is want (member ids to payloads), and returns what it
// is then: want, or, with an error, what it was when the wait ended.
func (g *Group) AwaitMembers(ctx context.Context, id string, want map[string][]byte) (map[string][]byte, error) {
	line, err := g.Send(ctx, fmt.Sprintf("members %s %s", id, render(want)))
	got, perr := parseMembers(strings.TrimPrefix(line, "timeout: members "))
	if err == nil {
		err = perr
	}
	return got, err
}

func hexOf(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}

// render writes members as the program does: "id=VALUE" sorted by id and
// joined by ",", "-" for none.
func render(members map[string][]byte) string {
	if len(members) == 0 {
		return "-"
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(members)) {
		parts = append(parts, id+"="+hexOf(members[id]))
	}
	return strings.Join(parts, ",")
}

func parseMembers(s string) (map[string][]byte, error) {
	m := map[string][]byte{}
	if s == "-" || s == "" {
		return m, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		id, v, ok := strings.Cut(part, "=")
		if !ok {
			return m, fmt.Errorf("curator: members %q", s)
		}
		var b []byte
		if v != "-" {
			var err error
			if b, err = hex.DecodeString(v); err != nil {
				return m, fmt.Errorf("curator: members %q: %w", s, err)
			}
		}
		m[id] = b
	}
	return m, nil
}
