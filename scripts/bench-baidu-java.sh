#!/usr/bin/env bash
# Baidu's Java CachedUidGenerator, built from its unchanged upstream sources against Debian's
# jars, and measured by benches/java/BaiduBench.java: one line per row, `name IDs/s`, the shape
# scripts/bench-side-by-side.sh reads (it runs this script when BAIDU_UID_SRC is set).
#
#   BAIDU_UID_SRC=/path/to/uid-generator scripts/bench-baidu-java.sh [seconds] [rounds]
#
# BAIDU_UID_SRC is a checkout of https://github.com/baidu/uid-generator (measured at 2fcbc13, its
# last commit): no registry this project may reach serves it, and this repository keeps no copy
# of it. Everything it needs besides comes from Debian's packages (bookworm):
#   apt-get install openjdk-17-jdk-headless libspring-core-java libspring-beans-java \
#     libcommons-lang-java libslf4j-java
# Only the generator's classes are compiled: the worker-node DAO and its assigner need MyBatis and
# a database, so the bench assigns worker id 1 through Baidu's own `WorkerIdAssigner` interface.
set -euo pipefail
cd "$(dirname "$0")/.."

src=${BAIDU_UID_SRC:?set BAIDU_UID_SRC to a checkout of github.com/baidu/uid-generator}
[ -d "$src/src/main/java/com/baidu/fsg/uid" ] || {
  echo "BAIDU_UID_SRC=$src is not a checkout of baidu/uid-generator (no src/main/java/com/baidu/fsg/uid)" >&2
  exit 2
}
jar() { # the first of the named jars that exists
  for candidate in "$@"; do
    [ -f "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "missing: $1 (see the apt-get line at the top of $0)" >&2
  exit 2
}
m2=/usr/share/maven-repo/org/springframework
classpath=$(jar $m2/spring-core/debian/spring-core-debian.jar):$(jar $m2/spring-beans/debian/spring-beans-debian.jar)
classpath=$classpath:$(jar /usr/share/java/commons-lang.jar):$(jar /usr/share/java/slf4j-api.jar)
# slf4j-nop: Baidu's take logs at info below the padding threshold; a bench prints nothing.
classpath=$classpath:$(jar /usr/share/java/slf4j-nop.jar):$(jar /usr/share/java/commons-logging.jar)

out=target/baidu-java
rm -rf "$out" && mkdir -p "$out/classes"
find "$src/src/main/java/com/baidu/fsg/uid" -name '*.java' \
  ! -path '*/worker/dao/*' ! -path '*/worker/entity/*' ! -name DisposableWorkerIdAssigner.java \
  >"$out/sources"
echo "sources" "$(cd "$src" && git rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)')" >&2
javac -nowarn -d "$out/classes" -cp "$classpath" @"$out/sources" benches/java/BaiduBench.java
java -cp "$out/classes:$classpath" BaiduBench "${1:-4}" "${2:-3}"
