#!/bin/bash
# The peer benchmarks on a 16-core benchmark machine (see bundle.sh): servers
# (ZooKeeper's JVM, the etcd server process) on cores SERVER_CPUS (0-3), the
# benchmark's clients on CLIENT_CPUS (4-15). Run from the repository root
# with the bundle carried:
#
#	OUT=$OUT STEPS="zk etcd queue" LIMIT=300 bash .bundle/run.sh
#
# Each step writes $OUT/<step>.txt; profiles and traces go into one
# $OUT/prof.tar, to keep the results to a few files. No step starts after
# LIMIT seconds. ALT names another test binary of the bundle for the
# steps zkalt and etcdalt.
set -u
R=$(pwd); B=/tmp/b; mkdir -p $B
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
[ -x $B/sync.test ] || $R/.bundle/unbundle $R/.bundle/b.tar.zst $B || { echo "unbundle failed"; exit 1; }
echo "unbundled at $(el) s; $(nproc) cores; load $(cat /proc/loadavg)"
command -v taskset >/dev/null || export PATH=$B/tools:$PATH
command -v pgrep >/dev/null || echo "no pgrep: the etcd server is not pinned"
export PATH=$B/bin:$PATH SERVER_CPUS=${SERVER_CPUS:-0-3} ZOOKEEPER_CLASSPATH=$(ls $B/zk/*.jar | tr '\n' ':' | sed 's/:$//')
$B/pin.sh & PIN=$!
LIMIT=${LIMIT:-300}
mkdir -p $OUT/prof
step() { # name timeout binary pkgdir bench env... (EXTRA: more test flags)
	local name=$1 to=$2 bin=$3 dir=$4 bench=$5; shift 5
	if [ $(el) -gt $LIMIT ]; then echo "SKIP $name at $(el) s"; return; fi
	echo "== $name at $(el) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
	(cd $R/$dir && env "$@" timeout $to taskset -c ${CLIENT_CPUS:-4-15} $B/$bin -test.run '^$' -test.bench "$bench" -test.benchtime 1x -test.timeout 20m ${EXTRA:-} > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt)
	grep -E '^round|bench_put|rc=|FAIL|panic' $OUT/$name.txt | tail -40
}
peers() { echo "CORRAL_PEER_ROUNDS=2 CORRAL_PEER_SECONDS=2"; }
for s in ${STEPS:-zk etcd queue}; do case $s in
	zk) step zk 210 sync.test sync LockPeers CORRAL_STORES=zk CORRAL_PEER_N=1,8,32,128,512 $(peers) ;;
	zkalt) step zk-$ALT 210 $ALT sync LockPeers CORRAL_STORES=zk CORRAL_PEER_N=${ALT_N:-8,32,128,512} $(peers) ;;
	etcd) step etcd 210 sync.test sync LockPeers CORRAL_STORES=etcd CORRAL_PEER_N=${ETCD_N:-1,8,128,512} $(peers) ;;
	etcdn1) step etcd-n1 40 sync.test sync LockPeers CORRAL_STORES=etcd CORRAL_PEER_N=1 $(peers) ;;
	etcdalt) step etcd-$ALT 40 $ALT sync LockPeers CORRAL_STORES=etcd CORRAL_PEER_N=${ALT_N:-1} $(peers) ;;
	queue) step queue 150 queue.test queue PutPeers CORRAL_STORES=zk,etcd CORRAL_PUT_ROUNDS=${PUT_ROUNDS:-4} CORRAL_PUT_INFLIGHT=${PUT_INFLIGHT:-} ;;
	profzk) for v in corral zk.Lock; do EXTRA="-test.cpuprofile $OUT/prof/cpu-zk-$v.prof -test.trace $OUT/prof/trace-zk-$v.out" step prof-zk-$v 40 sync.test sync LockPeers CORRAL_STORES=zk CORRAL_PEER_N=8 CORRAL_PEER_ROUNDS=1 CORRAL_PEER_SECONDS=2 CORRAL_PEER_ONLY=$v; done ;;
	profetcd) for v in corral concurrency.Mutex; do EXTRA="-test.cpuprofile $OUT/prof/cpu-etcd-$v.prof" step prof-etcd-$v 40 sync.test sync LockPeers CORRAL_STORES=etcd CORRAL_PEER_N=1 CORRAL_PEER_ROUNDS=1 CORRAL_PEER_SECONDS=3 CORRAL_PEER_ONLY=$v CORRAL_ETCD_CPUPROFILE=$OUT/prof/cpu-etcdsrv-$v.prof; done ;;
esac; done
kill $PIN
if [ -n "$(ls $OUT/prof)" ]; then tar -C $OUT -cf $OUT/prof.tar prof; fi
rm -rf $OUT/prof
echo "done at $(el) s"
