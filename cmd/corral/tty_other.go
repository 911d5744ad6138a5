//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package main

import "os"

// noEcho cannot turn echo off here: corral does not prompt for passwords
// on this system.
func noEcho(*os.File) (func(), error) { return nil, errNoTerminal }
