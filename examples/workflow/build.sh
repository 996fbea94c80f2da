#!/bin/sh
# The build step of docs/workflows.md's worked example: it builds REF
# (here: says so) and writes the artifact's name as its result, which
# the workflow's later steps read as ${steps.build/artifact}.
set -eu
ref=$1
echo "==> compiling $ref"
echo "==> packaging app-$ref.tgz"
printf '{"artifact": "app-%s.tgz"}\n' "$ref" > "$MCPTASK_RESULT"
