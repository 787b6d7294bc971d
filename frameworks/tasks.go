package frameworks

import (
	"github.com/opendlc/opendlc/backend"
)

// Commander is implemented by the frameworks that run a replica's command other than
// as written: Slurm starts one process per task, as srun would.
type Commander interface {
	// Command returns the argv the backend runs for replica r of gang g.
	Command(g backend.GangSpec, r backend.ReplicaSpec) []string
}

// CommandFor returns the argv the backend runs for replica r of gang g: r.Command,
// unless g's framework is a Commander. Backends call it instead of reading r.Command.
func CommandFor(g backend.GangSpec, r backend.ReplicaSpec) []string {
	fw, err := Get(g.Framework)
	if err != nil {
		return r.Command
	}
	if c, ok := fw.(Commander); ok {
		return c.Command(g, r)
	}
	return r.Command
}

// TaskFanout is the POSIX sh program that runs its arguments once per task of the
// node, as srun does: SLURM_NTASKS_PER_NODE processes, process i with SLURM_LOCALID=i
// and SLURM_PROCID = the node's first task + i, all in the replica's environment
// otherwise. It waits for every process and exits with the last failing status (0 when
// all succeed); SIGTERM or SIGINT is passed on to every process, so stopping the
// replica stops its tasks (a shell that is a container's PID 1 would otherwise ignore
// SIGTERM).
//
// Like srun's step daemon, it relays each task's standard output and error a whole
// line at a time, so that the tasks' lines never interleave within a line on the
// replica's streams even when a program writes a line in pieces (Python run with
// PYTHONUNBUFFERED writes a print's text and its newline separately). Each stream goes
// through a FIFO to its own GNU grep --line-buffered, which writes each line with one
// write and ignores SIGTERM, so a task's last lines (a final checkpoint's) are relayed
// after the signal; where no such grep is found the tasks share the streams directly.
const TaskFanout = `n=${SLURM_NTASKS_PER_NODE:-1}
first=${SLURM_PROCID:-0}
fifos=
if grep -a --line-buffered '' </dev/null >/dev/null 2>&1 || [ $? -eq 1 ]; then
	fifos=$(mktemp -d "${TMPDIR:-/tmp}/dlc-tasks.XXXXXX") || exit 1
fi
relay() { trap '' TERM INT; LC_ALL=C exec grep -a --line-buffered ''; }
pids=
trap 'kill $pids 2>/dev/null' TERM INT
i=0
while [ "$i" -lt "$n" ]; do
	if [ -n "$fifos" ]; then
		mkfifo "$fifos/$i.out" "$fifos/$i.err" || exit 1
		relay <"$fifos/$i.out" &
		relay <"$fifos/$i.err" >&2 &
		SLURM_LOCALID=$i SLURM_PROCID=$((first + i)) "$@" >"$fifos/$i.out" 2>"$fifos/$i.err" &
	else
		SLURM_LOCALID=$i SLURM_PROCID=$((first + i)) "$@" &
	fi
	pids="$pids $!"
	i=$((i + 1))
done
rc=0
for p in $pids; do
	wait "$p" || rc=$?
done
wait
[ -z "$fifos" ] || rm -rf "$fifos"
exit $rc`

// taskFanoutName is $0 of TaskFanout: what ps shows for the replica's shell.
const taskFanoutName = "dlc-tasks"

// fanOut returns argv run once per task with TaskFanout; argv itself when the node
// runs a single task.
func fanOut(tasks int, argv []string) []string {
	if tasks <= 1 {
		return argv
	}
	return append([]string{"/bin/sh", "-c", TaskFanout, taskFanoutName}, argv...)
}
