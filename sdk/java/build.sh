#!/bin/sh
# Builds the Java SDK jar (build/threatview-sdk.jar) with the JDK's javac
# for Java 8 (which Android accepts); no Maven, no Gradle, no dependencies.
set -eu
cd "$(dirname "$0")"
if ! command -v javac >/dev/null 2>&1; then
	echo "build.sh: javac missing; installing Debian's default-jdk-headless" >&2
	if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless >/dev/null
fi
rm -rf build/classes
mkdir -p build/classes
javac --release 8 -Xlint:all -Werror -encoding UTF-8 -d build/classes $(find src -name '*.java' | sort)
rm -f build/threatview-sdk.jar
jar cf build/threatview-sdk.jar -C build/classes .
size=$(wc -c < build/threatview-sdk.jar)
if [ "$size" -gt 102400 ]; then
	echo "build.sh: build/threatview-sdk.jar is $size bytes, over the 100 KB budget" >&2
	exit 1
fi
echo "build/threatview-sdk.jar $size bytes"
