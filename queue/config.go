package queue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Settings are the settings stored with a queue; see Settings in the
// package doc.
type Settings struct {
	Delivery Delivery
	// VisibilityTimeout is how long an at-least-once claim lasts without
	// Extend; 0: until the consumer's session ends.
	VisibilityTimeout time.Duration
	// DeadLetter is the path of the dead-letter queue, "" for none, and
	// MaxDeliveries the deliveries after which an item moves there.
	DeadLetter    string
	MaxDeliveries int
}

// config is the content of a queue's config node.
type config struct {
	delivery      Delivery
	visibility    time.Duration
	deadLetter    string
	maxDeliveries int
}

func (c config) public() Settings {
	return Settings{Delivery: c.delivery, VisibilityTimeout: c.visibility, DeadLetter: c.deadLetter, MaxDeliveries: c.maxDeliveries}
}

// configHeader starts the data of every queue's config node: the magic
// inspect tells a queue by, and the version of the layout.
const configHeader = names.ConfigMagic + "1"

// encode returns the config node's data: a header line and one "key: value"
// line per setting, readable in "corral ls".
func (c config) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\ndelivery: %s\n", configHeader, c.delivery)
	if c.visibility > 0 {
		fmt.Fprintf(&b, "visibility-timeout: %s\n", c.visibility)
	}
	if c.deadLetter != "" {
		fmt.Fprintf(&b, "dead-letter: %s\nmax-deliveries: %d\n", c.deadLetter, c.maxDeliveries)
	}
	return b.Bytes()
}

// parseConfig decodes a config node's data. Unknown keys are ignored, for
// settings a later version may add.
func parseConfig(data []byte) (config, error) {
	var c config
	sc := bufio.NewScanner(bytes.NewReader(data))
	if !sc.Scan() || sc.Text() != configHeader {
		return c, fmt.Errorf("not a queue's config")
	}
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			return c, fmt.Errorf("config line %q", sc.Text())
		}
		var err error
		switch k {
		case "delivery":
			switch v {
			case AtMostOnce.String():
				c.delivery = AtMostOnce
			case AtLeastOnce.String():
				c.delivery = AtLeastOnce
			default:
				err = fmt.Errorf("delivery %q", v)
			}
		case "visibility-timeout":
			c.visibility, err = time.ParseDuration(v)
		case "dead-letter":
			c.deadLetter = v
		case "max-deliveries":
			c.maxDeliveries, err = strconv.Atoi(v)
		}
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
	}
	return c, nil
}

// validate checks the options given to New for the queue at path.
func (o *options) validate(path string) error {
	if o.delivery != AtMostOnce && o.delivery != AtLeastOnce {
		return fmt.Errorf("%w: %v", ErrInvalidDelivery, o.delivery)
	}
	if o.visibility < 0 {
		return fmt.Errorf("%w: visibility timeout %v", store.ErrInvalidArgument, o.visibility)
	}
	// Said, never implied: a timeout alone would silently make the queue
	// at-least-once for every other Queue on it.
	if o.visibility > 0 && (!o.set.delivery || o.delivery != AtLeastOnce) {
		return fmt.Errorf("%w: a visibility timeout needs WithDelivery(AtLeastOnce)", store.ErrInvalidArgument)
	}
	if o.set.putsInFlight && o.putsInFlight < 1 {
		return fmt.Errorf("%w: %d puts in flight, want at least 1", store.ErrInvalidArgument, o.putsInFlight)
	}
	if o.set.deadLetter {
		if o.maxDeliveries < 1 {
			return fmt.Errorf("%w: max deliveries %d, want at least 1", store.ErrInvalidArgument, o.maxDeliveries)
		}
		if err := recipe.ValidateDir(o.deadLetter); err != nil {
			return fmt.Errorf("dead-letter queue: %w", err)
		}
		if within(o.deadLetter, path) || within(path, o.deadLetter) {
			return fmt.Errorf("%w: dead-letter queue %q overlaps the queue", store.ErrInvalidArgument, o.deadLetter)
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// merge returns the settings a Queue with options o uses on a queue that
// stores c: c, checked against every option o was given.
func (o *options) merge(c config) (config, error) {
	var diffs []string
	if o.set.delivery && o.delivery != c.delivery {
		diffs = append(diffs, fmt.Sprintf("delivery %v, not %v", c.delivery, o.delivery))
	}
	if o.set.visibility && o.visibility != c.visibility {
		diffs = append(diffs, fmt.Sprintf("visibility timeout %v, not %v", c.visibility, o.visibility))
	}
	if o.set.deadLetter && (o.deadLetter != c.deadLetter || o.maxDeliveries != c.maxDeliveries) {
		diffs = append(diffs, fmt.Sprintf("dead letters to %q after %d deliveries, not %q after %d",
			c.deadLetter, c.maxDeliveries, o.deadLetter, o.maxDeliveries))
	}
	if len(diffs) > 0 {
		return c, fmt.Errorf("%w: the queue has %s", ErrMismatch, strings.Join(diffs, "; "))
	}
	if c.visibility > 0 && c.delivery != AtLeastOnce || c.maxDeliveries < 0 {
		return c, fmt.Errorf("%w: the queue's config is not valid: %q", ErrKindMismatch, c.encode())
	}
	return c, nil
}

// settings holds what a Queue knows of its queue's stored settings.
type settings struct {
	mu      gosync.Mutex
	cfg     config
	stored  bool // cfg was read from (or written to) the config node
	checked bool // the path was checked for other recipes' nodes
}

// settings returns the queue's settings: the stored ones, read once, and
// written first when write is set (a Put or a take) and there are none.
// Without write (Settings, Len, Peek), a queue with no settings yet gets
// the Queue's options and nothing is stored.
func (q *Queue) settings(ctx context.Context, write bool) (config, error) {
	s := &q.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.stored {
		n, err := q.st.Get(ctx, q.config)
		if err == nil {
			c, err := parseConfig(n.Data)
			if err != nil {
				return config{}, fmt.Errorf("%w: %q: %w", ErrKindMismatch, q.config, err)
			}
			if c, err = q.opts.merge(c); err != nil {
				return config{}, err
			}
			s.cfg, s.stored = c, true
			break
		}
		if !errors.Is(err, store.ErrNoNode) {
			return config{}, err
		}
		if !s.checked {
			if err := q.checkFamily(ctx); err != nil {
				return config{}, err
			}
			s.checked = true
		}
		if !write {
			return q.opts.config, nil
		}
		_, err = q.st.Create(ctx, q.config, q.opts.encode(), store.Persistent)
		if err == nil {
			s.cfg, s.stored = q.opts.config, true
			break
		}
		if !errors.Is(err, store.ErrNodeExists) && !errors.Is(err, store.ErrDisconnected) {
			return config{}, err
		}
		// Made meanwhile, by another or by us with a lost reply: read it.
		if err := ctx.Err(); err != nil {
			return config{}, err
		}
	}
	return s.cfg, nil
}

// checkFamily refuses a path that holds another recipe's nodes.
func (q *Queue) checkFamily(ctx context.Context) error {
	kids, err := q.st.Children(ctx, q.path)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	return recipe.CheckFamily(q.path, kids, names.Queues)
}

// delivery returns the delivery of the settings stored with the queue once
// this Queue read them, its own until then.
func (q *Queue) delivery() Delivery {
	s := &q.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stored {
		return s.cfg.delivery
	}
	return q.opts.delivery
}
