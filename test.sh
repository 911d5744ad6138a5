#!/usr/bin/env bash
# The project's test command (CONTRIBUTING.md, "Tests"): vet, lint, and every
# test under the race detector, on memstore, a real ZooKeeper and a real etcd.
set -euo pipefail
cd "$(dirname "$0")"
# go.mod and go.sum say exactly what the code imports.
go mod tidy -diff
# Every Go file is gofmt's (a README snippet quotes examples as gofmt writes them).
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "test.sh: gofmt would change these files:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
staticcheck ./...
# The library builds where int is 32 bits (its tests need not).
GOARCH=386 go build ./...
# Code that ships never imports the test rigs under internal/testing.
if go list -f '{{.ImportPath}}: {{join .Deps " "}}' $(go list ./... | grep -v /internal/testing/) | grep /internal/testing/; then
	echo "test.sh: the packages above import internal/testing outside their tests" >&2
	exit 1
fi
go test -race -count=1 -parallel 40 -timeout 15m ./...
