package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStoreURL(t *testing.T) {
	tests := []struct {
		raw  string
		want storeURL
		err  string // in the error; "" for none
	}{
		{raw: "zk://h1:1,h2:2", want: storeURL{scheme: "zk", servers: []string{"h1:1", "h2:2"}}},
		{raw: "zk://h1:1,h2:2/app/locks?session=3s", want: storeURL{scheme: "zk", servers: []string{"h1:1", "h2:2"}, chroot: "/app/locks", session: 3 * time.Second}},
		{raw: "etcd://app@h:2379/app?tls=true", want: storeURL{scheme: "etcd", servers: []string{"h:2379"}, chroot: "/app", user: "app", tls: true}},
		{raw: "zk://h:1/", want: storeURL{scheme: "zk", servers: []string{"h:1"}}},
		{raw: "mem://", want: storeURL{scheme: "mem"}},
		{raw: "etcd://app:secret@h:2379", err: "has a password"},
		{raw: "zk://h:1/app/", err: "chroot"},
		{raw: "zk://h:1?tls=maybe", err: "tls"},
		{raw: "zk://h:1?sesion=1s", err: "unknown option"},
		{raw: "mem:///x", err: "no path"},
		{raw: "mem://u@", err: "no user"},
		{raw: "127.0.0.1:2181", err: "no scheme: want zk://HOST:PORT, etcd://HOST:PORT or mem:// (zk://127.0.0.1:2181, say)"},
		{raw: "localhost:2379", err: "no scheme"},
		{raw: "http://h:1", err: "scheme must be zk://, etcd:// or mem://"},
	}
	for _, tt := range tests {
		got, err := parseStoreURL(tt.raw)
		if tt.err != "" {
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseStoreURL(%q) = %v; want a usage error saying %q", tt.raw, err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("parseStoreURL(%q) = %v: the error shows the password", tt.raw, err)
			}
			continue
		}
		if err != nil || got.scheme != tt.want.scheme || !slices.Equal(got.servers, tt.want.servers) ||
			got.chroot != tt.want.chroot || got.user != tt.want.user || got.tls != tt.want.tls || got.session != tt.want.session {
			t.Errorf("parseStoreURL(%q) = %+v, %v; want %+v", tt.raw, got, err, tt.want)
		}
	}
}
