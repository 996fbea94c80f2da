#!/bin/sh
# deploy.sh SERVICE VERSION [STEPS]: "deploys" SERVICE at VERSION after
# asking the user to confirm, through mcptask's input line protocol: a
# line "::mcptask-input:: {elicitation params}" on standard output makes
# the task input_required, and the answer comes back on standard input as
# one JSON line, {"action":"accept","content":{"confirm":true}}.
# The outcome is written to $MCPTASK_RESULT as JSON (structured content).
set -eu
service=$1 version=$2 steps=${3:-3}

json_escape() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
s=$(json_escape "$service") v=$(json_escape "$version")

echo "==> preparing $service $version"
printf '::mcptask-input:: {"message": "Deploy %s %s to production?", "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean", "description": "Deploy now"}}, "required": ["confirm"]}}\n' "$s" "$v"
IFS= read -r answer || answer=''

case $answer in
*'"action":"accept"'*'"confirm":true'*) ;;
*)
	echo "==> not deployed: $answer"
	[ -n "${MCPTASK_RESULT:-}" ] && printf '{"service": "%s", "version": "%s", "deployed": false}\n' "$s" "$v" > "$MCPTASK_RESULT"
	exit 0
	;;
esac

i=1
while [ "$i" -le "$steps" ]; do
	echo "==> rolling out $service $version: step $i of $steps"
	i=$((i + 1))
done
echo "==> deployed $service $version"
[ -n "${MCPTASK_RESULT:-}" ] && printf '{"service": "%s", "version": "%s", "deployed": true}\n' "$s" "$v" > "$MCPTASK_RESULT"
exit 0
