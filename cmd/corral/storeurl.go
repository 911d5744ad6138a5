package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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
}

// parseStoreURL parses zk://h1:p1,h2:p2, etcd://h:p or mem://, with an
// optional ?session=10s.
func parseStoreURL(raw string) (storeURL, error) {
	if raw == "" {
		return storeURL{}, fmt.Errorf("%w: no store: give --store or set CORRAL_STORE (zk://host:port or etcd://host:port)", errUsage)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return storeURL{}, fmt.Errorf("%w: store URL %q: %v", errUsage, raw, err)
	}
	su := storeURL{scheme: u.Scheme}
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
		return storeURL{}, fmt.Errorf("%w: store URL %q: a path (%q) is not supported", errUsage, raw, u.Path)
	}
	q := u.Query()
	for k := range q {
		if k != "session" {
			return storeURL{}, fmt.Errorf("%w: store URL %q: unknown option %q (known: session)", errUsage, raw, k)
		}
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

// open opens one session on the store.
func (su storeURL) open(ctx context.Context) (store.Store, error) {
	switch su.scheme {
	case "zk":
		var opts []zkstore.Option
		if su.session > 0 {
			opts = append(opts, zkstore.WithSessionTimeout(su.session))
		}
		return zkstore.Open(ctx, su.servers, opts...)
	case "etcd":
		var opts []etcdstore.Option
		if su.session > 0 {
			opts = append(opts, etcdstore.WithTTL(su.session))
		}
		return etcdstore.Dial(ctx, clientv3.Config{
			Endpoints:   su.servers,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		}, opts...)
	default:
		return memstore.New(), nil
	}
}
