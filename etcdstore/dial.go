package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Dial creates a client from cfg and opens a session on it as [Open] does.
// The Store owns that client and closes it in Close.
func Dial(ctx context.Context, cfg clientv3.Config, opts ...Option) (*Store, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: dial: %w", err)
	}
	s, err := open(ctx, cli, o)
	if err != nil {
		cli.Close()
		return nil, err
	}
	s.ownClient = true
	return s, nil
}
