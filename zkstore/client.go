package zkstore

import (
	"strings"

	"github.com/go-zookeeper/zk"
)

// client is the ZooKeeper client as the Store calls it: with the Store's
// paths, which it moves under the chroot on the way out and back from it
// on the way in, as ZooKeeper's own clients do with a chroot in their
// connect string. Only the requests the Store makes are here, so that a
// new kind of request cannot bypass the chroot unnoticed.
type client struct {
	zk   *zk.Conn
	root string // the chroot, or "" for none
}

// abs returns the server's path of the Store's path p.
func (c *client) abs(p string) string {
	switch {
	case c.root == "":
		return p
	case p == "/":
		return c.root
	}
	return c.root + p
}

// rel returns the Store's path of the server's path p, below the chroot.
func (c *client) rel(p string) string {
	if c.root == "" {
		return p
	}
	if p == c.root {
		return "/"
	}
	return strings.TrimPrefix(p, c.root)
}

func (c *client) SessionID() int64 { return c.zk.SessionID() }

func (c *client) Close() { c.zk.Close() }

func (c *client) AddAuth(scheme string, auth []byte) error { return c.zk.AddAuth(scheme, auth) }

func (c *client) Create(p string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	created, err := c.zk.Create(c.abs(p), data, flags, acl)
	if err != nil {
		return "", err
	}
	return c.rel(created), nil
}

// CreateContainer creates a container node (ZooKeeper 3.5+), which the
// server deletes some time after its last child went.
func (c *client) CreateContainer(p string, data []byte, acl []zk.ACL) error {
	_, err := c.zk.CreateContainer(c.abs(p), data, zk.FlagContainer, acl)
	return err
}

func (c *client) Get(p string) ([]byte, *zk.Stat, error) { return c.zk.Get(c.abs(p)) }

func (c *client) GetW(p string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	return c.zk.GetW(c.abs(p))
}

func (c *client) GetACL(p string) ([]zk.ACL, *zk.Stat, error) { return c.zk.GetACL(c.abs(p)) }

func (c *client) SetACL(p string, acl []zk.ACL, version int32) (*zk.Stat, error) {
	return c.zk.SetACL(c.abs(p), acl, version)
}

func (c *client) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	return c.zk.Set(c.abs(p), data, version)
}

func (c *client) Exists(p string) (bool, *zk.Stat, error) { return c.zk.Exists(c.abs(p)) }

func (c *client) ExistsW(p string) (bool, *zk.Stat, <-chan zk.Event, error) {
	return c.zk.ExistsW(c.abs(p))
}

func (c *client) Children(p string) ([]string, *zk.Stat, error) { return c.zk.Children(c.abs(p)) }

func (c *client) ChildrenW(p string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	return c.zk.ChildrenW(c.abs(p))
}

func (c *client) Delete(p string, version int32) error { return c.zk.Delete(c.abs(p), version) }

func (c *client) Sync(p string) error {
	_, err := c.zk.Sync(c.abs(p))
	return err
}

// CreateIfExists creates the node at p unless the node at guard is
// missing, in one multi request: the check of guard, then the create.
func (c *client) CreateIfExists(guard, p string, data []byte, flags int32, acl []zk.ACL) ([]zk.MultiResponse, error) {
	res, err := c.zk.Multi(
		&zk.CheckVersionRequest{Path: c.abs(guard), Version: -1},
		&zk.CreateRequest{Path: c.abs(p), Data: data, Acl: acl, Flags: flags})
	if len(res) == 2 && res[1].Error == nil {
		res[1].String = c.rel(res[1].String)
	}
	return res, err
}

// CreateMany creates the nodes ps, with data and flags, in one multi
// request: all of them or none. A single node goes as a plain create,
// which is all or none as well: go-zookeeper encodes and decodes a multi
// by reflection, three times the allocations of a queue's one-item put.
func (c *client) CreateMany(ps []string, data [][]byte, flags int32, acl []zk.ACL) ([]zk.MultiResponse, error) {
	if len(ps) == 1 {
		created, err := c.Create(ps[0], data[0], flags, acl)
		return []zk.MultiResponse{{String: created, Error: err}}, err
	}
	ops := make([]any, len(ps))
	for i, p := range ps {
		ops[i] = &zk.CreateRequest{Path: c.abs(p), Data: data[i], Acl: acl, Flags: flags}
	}
	res, err := c.zk.Multi(ops...)
	for i := range res {
		if res[i].Error == nil {
			res[i].String = c.rel(res[i].String)
		}
	}
	return res, err
}
