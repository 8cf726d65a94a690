# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_db_branch_global_optspecs
    string join \n config= json y/yes q/quiet host= h/help V/version
end

function __fish_db_branch_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_db_branch_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_db_branch_using_subcommand
    set -l cmd (__fish_db_branch_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c db-branch -n "__fish_db_branch_needs_command" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_needs_command" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_needs_command" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_needs_command" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_needs_command" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_needs_command" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_needs_command" -s V -l version -d 'Print version'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "init" -d 'Prepare this host: the storage pool (embedded image or btrfs.path) and the units'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "baseline" -d 'Manage baselines: read-only generations that branches are cloned from'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "create" -d 'Create a branch (idempotent: an existing branch is started and reported)'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "reset" -d 'Throw away a branch\'s changes: SIGKILL, roll back to its clean snapshot, start'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "delete" -d 'Delete a branch and its data (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "start" -d 'Start a stopped branch\'s server'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "stop" -d 'Stop a branch\'s server gracefully; its data is kept'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "list" -d 'List branches with state, port, baseline, disk and memory use'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "status" -d 'Show one branch in detail'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "env" -d 'Print a branch\'s connection details'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "exec" -d 'Run a command with a branch\'s connection variables (those of `env`) set; exits with the command\'s exit code'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "shell" -d 'Open the server\'s own client (mysql or mariadb) on a branch; its password goes in a private option file, never on the command line'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "doctor" -d 'Check this host (root, tools, server, service manager, pool, memory, ports) and find what crashes left behind; --repair removes it'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "stop-idle" -d 'Stop the servers of branches idle for a while; their data is kept'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "gc" -d 'Delete expired branches (and, with selectors, old or idle ones); never protected ones'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "extend" -d 'Set a branch\'s expiry anew'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "protect" -d 'Protect a branch from delete (without --force) and gc'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "unprotect" -d 'Remove a branch\'s protection'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "migrate-check" -d 'Run migrations on a full-size branch and report what each statement costs'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "bake" -d 'Build a new baseline generation from a live server, a SQL dump or a datadir'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "pool" -d 'Pools of pristine branches that parallel test workers claim in milliseconds'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "checkpoint" -d 'Take a read-only snapshot of a branch to reset to (`reset NAME --to TAG`); `checkpoint delete NAME TAG` removes one'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "checkpoints" -d 'List a branch\'s checkpoints with their age and own disk use'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "trash" -d 'List deleted branches kept for `restore` (lifecycle.keep_deleted); `trash purge` destroys them for good'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "restore" -d 'Bring a deleted branch back from the trash: its data, checkpoints, password and (when free) port, so its connection string is the same; then start it'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "metrics" -d 'Print the host\'s figures in the Prometheus text format (branches by state, owner and pool; memory the guard counts; pool slots; the trash; baselines; create, reset and claim latency; gc\'s and stop-idle\'s last runs), write them for node_exporter\'s textfile collector, or serve them to Prometheus'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "diff" -d 'Compare two branches, checkpoints or generations: schema (tables, columns, indexes, foreign keys, views, routines, triggers, events), with --data row counts and checksums; exit 1 when they differ'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "daemon" -d 'Serve io.dbbranch.Manager1 on the system bus for users without root (what db-branchd.service runs; see docs/security.md)'
complete -c db-branch -n "__fish_db_branch_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -l enable-timers -d 'Also enable and start the stop-idle and gc timers (systemd)'
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand init" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "create" -d 'Build a new baseline generation'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "list" -d 'List baseline generations and how many branches use each'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "prune" -d 'Remove generations no branch uses (the newest is always kept)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "push" -d 'Send a generation (default: the newest) to another host or a stream directory, as an increment on the newest generation both hold, else in full'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "pull" -d 'Fetch a generation (default: the newest there) from another host or a stream directory, as an increment on what this host holds, else in full'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "receive" -d 'Take a generation\'s stream on stdin and keep it once verified (what `push` runs on the far side)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "send" -d 'Write a generation\'s stream to stdout (what `pull` runs on the far side)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "follow" -d 'Follow a primary by replication: seed a follower from it at a GTID position (the fastest bake path that applies), then keep it replicating; `baseline cut` makes masked generations of it'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "cut" -d 'The follower\'s data now as the next generation: its applier paused for a snapshot, then recovered, masked and sealed off the critical path'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "follower" -d 'Show what is followed: the follower\'s replication threads, lag, position and last error, and the last cut'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "unfollow" -d 'Stop following and destroy the follower (generations already cut stay; asks first)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and not __fish_seen_subcommand_from create list prune push pull receive send follow cut follower unfollow help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l from-datadir -d 'Copy a datadir that was shut down cleanly' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l from-branch -d 'Promote a branch: its data as the next generation, without a copy (its server is stopped cleanly for the snapshot and started again); --sql runs on the copy only' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l sql -d 'SQL file to run before the baseline is frozen (seed data, masking); repeatable' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l empty -d 'Start from the server\'s own initialiser (an empty server)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from list" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from list" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from list" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from list" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from prune" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from prune" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from prune" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from prune" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from prune" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -l as-files -d 'Send a file-level copy of its datadir (compressed) instead of a send stream: for a stream directory that hosts of the other backend pull from (a push to a host of the other backend does this by itself)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from push" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from pull" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from pull" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from pull" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from pull" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from pull" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from pull" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -l probe -d 'Only say which stream format this host\'s pool receives'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from receive" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -l parent -d 'Send it as an increment on this generation' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -l as-files -d 'Send a file-level copy'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from send" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l name -d 'The follower\'s branch name' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l mask-sql -d 'SQL every cut runs on its copy before sealing it: the place for PII masking. Read now and kept (cuts run what it held then); given again, the new text is kept' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l every -d 'Also cut on a timer this often, e.g. 6h (systemd; without it run `baseline cut` from cron). Given again, only the schedule changes' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l jobs -d 'Parallel readers of the seed\'s bake [default: the number of CPUs]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l password-file -d 'Read the source\'s password from this file (its first line) instead of the URL; `MYSQL_PWD` works too' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l no-mask -d 'Cuts run no masking SQL: the source holds nothing to mask'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -s p -l password -d 'Ask for the source\'s password on the terminal'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follow" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -l mask-sql -d 'Run this masking SQL instead of the one `baseline follow` was given' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from cut" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follower" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follower" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follower" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follower" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follower" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from follower" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from unfollow" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from unfollow" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from unfollow" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from unfollow" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from unfollow" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from unfollow" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "create" -d 'Build a new baseline generation'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "list" -d 'List baseline generations and how many branches use each'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Remove generations no branch uses (the newest is always kept)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "push" -d 'Send a generation (default: the newest) to another host or a stream directory, as an increment on the newest generation both hold, else in full'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "pull" -d 'Fetch a generation (default: the newest there) from another host or a stream directory, as an increment on what this host holds, else in full'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "receive" -d 'Take a generation\'s stream on stdin and keep it once verified (what `push` runs on the far side)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "send" -d 'Write a generation\'s stream to stdout (what `pull` runs on the far side)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "follow" -d 'Follow a primary by replication: seed a follower from it at a GTID position (the fastest bake path that applies), then keep it replicating; `baseline cut` makes masked generations of it'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "cut" -d 'The follower\'s data now as the next generation: its applier paused for a snapshot, then recovered, masked and sealed off the critical path'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "follower" -d 'Show what is followed: the follower\'s replication threads, lag, position and last error, and the last cut'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "unfollow" -d 'Stop following and destroy the follower (generations already cut stay; asks first)'
complete -c db-branch -n "__fish_db_branch_using_subcommand baseline; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l baseline -d 'Baseline generation to clone [default: the newest]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l buffer-pool -d 'InnoDB buffer pool for this branch [default: mysqld.buffer_pool]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l ttl -d 'Expire this long from now (gc deletes expired branches), e.g. 7d' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l expires-at -d 'Expire at this time (UTC), e.g. 2026-12-24T18:00:00Z' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l label -d 'A label, e.g. pr=123 (repeatable)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l owner -d 'Owner [default: the invoking user, the sudo caller under sudo]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l profile -d 'Server profile [default: mysqld.profile]: test (fast) or durable (crash-safe)' -r -f -a "test\t'Fast: skips what only protects against a host crash (reset returns to a clean snapshot anyway). A server that dies uncleanly should be reset, not started'
durable\t'The engine\'s crash-safe defaults'"
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l from -d 'Make it from another branch as it is now (BRANCH), or from one of its checkpoints (BRANCH@TAG), instead of a baseline. A running source keeps serving: the copy is crash-consistent and the new branch starts with InnoDB crash recovery' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l database -d 'The application database clients are pointed at (DATABASE_URL\'s path, DB_DATABASE) [default: client.database, else the baseline\'s only database]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l clean -d 'With --from: stop the source briefly for a clean copy (no crash recovery), then start it again'
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand create" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l ttl -d 'Also set the expiry to this long from now (keeps the old one otherwise)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l to -d 'Back to this checkpoint (see `checkpoints NAME`) instead of the branch\'s start' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l keep -d 'Keep the state being thrown away as checkpoint `before-reset-N` (for lifecycle.keep_deleted; `reset NAME --to before-reset-N` brings it back) [default: lifecycle.keep_before_reset]'
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l no-keep -d 'Do not keep it, whatever lifecycle.keep_before_reset says'
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand reset" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -l force -d 'Delete even a protected branch'
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand delete" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand start" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand start" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand start" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand start" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand start" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand start" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand stop" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand stop" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -l label -d 'Only branches with this label (repeatable: all must match)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -l tree -d 'Show lineage: each baseline generation with the branches made from it, and the branches made from those'
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand list" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand status" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand status" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand status" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand status" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand status" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand status" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -l format -r -f -a "shell\t'`export KEY=value` lines for `eval "$(db-branch env NAME)"` or `source`'
dotenv\t'KEY=value lines for a CI step\'s env file or a .env file'
json\t'A JSON object'
url\t'Just the mysql:// URL'
jdbc\t'A Connector/J URL (jdbc:mysql://…, user and password as properties)'
go\t'A go-sql-driver/mysql DSN for database/sql (user:pass@tcp(host:port)/db)'
mycnf\t'An option file for the mysql/mariadb clients (--defaults-file); MySQL 8+\'s client ignores MYSQL_PWD'
laravel\t'A Laravel .env block (DB_CONNECTION, DB_HOST, … DB_PASSWORD)'
rails\t'DATABASE_URL as Rails reads it (mysql2://…)'
sqlalchemy\t'An SQLAlchemy URL for PyMySQL (mysql+pymysql://…)'"
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand env" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c db-branch -n "__fish_db_branch_using_subcommand exec" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand exec" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand exec" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand exec" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand exec" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand exec" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand shell" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand shell" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand shell" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand shell" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand shell" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand shell" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -l repair -d 'Remove orphans: half-made branches, snapshots or servers without a record, records without storage, stale memory reservations and unfinished baselines'
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -l idle-for -d 'Idle threshold [default: lifecycle.stop_idle_after]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -l dry-run -d 'Say what would be stopped, stop nothing'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand stop-idle" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l older-than -d 'Also delete branches created longer ago than this' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l idle-for -d 'Also delete branches without client activity for this long' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l label -d 'Only branches with this label (repeatable: all must match)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l dry-run -d 'Say what would be deleted, delete nothing'
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand gc" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -l ttl -d 'Expire this long from now (gc deletes expired branches), e.g. 7d' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -l expires-at -d 'Expire at this time (UTC), e.g. 2026-12-24T18:00:00Z' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand extend" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -l for -d 'Protection lapses after this long [default: until unprotect]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand protect" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand unprotect" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand unprotect" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand unprotect" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand unprotect" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand unprotect" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand unprotect" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l branch -d 'Use this branch: created (and deleted afterwards unless --keep) if it does not exist, reset first if it does (and then kept) [default: a throw-away branch]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l baseline -d 'Baseline generation for a branch made for the check [default: the newest]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l max-statement -d 'Fail when a statement runs longer than this, e.g. 5s' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l max-lock -d 'Fail when a statement holds or waits for table locks longer than this' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l format -r -f -a "table\t'A table for people'
json\t'JSON for scripts (same as --json)'
markdown\t'Markdown, ready to paste into a pull-request comment'"
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l keep -d 'Keep the branch afterwards'
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand migrate-check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l from -d 'mysql://user:pass@host:port (a running server), file:PATH (a SQL dump, plain, .gz or .zst) or datadir:PATH (a cleanly shut down datadir)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l databases -d 'Only these databases (comma-separated) [default: every user database]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l mask-sql -d 'SQL run against the baked copy before it is frozen: the place for PII masking' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l jobs -d 'Parallel readers and index builders [default: the number of CPUs]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l via -d 'How rows come from a mysql:// source: clone (MySQL\'s CLONE INSTANCE), tablespace (its table files, on this host) or logical (parallel row copy) [default: the fastest that applies, said in the summary]' -r -f -a "clone\t'MySQL\'s CLONE INSTANCE: the whole instance at disk speed (same MySQL version, clone plugin on the source)'
tablespace\t'The source\'s table files, exported and imported (its datadir on this host)'
logical\t'Rows read in parallel over primary-key ranges, indexes built afterwards'"
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l password-file -d 'Read the mysql:// source\'s password from this file (its first line) instead of the URL, where `ps` would show it; `MYSQL_PWD` works too' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l into -d 'The database a single-database dump (one with no `CREATE DATABASE`/`USE`, as `mysqldump DB > file` writes) is loaded into (file: sources)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l verify -d 'Compare every table with the source (CHECKSUM TABLE, or row counts) and fail on a difference (mysql:// sources)'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l logical -d 'Copy rows even when the server\'s table files could be imported (mysql:// sources); the same as --via logical'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l with-users -d 'Keep the source\'s accounts and their grants in the baseline [default: none are carried; branches have their own]'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -s p -l password -d 'Ask for the mysql:// source\'s password on the terminal (like `mysql -p`)'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand bake" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "create" -d 'Make a pool of ready branches (idempotent; slots the memory guard refuses are reported)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "list" -d 'List pools: slots ready, claimed and being recycled'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "status" -d 'Show a pool\'s slots and who holds the claimed ones'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "resize" -d 'Change a pool\'s number of slots'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "delete" -d 'Delete a pool and every slot, claimed ones too (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "claim" -d 'Claim a pristine slot and print its connection details; it is yours until you release it or the claiming process exits'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "release" -d 'Give a claimed slot back: it is reset in the background and ready again'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "run" -d 'Claim a slot, run COMMAND with its connection details in the environment, release it; exits with COMMAND\'s status'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "recycle" -d 'Run a pool\'s recycler (started by the other pool commands when none runs)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and not __fish_seen_subcommand_from create list status resize delete claim release run recycle help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l size -d 'Number of slots' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l baseline -d 'Baseline generation of every slot [default: the newest when each slot is made]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l buffer-pool -d 'InnoDB buffer pool of each slot [default: mysqld.buffer_pool]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l profile -d 'test (fast, the default) or durable' -r -f -a "test\t'Fast: skips what only protects against a host crash (reset returns to a clean snapshot anyway). A server that dies uncleanly should be reset, not started'
durable\t'The engine\'s crash-safe defaults'"
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l per-server -d 'Slots per server of a dense pool [default: 16]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l dense -d 'Dense slots: each a copy of the generation\'s application database, with an account of its own, inside servers shared by --per-server slots (branches NAME-s1, NAME-s2, …)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from list" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from list" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from list" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from list" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from status" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from status" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from status" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from status" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from status" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -l size -d 'The new number of slots' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from resize" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from delete" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from delete" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from delete" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from delete" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from delete" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -l wait -d 'Wait this long for a slot when none is ready [default: do not wait; exit 75]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -l pid -d 'The process whose exit ends the claim [default: the one that ran this command]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -l format -d 'How to print the connection details' -r -f -a "shell\t'`export KEY=value` lines for `eval "$(db-branch env NAME)"` or `source`'
dotenv\t'KEY=value lines for a CI step\'s env file or a .env file'
json\t'A JSON object'
url\t'Just the mysql:// URL'
jdbc\t'A Connector/J URL (jdbc:mysql://…, user and password as properties)'
go\t'A go-sql-driver/mysql DSN for database/sql (user:pass@tcp(host:port)/db)'
mycnf\t'An option file for the mysql/mariadb clients (--defaults-file); MySQL 8+\'s client ignores MYSQL_PWD'
laravel\t'A Laravel .env block (DB_CONNECTION, DB_HOST, … DB_PASSWORD)'
rails\t'DATABASE_URL as Rails reads it (mysql2://…)'
sqlalchemy\t'An SQLAlchemy URL for PyMySQL (mysql+pymysql://…)'"
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from claim" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from release" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from release" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from release" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from release" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from release" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from release" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -l wait -d 'Wait this long for a slot when none is ready [default: do not wait; exit 75]' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from recycle" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from recycle" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from recycle" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from recycle" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from recycle" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from recycle" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "create" -d 'Make a pool of ready branches (idempotent; slots the memory guard refuses are reported)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "list" -d 'List pools: slots ready, claimed and being recycled'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show a pool\'s slots and who holds the claimed ones'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "resize" -d 'Change a pool\'s number of slots'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete a pool and every slot, claimed ones too (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "claim" -d 'Claim a pristine slot and print its connection details; it is yours until you release it or the claiming process exits'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "release" -d 'Give a claimed slot back: it is reset in the background and ready again'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "run" -d 'Claim a slot, run COMMAND with its connection details in the environment, release it; exits with COMMAND\'s status'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "recycle" -d 'Run a pool\'s recycler (started by the other pool commands when none runs)'
complete -c db-branch -n "__fish_db_branch_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -l clean -d 'Stop the server briefly for a clean snapshot (a reset to it needs no crash recovery), then start it again [default: crash-consistent, no downtime]'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -a "delete" -d 'Delete a checkpoint'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and not __fish_seen_subcommand_from delete help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from delete" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from delete" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from delete" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from delete" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from delete" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete a checkpoint'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoint; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoints" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoints" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoints" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoints" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoints" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand checkpoints" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -f -a "purge" -d 'Destroy trash entries for good (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and not __fish_seen_subcommand_from purge help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -l all -d 'Every entry (an admin\'s: all of them; a user\'s: all of theirs)'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from purge" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from help" -f -a "purge" -d 'Destroy trash entries for good (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_using_subcommand trash; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -l as -d 'Restore it under this name instead (the old one is taken, or both are wanted)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand restore" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -l listen -d 'Serve the figures over HTTP at /metrics on ADDR until stopped, for Prometheus to scrape (without ADDR: `metrics.listen`, loopback by default); root only' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -l textfile -d 'Write them to PATH (a `.prom` file in node_exporter\'s textfile directory), replacing it whole so the collector never reads half of it; root only' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -l data -d 'Also compare every table\'s row count and checksum'
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand diff" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand completions" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand completions" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand completions" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand completions" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand completions" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand completions" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand daemon" -l config -d 'Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]' -r -F
complete -c db-branch -n "__fish_db_branch_using_subcommand daemon" -l host -d 'Run the command on another host over ssh, with the same output and exit code (its db-branch runs as fleet.remote_command; paths in arguments are that host\'s)' -r
complete -c db-branch -n "__fish_db_branch_using_subcommand daemon" -l json -d 'Print results as JSON on stdout'
complete -c db-branch -n "__fish_db_branch_using_subcommand daemon" -s y -l yes -d 'Do not ask for confirmation before destroying data'
complete -c db-branch -n "__fish_db_branch_using_subcommand daemon" -s q -l quiet -d 'Print only errors and requested data'
complete -c db-branch -n "__fish_db_branch_using_subcommand daemon" -s h -l help -d 'Print help'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "init" -d 'Prepare this host: the storage pool (embedded image or btrfs.path) and the units'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "baseline" -d 'Manage baselines: read-only generations that branches are cloned from'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "create" -d 'Create a branch (idempotent: an existing branch is started and reported)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "reset" -d 'Throw away a branch\'s changes: SIGKILL, roll back to its clean snapshot, start'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "delete" -d 'Delete a branch and its data (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "start" -d 'Start a stopped branch\'s server'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "stop" -d 'Stop a branch\'s server gracefully; its data is kept'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "list" -d 'List branches with state, port, baseline, disk and memory use'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "status" -d 'Show one branch in detail'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "env" -d 'Print a branch\'s connection details'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "exec" -d 'Run a command with a branch\'s connection variables (those of `env`) set; exits with the command\'s exit code'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "shell" -d 'Open the server\'s own client (mysql or mariadb) on a branch; its password goes in a private option file, never on the command line'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "doctor" -d 'Check this host (root, tools, server, service manager, pool, memory, ports) and find what crashes left behind; --repair removes it'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "stop-idle" -d 'Stop the servers of branches idle for a while; their data is kept'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "gc" -d 'Delete expired branches (and, with selectors, old or idle ones); never protected ones'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "extend" -d 'Set a branch\'s expiry anew'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "protect" -d 'Protect a branch from delete (without --force) and gc'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "unprotect" -d 'Remove a branch\'s protection'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "migrate-check" -d 'Run migrations on a full-size branch and report what each statement costs'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "bake" -d 'Build a new baseline generation from a live server, a SQL dump or a datadir'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "pool" -d 'Pools of pristine branches that parallel test workers claim in milliseconds'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "checkpoint" -d 'Take a read-only snapshot of a branch to reset to (`reset NAME --to TAG`); `checkpoint delete NAME TAG` removes one'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "checkpoints" -d 'List a branch\'s checkpoints with their age and own disk use'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "trash" -d 'List deleted branches kept for `restore` (lifecycle.keep_deleted); `trash purge` destroys them for good'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "restore" -d 'Bring a deleted branch back from the trash: its data, checkpoints, password and (when free) port, so its connection string is the same; then start it'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "metrics" -d 'Print the host\'s figures in the Prometheus text format (branches by state, owner and pool; memory the guard counts; pool slots; the trash; baselines; create, reset and claim latency; gc\'s and stop-idle\'s last runs), write them for node_exporter\'s textfile collector, or serve them to Prometheus'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "diff" -d 'Compare two branches, checkpoints or generations: schema (tables, columns, indexes, foreign keys, views, routines, triggers, events), with --data row counts and checksums; exit 1 when they differ'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "completions" -d 'Print a shell completion script'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "daemon" -d 'Serve io.dbbranch.Manager1 on the system bus for users without root (what db-branchd.service runs; see docs/security.md)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and not __fish_seen_subcommand_from init baseline create reset delete start stop list status env exec shell doctor stop-idle gc extend protect unprotect migrate-check bake pool checkpoint checkpoints trash restore metrics diff completions daemon help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "create" -d 'Build a new baseline generation'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "list" -d 'List baseline generations and how many branches use each'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "prune" -d 'Remove generations no branch uses (the newest is always kept)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "push" -d 'Send a generation (default: the newest) to another host or a stream directory, as an increment on the newest generation both hold, else in full'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "pull" -d 'Fetch a generation (default: the newest there) from another host or a stream directory, as an increment on what this host holds, else in full'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "receive" -d 'Take a generation\'s stream on stdin and keep it once verified (what `push` runs on the far side)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "send" -d 'Write a generation\'s stream to stdout (what `pull` runs on the far side)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "follow" -d 'Follow a primary by replication: seed a follower from it at a GTID position (the fastest bake path that applies), then keep it replicating; `baseline cut` makes masked generations of it'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "cut" -d 'The follower\'s data now as the next generation: its applier paused for a snapshot, then recovered, masked and sealed off the critical path'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "follower" -d 'Show what is followed: the follower\'s replication threads, lag, position and last error, and the last cut'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from baseline" -f -a "unfollow" -d 'Stop following and destroy the follower (generations already cut stay; asks first)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "create" -d 'Make a pool of ready branches (idempotent; slots the memory guard refuses are reported)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "list" -d 'List pools: slots ready, claimed and being recycled'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "status" -d 'Show a pool\'s slots and who holds the claimed ones'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "resize" -d 'Change a pool\'s number of slots'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "delete" -d 'Delete a pool and every slot, claimed ones too (asks first; --yes without a terminal)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "claim" -d 'Claim a pristine slot and print its connection details; it is yours until you release it or the claiming process exits'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "release" -d 'Give a claimed slot back: it is reset in the background and ready again'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "run" -d 'Claim a slot, run COMMAND with its connection details in the environment, release it; exits with COMMAND\'s status'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "recycle" -d 'Run a pool\'s recycler (started by the other pool commands when none runs)'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from checkpoint" -f -a "delete" -d 'Delete a checkpoint'
complete -c db-branch -n "__fish_db_branch_using_subcommand help; and __fish_seen_subcommand_from trash" -f -a "purge" -d 'Destroy trash entries for good (asks first; --yes without a terminal)'
