package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["ls"] = command{summary: "list what is stored under PATH", run: runLs}
}

func runLs(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "ls", "[flags] PATH", "Lists the children of PATH with their Seq, owner session (for ephemeral nodes)\nand data: what the primitives left in the store.")
	recursive := fs.Bool("r", false, "list the whole subtree")
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
	sf.readOnly = true
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var implicit map[string][]string
	if *recursive {
		if implicit, err = inspect.ImplicitDirs(ctx, st, pos[0]); err != nil {
			return err
		}
	}
	return list(ctx, e.stdout, st, pos[0], *recursive, implicit)
}

// list prints one line per child of p: path, seq, owner and data; then,
// recursively, the directories below p that are no node (implicit, by
// parent: etcd's own recipes write "<prefix>/<lease>" with no key at
// "<prefix>"), marked as such.
func list(ctx context.Context, w io.Writer, st store.Store, p string, recursive bool, implicit map[string][]string) error {
	kids, err := st.Children(ctx, p)
	if err != nil {
		return err
	}
	for _, k := range kids {
		child := store.Join(p, k.Name)
		n, err := st.Get(ctx, child)
		if err != nil {
			continue // gone since the listing
		}
		owner := "persistent"
		if n.Owner != 0 {
			owner = "ephemeral(" + inspect.SessionString(n.Owner) + ")"
		}
		fmt.Fprintf(w, "%s\tseq=%d\t%s\t%s\n", child, n.Seq, owner, printable(n.Data))
		if recursive {
			if err := list(ctx, w, st, child, true, implicit); err != nil {
				return err
			}
		}
	}
	for _, name := range implicit[p] {
		child := store.Join(p, name)
		fmt.Fprintf(w, "%s\t-\tdirectory (no node)\t-\n", child)
		if err := list(ctx, w, st, child, true, implicit); err != nil && !errors.Is(err, store.ErrNoNode) {
			return err
		}
	}
	return nil
}

// printable shows data as text when it is short UTF-8 text, else its size.
func printable(data []byte) string {
	if len(data) <= 80 && utf8.Valid(data) {
		return strconv.Quote(string(data))
	}
	return fmt.Sprintf("<%d bytes>", len(data))
}
