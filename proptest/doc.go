// Package proptest holds the property tests of corral's primitives: rapid
// state machines that drive each primitive beside a plain model and check
// its invariants after every step, on memstore by default and on any store
// selected through internal/testing/backends.
//
// It has no exported API; run it with
//
//	go test ./proptest/ -rapid.checks=1000
package proptest
