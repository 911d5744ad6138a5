#!/bin/bash
# Pins the etcd server process (this test binary again, running
# TestEtcdServerProcess) to the server cores, every thread, again each
# second (threads started meanwhile by a pinned thread inherit the mask).
while :; do
  for p in $(pgrep -f 'TestEtcdServerProcess'); do
    taskset -a -p -c "$SERVER_CPUS" "$p" >/dev/null 2>&1
  done
  sleep 1
done
