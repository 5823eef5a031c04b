# SPDX-License-Identifier: MIT
# bash completion for fiberctl(1); installed as
# $(PREFIX)/share/bash-completion/completions/fiberctl by `make install`.
#
# Completes the verbs (the same list as `fiberctl --help`: tests/completion.sh checks),
# the global options anywhere on the line, each verb's own options (as its `--help`
# lists them), --state and --missed values, schedule's and pause's words, and asks the
# daemon for plugin names (submit, list --plugin, schedule add, pause plugin), job ids
# (status, wait, result, cancel, logs, retry, discard, --after) and schedule names
# (schedule remove|pause|resume), talking to the socket the line names with -s /
# --user. A daemon that does not answer just completes nothing.

_fiberctl_verbs="ping plugins submit status wait result cancel logs list dead retry discard pause resume reload schedule stats batch top web"
# the job options of submit and schedule add (client/fiberctl-opts.c)
_fiberctl_job_opts="--priority --timeout --class --in --at --retries --backoff --backoff-max --after --key"
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

_fiberctl_schedule_names() {
	_fiberctl_cmd
	"${_fiberctl_run[@]}" schedule list 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_fiberctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local verb="" i w opts=""

	# the verb: the first word that is neither an option nor an option's value
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-s | --socket | -p | --priority | -t | --timeout | -S | --state | --plugin | -n | --limit | --window | -c | --class | -d | --delay | --iterations | \
			--in | --at | --retries | --backoff | --backoff-max | --after | --key | --cron | --tz | --every | --missed | --owner | --assets | --chartjs)
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
		COMPREPLY=($(compgen -W "queued running done failed cancelled scheduled waiting retrying dead" -- "$cur"))
		return
		;;
	--missed)
		COMPREPLY=($(compgen -W "skip run-once" -- "$cur"))
		return
		;;
	--plugin | --clear)
		COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur"))
		return
		;;
	--after)
		COMPREPLY=($(compgen -W "$(_fiberctl_job_ids)" -- "$cur"))
		return
		;;
	-p)
		if [ "$verb" = list ] || [ "$verb" = dead ]; then
			COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur"))
		fi
		return
		;;
	--priority | -t | --timeout | -n | --limit | --window | -c | --class | -d | --delay | --iterations | \
		--in | --at | --retries | --backoff | --backoff-max | --key | --cron | --tz | --every | --owner)
		return
		;;
	esac

	case $verb in
	"")
		COMPREPLY=($(compgen -W "$_fiberctl_verbs $_fiberctl_globals" -- "$cur"))
		return
		;;
	submit) opts="$_fiberctl_job_opts --wait" ;;
	wait) opts="--timeout" ;;
	list) opts="--state --plugin --limit" ;;
	dead) opts="--plugin --limit" ;;
	retry | discard) opts="--all" ;;
	schedule) opts="--cron --tz --every --missed --owner $_fiberctl_job_opts" ;;
	batch) opts="--wait --window --class" ;;
	plugins) opts="--clear" ;;
	stats) opts="--openmetrics --prometheus" ;;
	top) opts="--delay --iterations" ;;
	web) opts="--assets --chartjs" ;;
	logs) opts="--follow" ;;
	reload) opts="--quiet" ;;
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
	status | wait | result | cancel | logs | retry | discard)
		COMPREPLY=($(compgen -W "$(_fiberctl_job_ids)" -- "$cur"))
		;;
	pause | resume | schedule)
		# the words after the verb that are neither options nor their values
		local -a words=()
		for ((i = i + 1; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			--in | --at | --retries | --backoff | --backoff-max | --after | --key | --cron | --tz | --every | --missed | --owner | \
				-p | --priority | -t | --timeout | -c | --class | -s | --socket)
				((i++)) ;;
			-*) ;;
			*) words+=("${COMP_WORDS[i]}") ;;
			esac
		done
		case $verb:${#words[@]}:${words[0]:-} in
		pause:0:* | resume:0:*) COMPREPLY=($(compgen -W "class plugin" -- "$cur")) ;;
		pause:1:plugin | resume:1:plugin) COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur")) ;;
		schedule:0:*) COMPREPLY=($(compgen -W "add list remove pause resume" -- "$cur")) ;;
		schedule:1:remove | schedule:1:pause | schedule:1:resume)
			COMPREPLY=($(compgen -W "$(_fiberctl_schedule_names)" -- "$cur")) ;;
		schedule:2:add) COMPREPLY=($(compgen -W "$(_fiberctl_plugins)" -- "$cur")) ;;
		esac
		;;
	esac
}

complete -F _fiberctl fiberctl
