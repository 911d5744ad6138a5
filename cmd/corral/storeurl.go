package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// errUsage marks errors in what the user typed; they exit with exitUsage.
var errUsage = errors.New("usage")

// storeURL is a parsed --store value.
type storeURL struct {
	scheme  string   // "zk", "etcd" or "mem"
	servers []string // host:port
	session time.Duration
	chroot  string // "" for none
	user    string // named before the '@', if any
	tls     bool   // ?tls=true
}

// parseStoreURL parses zk://h1:p1,h2:p2, etcd://h:p or mem://, with an
// optional user@ in front of the servers, a chroot path after them (as in
// a ZooKeeper connect string, host:port/chroot), and the options
// ?session=10s and ?tls=true. A password in the URL is refused: it would
// be visible to every user of the machine.
func parseStoreURL(raw string) (storeURL, error) {
	if raw == "" {
		return storeURL{}, fmt.Errorf("%w: no store: give --store or set CORRAL_STORE (zk://host:port or etcd://host:port)", errUsage)
	}
	if !strings.Contains(raw, "://") {
		// "127.0.0.1:2181" parses as the scheme "127.0.0.1", or not at
		// all: say what a store URL is instead.
		return storeURL{}, fmt.Errorf("%w: store URL %q has no scheme: want zk://HOST:PORT, etcd://HOST:PORT or mem:// (zk://%s, say)", errUsage, raw, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return storeURL{}, fmt.Errorf("%w: store URL %q: %v (want zk://HOST:PORT, etcd://HOST:PORT or mem://)", errUsage, raw, err)
	}
	su := storeURL{scheme: u.Scheme}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			return storeURL{}, fmt.Errorf("%w: store URL %s has a password: it would be visible to every user of the machine; name the user as user@host or with --user and give the password in --password-file, $CORRAL_PASSWORD or at the prompt", errUsage, u.Redacted())
		}
		su.user = u.User.Username()
	}
	switch u.Scheme {
	case "zk", "etcd":
		if u.Host == "" {
			return storeURL{}, fmt.Errorf("%w: store URL %q names no server", errUsage, raw)
		}
		for h := range strings.SplitSeq(u.Host, ",") {
			if h == "" {
				return storeURL{}, fmt.Errorf("%w: store URL %q has an empty server", errUsage, raw)
			}
			su.servers = append(su.servers, h)
		}
	case "mem":
	default:
		return storeURL{}, fmt.Errorf("%w: store URL %q: scheme must be zk://, etcd:// or mem://", errUsage, raw)
	}
	if u.Path != "" && u.Path != "/" {
		if u.Scheme == "mem" {
			return storeURL{}, fmt.Errorf("%w: store URL %q: mem:// takes no path", errUsage, raw)
		}
		if err := store.ValidatePath(u.Path); err != nil {
			return storeURL{}, fmt.Errorf("%w: store URL %q: chroot: %v", errUsage, raw, err)
		}
		su.chroot = u.Path
	}
	if u.Scheme == "mem" && su.user != "" {
		return storeURL{}, fmt.Errorf("%w: store URL %q: mem:// takes no user", errUsage, raw)
	}
	q := u.Query()
	for k := range q {
		if k != "session" && k != "tls" {
			return storeURL{}, fmt.Errorf("%w: store URL %q: unknown option %q (known: session, tls)", errUsage, raw, k)
		}
	}
	if t := q.Get("tls"); t != "" {
		b, err := strconv.ParseBool(t)
		if err != nil {
			return storeURL{}, fmt.Errorf("%w: store URL %q: tls=%q is not true or false", errUsage, raw, t)
		}
		su.tls = b
	}
	if s := q.Get("session"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return storeURL{}, fmt.Errorf("%w: store URL %q: session=%q is not a positive duration", errUsage, raw, s)
		}
		su.session = d
	}
	return su, nil
}

// open opens one session on the store, with creds; a warning about the
// session goes to warn.
func (su storeURL) open(ctx context.Context, creds credentials, warn io.Writer) (store.Store, error) {
	if creds.requireIdentity && su.scheme != "zk" {
		return nil, fmt.Errorf("%w: --require-identity ($CORRAL_REQUIRE_IDENTITY) is for zk:// stores, whose nodes' ACLs name identities; %s:// has none", errUsage, su.scheme)
	}
	switch su.scheme {
	case "zk":
		opts := []zkstore.Option{zkstore.WithLogger(slog.New(identityWarning{w: warn}))}
		if su.session > 0 {
			opts = append(opts, zkstore.WithSessionTimeout(su.session))
		}
		if su.chroot != "" {
			opts = append(opts, zkstore.WithChroot(su.chroot))
		}
		if creds.user != "" {
			opts = append(opts, zkstore.WithDigestAuth(creds.user, creds.password))
		}
		if creds.tls != nil {
			opts = append(opts, zkstore.WithTLS(creds.tls))
		}
		if creds.requireIdentity {
			opts = append(opts, zkstore.WithIdentityRequired())
		}
		st, err := zkstore.Open(ctx, su.servers, opts...)
		switch {
		case errors.Is(err, zkstore.ErrNoIdentity):
			return nil, fmt.Errorf("%w (--require-identity: give --user, or a --cert the server authenticates)", err)
		case err != nil:
			return nil, err
		}
		return st, nil
	case "etcd":
		var opts []etcdstore.Option
		if su.session > 0 {
			opts = append(opts, etcdstore.WithTTL(su.session))
		}
		if su.chroot != "" {
			opts = append(opts, etcdstore.WithChroot(su.chroot))
		}
		cfg := clientv3.Config{
			Endpoints:   su.servers,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
			Username:    creds.user,
			Password:    creds.password,
			TLS:         creds.tls,
		}
		if creds.tls != nil {
			cfg.Endpoints = make([]string, len(su.servers))
			for i, h := range su.servers {
				cfg.Endpoints[i] = "https://" + h
			}
		}
		return etcdstore.Dial(ctx, cfg, opts...)
	default:
		if creds.user != "" || creds.tls != nil {
			return nil, fmt.Errorf("%w: mem:// takes no credentials or TLS", errUsage)
		}
		return memstore.New(), nil
	}
}
