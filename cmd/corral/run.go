package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// errLost says that the lock or leadership a command ran under was lost.
var errLost = errors.New("lost")

// supervise runs argv until it exits or until hold ends, whichever comes
// first. When hold ends (the lock or leadership was lost, or corral was
// interrupted) the command gets SIGTERM and, grace later, SIGKILL.
// supervise returns the command's exit status, and a non-nil error when the
// command could not start or was stopped because hold ended (then wrapping
// context.Cause(hold)).
func supervise(hold context.Context, argv []string, grace time.Duration) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return superviseCmd(hold, cmd, grace)
}

// superviseCmd is supervise of cmd, made but not started.
func superviseCmd(hold context.Context, cmd *exec.Cmd, grace time.Duration) (int, error) {
	argv := cmd.Args
	// Its own process group, so that a signal for the command reaches the
	// processes it starts too, and a Ctrl-C reaches only corral, which then
	// stops the command and cleans up in order.
	// Pdeathsig: a corral killed outright takes its command with it, so a
	// command never outlives the lock it ran under.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		// As shells do: 127 when the command is not found, 126 when it
		// cannot be run.
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return code, &exitError{code: code, err: fmt.Errorf("start %s: %w", argv[0], err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	select {
	case err := <-done:
		return exitStatus(err), nil
	case <-hold.Done():
	}
	signalGroup(cmd.Process.Pid, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case err := <-done:
		return exitStatus(err), context.Cause(hold)
	case <-timer.C:
	}
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	return exitStatus(<-done), context.Cause(hold)
}

func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// exitStatus turns cmd.Wait's error into a shell-style exit status.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return exitFailure
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
