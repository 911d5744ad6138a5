// Package soak holds the soak test of every primitive on a real ZooKeeper
// and a real etcd: sessions that cycle each primitive for a while (seconds
// by default, CORRAL_SOAK=10m for the long run), sampled after a GC for
// the ZooKeeper server's watches (the four-letter word wchs), the live
// nodes, the client's heap and its goroutines, which must stay within a
// constant of the live nodes however many cycles run.
//
// Its etcd runs in a child process (the test binary started again), so
// that the heap measured is the client's alone; ZooKeeper is a Java
// process anyway.
//
// It is test-only, like every package under internal/testing.
package soak
