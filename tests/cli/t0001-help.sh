#!/usr/bin/env bash
# Help teaches every command; unknown commands and flags get a suggestion.
. "$(dirname "$0")/lib.sh"

# every command: the list `ksearch help` prints is the command table of src/main.c (less the
# internal __ ones), and each command's help, asked either way, has a usage line, examples
# and its exit codes
run 0 "$KSEARCH" --help
out_has "exit codes"
commands=$(sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' "$TMP/out")
table=$(sed -n 's/^\tX("\([a-z][a-z-]*\)", cmd_.*/\1/p' src/main.c)
[ "$(echo $commands)" = "$(echo $table)" ] ||
	fail "ksearch --help lists '$(echo $commands)', but src/main.c's table has '$(echo $table)'"
[ "$(echo "$commands" | wc -w)" -ge 12 ] || fail "only $(echo "$commands" | wc -w) commands found in the help"
for cmd in $commands; do
	for how in "help $cmd" "$cmd --help"; do
		# shellcheck disable=SC2086 # $how is two words on purpose
		run 0 "$KSEARCH" $how
		if [ "$cmd" = help ]; then out_has "usage: ksearch <command>"; else out_has "usage: ksearch $cmd"; fi
		out_has "examples:"
		out_has "exit codes:"
	done
done
run 0 "$KSEARCH" compile --help
out_has "--all-params"
out_has "ksearch compile operators/gqa/seeds/"

# a subcommand's help, both ways round (issue 14: `help archive ls` was refused)
for sub in ls show grid stats lineage diff prompts export import verify; do
	run 0 "$KSEARCH" help archive "$sub"
	out_has "usage: ksearch archive $sub"
done
run 2 "$KSEARCH" help archive lss
err_has "did you mean 'ls'?"
run 2 "$KSEARCH" help archive ls extra
err_has "at most one subcommand"

run 2 "$KSEARCH"
err_has "usage: ksearch <command>"
run 2 "$KSEARCH" compiel
err_has "unknown command 'compiel'; did you mean 'compile'?"
run 2 "$KSEARCH" help opz
err_has "did you mean 'ops'?"
run 2 "$KSEARCH" frobnicate
err_has "unknown command 'frobnicate'"
run 2 "$KSEARCH" compile --parm TILE=4 x.cu --op gqa
err_has "unknown option '--parm'; did you mean '--param'?"
run 2 "$KSEARCH" ops --jsn
err_has "did you mean '--json'?"
run 2 "$KSEARCH" compile --op
err_has "option '--op' needs a value"
run 2 "$KSEARCH" ops --json=yes
err_has "takes no value"
done_ok
