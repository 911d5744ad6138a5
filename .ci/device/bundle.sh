#!/usr/bin/env bash
# Builds the bundle that runs the peer benchmarks on a many-core benchmark
# machine (no Go, no Java, no network there): static test binaries of sync
# and queue, a jlinked JRE, ZooKeeper's jars (every jar of its Class-Path:
# the Class-Path names /usr/share/java, absent there), and a static
# extractor, since that machine may have no zstd. Output: .bundle/ at the
# repository root (ignored by git; copy it to the benchmark machine),
# about 35 MiB.
#
#	.ci/device/bundle.sh [extra.test=./pkg@rev ...]
#
# Then, on the benchmark machine, from the repository root:
#
#	OUT=$OUT bash .bundle/run.sh            # STEPS, LIMIT: see run.sh
#
# Keep the results to a few files in $OUT: run.sh writes one .txt per
# step; put traces and profiles in one tar.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
b=$work/b
mkdir -p "$b/bin" "$b/tools" "$b/zk" "$root/.bundle"

# ZooKeeper: the jar, its Class-Path, and what the harness adds.
cp=$(unzip -p /usr/share/java/zookeeper.jar META-INF/MANIFEST.MF | tr -d '\r' |
	awk '/^Class-Path:/{f=1; sub(/^Class-Path: /,""); printf "%s",$0; next} f&&/^ /{sub(/^ /,""); printf "%s",$0; next} {f=0}')
for j in $cp /usr/share/java/zookeeper.jar /usr/share/java/slf4j-simple.jar /usr/share/java/netty-codec.jar; do
	[ -e "$j" ] && cp -L "$j" "$b/zk/"
done
jlink --add-modules java.base,java.management,java.naming,java.security.jgss,java.security.sasl,java.xml,jdk.unsupported,jdk.management,java.logging \
	--strip-debug --no-header-files --no-man-pages --compress=0 --output "$b/jre"
cat >"$b/bin/java" <<'EOS'
#!/bin/sh
# ZooKeeper's JVM, pinned to the server cores when SERVER_CPUS is set.
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${SERVER_CPUS:-}" ]; then exec taskset -c "$SERVER_CPUS" "$here/jre/bin/java" "$@"; fi
exec "$here/jre/bin/java" "$@"
EOS
chmod +x "$b/bin/java"
cp "$(command -v taskset)" "$b/tools/" # used only where the machine lacks one
cp "$(dirname "$0")/pin.sh" "$b/pin.sh"

# The benchmarks.
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$b/sync.test" ./sync/
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$b/queue.test" ./queue/
for spec in "$@"; do # name.test=./pkg@rev: another build to compare
	name=${spec%%=*} pkgrev=${spec#*=}
	git worktree add -q --detach "$work/wt-$name" "${pkgrev#*@}"
	(cd "$work/wt-$name" && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$b/$name" "${pkgrev%@*}")
	git worktree remove --force "$work/wt-$name"
done

# The extractor, built outside the module (klauspost/compress is no
# dependency of corral's).
mkdir -p "$work/unbundle"
cp "$(dirname "$0")/unbundle.go.txt" "$work/unbundle/main.go"
(cd "$work/unbundle" && go mod init unbundle >/dev/null 2>&1 && go get github.com/klauspost/compress@v1.18.7 >/dev/null 2>&1 &&
	CGO_ENABLED=0 go build -ldflags='-s -w' -o "$root/.bundle/unbundle" .)
tar -C "$b" -cf - . | zstd -q -19 --long=27 -T2 -o "$root/.bundle/b.tar.zst" -f
cp "$(dirname "$0")/run.sh" "$root/.bundle/run.sh"
du -sh "$root/.bundle"
