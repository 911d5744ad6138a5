package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/corral-go/corral/shared"
)

func init() {
	commands["value"] = command{summary: "get, set or watch a shared value", run: runValue}
	commands["counter"] = command{summary: "add to or get a shared counter", run: runCounter}
}

func runValue(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "value", "[flags] get PATH | set [--version N] PATH [DATA] | watch PATH",
		"get: print the value at PATH, exactly as it was set (exit 3 if it was never set).\n"+
			"set: set it to DATA, or to standard input when DATA is not given, and print\n"+
			"its new version. With --version N, only if its version is N (-1: only if it\n"+
			"was never set): exit 1 if another writer changed it since.\n"+
			"watch: print the value now and after every change, one line each, until\n"+
			"interrupted.\n\n"+
			"--json prints one object per value: path, version and data (data_base64\n"+
			"when it is not UTF-8); a value never set has version -1 and no data.")
	asJSON := fs.Bool("json", false, "print JSON")
	version := fs.Int64("version", 0, "set only if the value's version is this (-1: never set); default: any version")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: want get, set or watch", errUsage)
	}
	verb, pos := pos[0], pos[1:]
	switch verb {
	case "set":
		if len(pos) != 1 && len(pos) != 2 {
			return fmt.Errorf("%w: want set PATH [DATA], got %d argument(s)", errUsage, len(pos))
		}
	case "get", "watch":
		if err := wantArgs(pos, 1, "PATH"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown value action %q (want get, set or watch)", errUsage, verb)
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	cas := false
	fs.Visit(func(f *flag.Flag) { cas = cas || f.Name == "version" })
	var data []byte
	if verb == "set" {
		if len(pos) == 2 {
			data = []byte(pos[1])
		} else if data, err = readItem(e.stdin); err != nil {
			return err
		}
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	v := shared.NewValue(st, pos[0])
	out := valuePrinter{w: e.stdout, path: pos[0], json: *asJSON}
	switch verb {
	case "get":
		s, err := v.Get(ctx)
		if err != nil {
			return err
		}
		if s.Version == shared.NoVersion && !out.json {
			return &exitError{code: exitTimeout, err: fmt.Errorf("%s was never set", pos[0])}
		}
		return out.print(s, false)
	case "set":
		var s shared.Snapshot
		if cas {
			s, err = v.CompareAndSet(ctx, data, *version)
		} else {
			s, err = v.Set(ctx, data)
		}
		if err != nil {
			return err
		}
		if out.json {
			return out.print(s, false)
		}
		_, err = fmt.Fprintln(e.stdout, s.Version)
		return err
	}
	w := v.Watch(ctx)
	defer w.Close()
	for s := range w.Snapshots() {
		if err := out.print(s, true); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return interrupted(ctx) // the normal end of watch
	}
	return w.Err()
}

// valuePrinter writes values out: raw, as lines, or as JSON lines.
type valuePrinter struct {
	w    io.Writer
	path string
	json bool
}

// jsonValue is a value as --json prints it.
type jsonValue struct {
	Path       string  `json:"path"`
	Version    int64   `json:"version"`
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
}

// print writes s: its data as it is, or as a line (a value never set is
// left out), or as JSON.
func (p valuePrinter) print(s shared.Snapshot, line bool) error {
	if !p.json {
		if s.Version == shared.NoVersion {
			return nil
		}
		format := "%s"
		if line {
			format = "%s\n"
		}
		_, err := fmt.Fprintf(p.w, format, s.Data)
		return err
	}
	j := jsonValue{Path: p.path, Version: s.Version}
	switch {
	case s.Version == shared.NoVersion:
	case utf8.Valid(s.Data):
		d := string(s.Data)
		j.Data = &d
	default:
		d := base64.StdEncoding.EncodeToString(s.Data)
		j.DataBase64 = &d
	}
	return json.NewEncoder(p.w).Encode(j)
}

func runCounter(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "counter", "[flags] add PATH [DELTA] | get PATH",
		"add: add DELTA (default 1; a negative one after --: add PATH -- -3) to the\n"+
			"counter at PATH and print its new value. Concurrent adders never lose an add.\n"+
			"get: print its value (0 if it was never added to).\n\n"+
			"The counter is shared with Curator's DistributedAtomicLong and kazoo's\n"+
			"Counter on the same path. --json prints {\"path\": ..., \"value\": ...}.")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, argv, err := parse(fs, args)
	if err != nil {
		return err
	}
	pos = append(pos, argv...) // a negative DELTA comes after --
	if len(pos) == 0 {
		return fmt.Errorf("%w: want add or get", errUsage)
	}
	verb, pos := pos[0], pos[1:]
	delta := int64(1)
	switch verb {
	case "add":
		if len(pos) != 1 && len(pos) != 2 {
			return fmt.Errorf("%w: want add PATH [DELTA], got %d argument(s)", errUsage, len(pos))
		}
		if len(pos) == 2 {
			if delta, err = strconv.ParseInt(pos[1], 10, 64); err != nil {
				return fmt.Errorf("%w: DELTA must be an integer, not %q", errUsage, pos[1])
			}
		}
	case "get":
		if err := wantArgs(pos, 1, "PATH"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown counter action %q (want add or get)", errUsage, verb)
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	c := shared.NewCounter(st, pos[0])
	var n int64
	if verb == "add" {
		n, err = c.Add(ctx, delta)
	} else {
		n, err = c.Get(ctx)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(struct {
			Path  string `json:"path"`
			Value int64  `json:"value"`
		}{pos[0], n})
	}
	_, err = fmt.Fprintln(e.stdout, n)
	return err
}
