#!/usr/bin/env bash
# Help teaches every command; unknown commands and flags get a suggestion.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" --help
for cmd in evolve compile ops doctor version help; do out_has "  $cmd "; done
out_has "exit codes"

for cmd in evolve compile ops doctor version sanitize; do
	run 0 "$KSEARCH" help "$cmd"
	out_has "usage: ksearch $cmd"
	out_has "examples:"
	out_has "exit codes:"
	run 0 "$KSEARCH" "$cmd" --help
	out_has "usage: ksearch $cmd"
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
