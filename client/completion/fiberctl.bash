# SPDX-License-Identifier: MIT
# bash completion for fiberctl(1); installed as
# $(PREFIX)/share/bash-completion/completions/fiberctl by `make install`.
#
# Completes the verbs (the same list as `fiberctl --help`: tests/completion.sh checks),
# the global options anywhere on the line, each verb's own options (as its `--help`
# lists them), --state values, and asks the daemon for plugin names (submit, list
# --plugin) and job ids (status, wait, result, cancel, logs), talking to the socket the line
# names with -s / --user. A daemon that does not answer just completes nothing.

_fiberctl_verbs="ping plugins submit status wait result cancel logs list stats batch top"
_fiberctl_globals="-s --socket -u --user -j --json -h --help -V --version"

# fiberctl as typed (a path works too), with the line's socket options.
_fiberctl_cmd() {
	local i w
	_fiberctl_run=("${COMP_WORDS[0]}")
	for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-s | --socket) _fiberctl_run+=(--socket "${COMP_WORDS[i + 1]}") ;;
		--socket=*) _fiberctl_run+=("$w") ;;
		-u | --user) _fiberctl_run+=(--user) ;;
		esac
	done
}

_fiberctl_plugins() {
	_fiberctl_cmd
	"${_fiberctl_run[@]}" plugins 2>/dev/null | awk 'NR > 1 && NF == 0 { exit } NR > 1 { print $1 }'
}

_fiberctl_job_ids() {
	_fiberctl_cmd
	"${_fiberctl_run[@]}" list --limit 200 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_fiberctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local verb="" i w opts=""

	# the verb: the first word that is neither an option nor an option's value
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-s | --socket | -p | --priority | -t | --timeout | -S | --state | --plugin | -n | --limit | --window | -c | --class | -d | --delay | --iterations)
			((i++)) ;;
		-*) ;;
		*)
			verb=$w
			break
			;;
		esac
	done

	case $prev in
	-s | --socket)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	-S | --state)
		COMPREPLY=($(compgen -W "queued running done failed cancelled" -- "$cur"))
		return
		;;
	--plugin | --clear)
		COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur"))
		return
		;;
	-p)
		if [ "$verb" = list ]; then
			COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur"))
		fi
		return
		;;
	--priority | -t | --timeout | -n | --limit | --window | -c | --class | -d | --delay | --iterations)
		return
		;;
	esac

	case $verb in
	"")
		COMPREPLY=($(compgen -W "$_fiberctl_verbs $_fiberctl_globals" -- "$cur"))
		return
		;;
	submit) opts="--priority --timeout --class --wait" ;;
	wait) opts="--timeout" ;;
	list) opts="--state --plugin --limit" ;;
	batch) opts="--wait --window --class" ;;
	plugins) opts="--clear" ;;
	stats) opts="--openmetrics --prometheus" ;;
	top) opts="--delay --iterations" ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts $_fiberctl_globals" -- "$cur"))
		return
	fi
	case $verb in
	submit)
		# the plugin is the first word after the verb; KEY=VALUE words follow it
		local n=0
		for ((i = i + 1; i < COMP_CWORD; i++)); do
			[[ ${COMP_WORDS[i]} == -* ]] || ((n++))
		done
		if [ "$n" -eq 0 ]; then
			COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur"))
		fi
		;;
	status | wait | result | cancel | logs)
		COMPREPLY=($(compgen -W "$(_fiberctl_job_ids)" -- "$cur"))
		;;
	esac
}

complete -F _fiberctl fiberctl
