package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["queue"] = command{summary: "put items into, and take them from, a queue", run: runQueue}
}

func runQueue(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "queue", "[flags] put PATH [DATA] | take PATH | consume PATH | peek PATH | len PATH",
		"put: add DATA to the queue at PATH (--priority: higher first); without DATA,\n"+
			"  read the item from standard input (empty input is refused: give DATA \"\"\n"+
			"  to put an empty item).\n"+
			"take: wait for one item and print it.\n"+
			"consume: print items until interrupted.\n"+
			"peek: print the item take would take, without taking it (exit 3 if none).\n"+
			"len: print the number of items, claimed ones included.\n"+
			"take and consume remove an item only once it has been written out\n"+
			"(at-least-once): an item being taken when corral is killed stays queued.\n"+
			"Every verb uses at-least-once delivery, and a queue stores its settings at\n"+
			"its first put or take: a queue whose programs stored other settings is\n"+
			"refused (settings differ).\n"+
			"--format raw (the default of take and peek) prints the data exactly as it\n"+
			"was put, nothing added, so put and take round-trip any bytes; --format line\n"+
			"(the default of consume, a stream) adds a newline after each item; --format\n"+
			"json prints one object per line: id, priority, deliveries and data (a\n"+
			"string, or data_base64 when the data is not UTF-8 text).")
	prio := fs.Int("priority", 0, "priority of the item put")
	timeout := fs.Duration("timeout", 0, "take: give up after this long (exit 3); 0 waits forever")
	format := fs.String("format", "", "how take, consume and peek print items: raw, line or json (default: raw, line for consume)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: want put, take, consume, peek or len", errUsage)
	}
	verb, pos := pos[0], pos[1:]
	switch verb {
	case "put":
		if len(pos) != 1 {
			err = wantArgs(pos, 2, "PATH [DATA]")
		}
	case "take", "consume", "peek", "len":
		err = wantArgs(pos, 1, "PATH")
	default:
		err = fmt.Errorf("%w: unknown queue action %q (want put, take, consume, peek or len)", errUsage, verb)
	}
	if err != nil {
		return err
	}
	if *format == "" {
		*format = "raw"
		if verb == "consume" {
			*format = "line"
		}
	}
	if *format != "raw" && *format != "line" && *format != "json" {
		return fmt.Errorf("%w: --format %q: want raw, line or json", errUsage, *format)
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	var data []byte
	if verb == "put" {
		if len(pos) == 2 {
			data = []byte(pos[1])
		} else if data, err = readItem(e.stdin); err != nil {
			return err
		}
	}
	sf.readOnly = verb == "peek" || verb == "len"
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	// Every verb states the CLI's delivery: a queue stores its settings at
	// its first put or take, so a put with other options would fix it
	// at-most-once before the CLI's first take.
	q := queue.New(st, pos[0], queue.WithDelivery(queue.AtLeastOnce))
	out := printer{w: e.stdout, format: *format}
	switch verb {
	case "put":
		return q.PutPriority(ctx, data, *prio)
	case "len":
		n, err := q.Len(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(e.stdout, n)
		return err
	case "peek":
		it, ok, err := q.Peek(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return &exitError{code: exitTimeout, err: fmt.Errorf("%s is empty", pos[0])}
		}
		return out.print(it)
	case "take":
		tctx := ctx
		if *timeout > 0 {
			var cancel context.CancelFunc
			tctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		it, err := q.Take(tctx)
		if err != nil {
			return err
		}
		return out.emit(ctx, it)
	}
	c := q.Consume(ctx)
	defer c.Close()
	for it := range c.Items() {
		if err := out.emit(ctx, it); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return interrupted(ctx) // the normal end of consume
	}
	return c.Err()
}

// readItem reads an item's data from r, refusing more than a node holds.
func readItem(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: no DATA and no standard input", errUsage)
	}
	data, err := io.ReadAll(io.LimitReader(r, store.MaxDataSize+1))
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	if err := store.ValidateData(data); err != nil {
		return nil, fmt.Errorf("standard input: %w", err)
	}
	if len(data) == 0 {
		// Most likely a mistake (< /dev/null, a command that printed
		// nothing); an empty item can still be put on purpose.
		return nil, fmt.Errorf("%w: standard input is empty: nothing to put (give DATA \"\" to put an empty item)", errUsage)
	}
	return data, nil
}

// printer writes items out: raw, as lines or as JSON lines.
type printer struct {
	w      io.Writer
	format string // "raw", "line" or "json"
}

// jsonItem is an item as --format json prints it.
type jsonItem struct {
	ID         string  `json:"id"`
	Priority   int     `json:"priority"`
	Deliveries int     `json:"deliveries"`
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
}

func (p printer) print(it *queue.Item) error {
	switch p.format {
	case "raw":
		_, err := p.w.Write(it.Data)
		return err
	case "line":
		_, err := fmt.Fprintf(p.w, "%s\n", it.Data)
		return err
	}
	j := jsonItem{ID: it.ID, Priority: it.Priority, Deliveries: it.Deliveries}
	if utf8.Valid(it.Data) {
		s := string(it.Data)
		j.Data = &s
	} else {
		s := base64.StdEncoding.EncodeToString(it.Data)
		j.DataBase64 = &s
	}
	return json.NewEncoder(p.w).Encode(j)
}

// emit writes an item out, then acknowledges it; an item that cannot be
// written goes back to the queue.
func (p printer) emit(ctx context.Context, it *queue.Item) error {
	actx := context.WithoutCancel(ctx)
	if err := p.print(it); err != nil {
		_ = it.Nack(actx)
		return err
	}
	return it.Ack(actx)
}
