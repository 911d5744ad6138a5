// Package kazoo runs kazoo's Party and ShallowParty (the real ones, Python)
// beside corral's groups, for the group's interoperability test: it starts a
// small program of this package's own (party.py) with a Python 3 that has
// kazoo (Debian's python3-kazoo), connected to a ZooKeeper server, and
// drives it one command at a time. [Available] says what is missing; tests
// skip with that message.
//
// It is test-only, like every package under internal/testing: _test.go
// files import it; code that ships never does (test.sh checks).
package kazoo

import (
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/corral-go/corral/internal/testing/lineproc"
)

//go:embed party.py
var source []byte

// pythons are the interpreters tried, in order: the one on PATH, then
// Debian's own, where python3-kazoo installs (a PATH may lead to another
// Python first, such as pyenv's).
var pythons = []string{"python3", "/usr/bin/python3"}

// python returns the first interpreter that imports kazoo, or why none does.
func python() (string, error) {
	var errs []error
	for _, p := range pythons {
		out, err := exec.Command(p, "-c", "import kazoo.recipe.party").CombinedOutput()
		if err == nil {
			return p, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w: %s", p, err, strings.TrimSpace(string(out))))
	}
	return "", fmt.Errorf("kazoo: no Python 3 with kazoo (apt-get install -y python3-kazoo): %w", errors.Join(errs...))
}

// Available returns nil when the program can run here, and otherwise an
// error that says what is missing.
func Available() error {
	_, err := python()
	return err
}

// Client is the program, running: a kazoo client with its own session,
// holding the parties it joined. Its methods must not be called
// concurrently (one command at a time).
type Client struct{ *lineproc.Proc }

// Start writes the program into dir (a temporary directory of the
// caller's) and starts it, connected to the ZooKeeper server at addr
// ("host:port"). It returns once the client has its session. Close stops
// it, and its members leave; the program also dies with this process.
func Start(ctx context.Context, dir, addr string) (*Client, error) {
	py, err := python()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(dir, "party.py")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return nil, err
	}
	p, err := lineproc.Start(ctx, "kazoo", exec.Command(py, src, addr))
	if err != nil {
		return nil, err
	}
	return &Client{p}, nil
}

// Join joins a Party at path with the identifier ident (its node's data).
func (c *Client) Join(ctx context.Context, path, ident string) error {
	_, err := c.Send(ctx, fmt.Sprintf("join %s %s", path, hexOf(ident)))
	return err
}

// JoinShallow joins a ShallowParty at path with the identifier ident (in
// its node's name, and its data).
func (c *Client) JoinShallow(ctx context.Context, path, ident string) error {
	_, err := c.Send(ctx, fmt.Sprintf("shallow-join %s %s", path, hexOf(ident)))
	return err
}

// Leave makes the member that joined path with ident leave.
func (c *Client) Leave(ctx context.Context, path, ident string) error {
	_, err := c.Send(ctx, fmt.Sprintf("leave %s %s", path, hexOf(ident)))
	return err
}

// Party returns what a Party at path lists: its members' values, in
// kazoo's order (the server's listing).
func (c *Client) Party(ctx context.Context, path string) ([]string, error) {
	return c.list(ctx, "party "+path)
}

// Shallow returns what a ShallowParty at path lists: its members' ids.
func (c *Client) Shallow(ctx context.Context, path string) ([]string, error) {
	return c.list(ctx, "shallow "+path)
}

func (c *Client) list(ctx context.Context, command string) ([]string, error) {
	line, err := c.Send(ctx, command)
	if err != nil || line == "-" {
		return nil, err
	}
	var vs []string
	for h := range strings.SplitSeq(line, ",") {
		b, err := hex.DecodeString(strings.TrimPrefix(h, "-"))
		if err != nil {
			return nil, fmt.Errorf("kazoo: %s: answer %q: %w", command, line, err)
		}
		vs = append(vs, string(b))
	}
	return vs, nil
}

func hexOf(s string) string {
	if s == "" {
		return "-"
	}
	return hex.EncodeToString([]byte(s))
}
