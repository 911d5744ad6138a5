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

// config is the content of a queue's config node: the settings it fixes,
// and the values of those.
type config struct {
	delivery      Delivery
	visibility    time.Duration
	deadLetter    string
	maxDeliveries int
	// fixed: the settings the node fixes. A setting no one has fixed yet
	// is adopted from whoever fixes it first (see options.fill).
	fixed fields
}

// fields is a set of a queue's settings.
type fields uint8

const (
	fieldDelivery fields = 1 << iota
	fieldVisibility
	fieldDeadLetter // the dead-letter queue and its max deliveries

	allFields = fieldDelivery | fieldVisibility | fieldDeadLetter
)

func (c config) public() Settings {
	return Settings{Delivery: c.delivery, VisibilityTimeout: c.visibility, DeadLetter: c.deadLetter, MaxDeliveries: c.maxDeliveries}
}

// configHeader starts the data of every queue's config node: the magic
// inspect tells a queue by, and the version of the layout.
const configHeader = names.ConfigMagic + "1"

// unset is the value of a setting the config node does not fix yet. No
// setting's value can be it (a dead-letter queue's path starts with '/'),
// and a corral that predates it fails to parse it, so it refuses a queue
// whose settings are not all fixed rather than take a missing one for a
// default.
const unset = "unset"

// encode returns the config node's data: a header line and one "key: value"
// line per setting, readable in "corral ls". A setting fixed at its
// default (no visibility timeout, no dead-letter queue) has no line, as in
// the nodes of earlier versions; one not fixed is "unset".
func (c config) encode() []byte {
	var b bytes.Buffer
	b.WriteString(configHeader + "\n")
	if c.fixed&fieldDelivery != 0 {
		fmt.Fprintf(&b, "delivery: %s\n", c.delivery)
	} else {
		b.WriteString("delivery: " + unset + "\n")
	}
	switch {
	case c.fixed&fieldVisibility == 0:
		b.WriteString("visibility-timeout: " + unset + "\n")
	case c.visibility > 0:
		fmt.Fprintf(&b, "visibility-timeout: %s\n", c.visibility)
	}
	switch {
	case c.fixed&fieldDeadLetter == 0:
		b.WriteString("dead-letter: " + unset + "\nmax-deliveries: " + unset + "\n")
	case c.deadLetter != "":
		fmt.Fprintf(&b, "dead-letter: %s\nmax-deliveries: %d\n", c.deadLetter, c.maxDeliveries)
	}
	return b.Bytes()
}

// parseConfig decodes a config node's data. Unknown keys are ignored, for
// settings a later version may add. A setting with no line is fixed at its
// default, as earlier versions wrote it; one whose value is "unset" is not
// fixed.
func parseConfig(data []byte) (config, error) {
	c := config{fixed: allFields}
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
		switch {
		case v == unset && k == "delivery":
			c.fixed &^= fieldDelivery
		case v == unset && k == "visibility-timeout":
			c.fixed &^= fieldVisibility
		case v == unset && (k == "dead-letter" || k == "max-deliveries"):
			c.fixed &^= fieldDeadLetter
		case k == "delivery":
			switch v {
			case AtMostOnce.String():
				c.delivery = AtMostOnce
			case AtLeastOnce.String():
				c.delivery = AtLeastOnce
			default:
				err = fmt.Errorf("delivery %q", v)
			}
		case k == "visibility-timeout":
			c.visibility, err = time.ParseDuration(v)
		case k == "dead-letter":
			c.deadLetter = v
		case k == "max-deliveries":
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
			return fmt.Errorf("%w: dead-letter queue %q overlaps the queue", store.ErrInvalidArgument, store.ShortPath(o.deadLetter))
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// explicit returns the settings o was given an option for.
func (o *options) explicit() fields {
	var f fields
	if o.set.delivery {
		f |= fieldDelivery
	}
	if o.set.visibility {
		f |= fieldVisibility
	}
	if o.set.deadLetter {
		f |= fieldDeadLetter
	}
	return f
}

// use is what a Queue needs of its queue's stored settings.
type use uint8

const (
	// useRead (Settings, Len, Peek, Nack, a dead-letter queue's check):
	// the settings now; nothing is stored.
	useRead use = iota
	// usePut (Put, PutAsync, PutBatch): the settings the Queue was given
	// an option for are fixed, as it was given them. A producer's puts
	// do not depend on the others, which it leaves to the consumers.
	usePut
	// useTake (Take, TryTake, Consume): every setting is fixed, the ones
	// the Queue was given no option for at its defaults: a take acts on
	// them, and a consumer that took by a default must not find the queue
	// changed under it.
	useTake
)

// wants returns the settings that must be fixed for u.
func (o *options) wants(u use) fields {
	switch u {
	case usePut:
		return o.explicit()
	case useTake:
		return allFields
	}
	return 0
}

// merge returns the settings a Queue with options o uses on a queue whose
// config node holds c: c's where it fixes them, o's (given or default)
// elsewhere. It fails with ErrMismatch where c fixes a setting o was given
// another value for.
func (o *options) merge(c config) (config, error) {
	var diffs []string
	both := c.fixed & o.explicit()
	if both&fieldDelivery != 0 && o.delivery != c.delivery {
		diffs = append(diffs, fmt.Sprintf("delivery %v, not %v", c.delivery, o.delivery))
	}
	if both&fieldVisibility != 0 && o.visibility != c.visibility {
		diffs = append(diffs, fmt.Sprintf("visibility timeout %v, not %v", c.visibility, o.visibility))
	}
	if both&fieldDeadLetter != 0 && (o.deadLetter != c.deadLetter || o.maxDeliveries != c.maxDeliveries) {
		diffs = append(diffs, fmt.Sprintf("dead letters to %q after %d deliveries, not %q after %d",
			c.deadLetter, c.maxDeliveries, o.deadLetter, o.maxDeliveries))
	}
	if len(diffs) > 0 {
		return c, fmt.Errorf("%w: the queue has %s", ErrMismatch, strings.Join(diffs, "; "))
	}
	m := c
	if c.fixed&fieldDelivery == 0 {
		m.delivery = o.delivery
	}
	if c.fixed&fieldVisibility == 0 {
		m.visibility = o.visibility
	}
	if c.fixed&fieldDeadLetter == 0 {
		m.deadLetter, m.maxDeliveries = o.deadLetter, o.maxDeliveries
	}
	if m.visibility > 0 && m.delivery != AtLeastOnce || m.maxDeliveries < 0 {
		return c, fmt.Errorf("%w: the queue's config is not valid with this Queue's options: %q", ErrKindMismatch, c.encode())
	}
	return m, nil
}

// settings holds what a Queue knows of its queue's stored settings.
type settings struct {
	mu      gosync.Mutex
	cfg     config // the node's, as last read or written
	read    bool   // cfg was read from (or written to) the config node
	putOK   bool   // a put needs no check: the explicit settings are fixed as given, or there are none
	checked bool   // the path was checked for other recipes' nodes
}

// settings returns the settings the Queue uses for u: the stored ones,
// and its options (given or default) for those not stored yet. It fixes
// the settings u wants (options.wants) that are not fixed yet: it creates
// the config node, or adds them to it, on condition of its version. Once
// the node fixes them all, it is read no more.
func (q *Queue) settings(ctx context.Context, u use) (config, error) {
	s := &q.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	want := q.opts.wants(u)
	for {
		if s.read && (s.cfg.fixed == allFields || s.cfg.fixed&want == want && u != useRead) {
			return q.opts.merge(s.cfg)
		}
		if u == usePut && s.putOK {
			return q.opts.merge(s.cfg)
		}
		n, err := q.st.Get(ctx, q.config)
		if err == nil {
			c, err := parseConfig(n.Data)
			if err != nil {
				return config{}, fmt.Errorf("%w: %q: %w", ErrKindMismatch, store.ShortPath(q.config), err)
			}
			m, err := q.opts.merge(c)
			if err != nil {
				return config{}, err
			}
			if c.fixed&want == want {
				s.cfg, s.read = c, true
				s.putOK = s.putOK || u == usePut
				return m, nil
			}
			// Fix what u wants and c does not fix yet, as this Queue
			// uses it.
			add := m
			add.fixed = c.fixed | want
			_, err = q.st.Set(ctx, q.config, add.encode(), n.Version)
			if err == nil {
				s.cfg, s.read = add, true
				s.putOK = s.putOK || u == usePut
				return m, nil
			}
			if !errors.Is(err, store.ErrBadVersion) && !errors.Is(err, store.ErrNoNode) && !errors.Is(err, store.ErrDisconnected) {
				return config{}, err
			}
			// Changed meanwhile, or perhaps set with a lost reply: read
			// it again.
			if err := ctx.Err(); err != nil {
				return config{}, err
			}
			continue
		}
		if !errors.Is(err, store.ErrNoNode) {
			return config{}, err
		}
		s.read = false
		if !s.checked {
			if err := q.checkFamily(ctx); err != nil {
				return config{}, err
			}
			s.checked = true
		}
		if want == 0 {
			s.putOK = s.putOK || u == usePut
			return q.opts.config, nil
		}
		c := q.opts.config
		c.fixed = want
		_, err = q.st.Create(ctx, q.config, c.encode(), store.Persistent)
		if err == nil {
			s.cfg, s.read = c, true
			s.putOK = s.putOK || u == usePut
			return q.opts.merge(c)
		}
		if !errors.Is(err, store.ErrNodeExists) && !errors.Is(err, store.ErrDisconnected) {
			return config{}, err
		}
		// Made meanwhile, by another or by us with a lost reply: read it.
		if err := ctx.Err(); err != nil {
			return config{}, err
		}
	}
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
	if s.read && s.cfg.fixed&fieldDelivery != 0 {
		return s.cfg.delivery
	}
	return q.opts.delivery
}
