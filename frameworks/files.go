package frameworks

import (
	"io/fs"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// File is a file a framework puts, read-only, into the filesystem of every replica of a
// gang: an MPI hostfile, a host discovery script.
type File struct {
	// Name is the file's name in the provider's FilesDir, without directories.
	Name string
	// Content is the whole file.
	Content string
	// Mode is the file's permission bits (0o444 for data, 0o555 for a script).
	Mode fs.FileMode
}

// FileProvider is implemented by the frameworks whose launchers read files, not only
// variables (mpirun's default hostfile, horovodrun's host discovery script). Backends
// put the files where the replicas find them:
//
//   - Kubernetes: one ConfigMap per gang, owned by the gang's Service (deleted with it),
//     mounted read-only at FilesDir in every pod, each file with its Mode.
//   - local: under the gang's state directory (a replica cannot be given /etc), at
//     <state dir>/<gang>/files/<FilesDir without its leading slash>; the local
//     Endpoints implement FileDirs, so the variables that name a file name that copy.
type FileProvider interface {
	// FilesDir is the absolute directory the files belong in on a pod, e.g. /etc/mpi.
	FilesDir() string
	// Files returns the gang's files, the same for every replica, in a stable order.
	Files(g backend.GangSpec, ep Endpoints) []File
}

// FileDirs is implemented by the Endpoints of a backend that cannot put a
// FileProvider's files at FilesDir itself: FilesDir returns the directory the
// replicas find them in instead. Endpoints without it mean the files are at FilesDir,
// as on Kubernetes.
type FileDirs interface {
	FilesDir(dir string) string
}

// FilesFor returns the files of gang g under its framework and the directory, as
// replicas see it, that the backend must put them in; nil files when the framework
// has none. It fails for an unknown framework.
func FilesFor(g backend.GangSpec, ep Endpoints) (dir string, files []File, err error) {
	fw, err := Get(g.Framework)
	if err != nil {
		return "", nil, err
	}
	fp, ok := fw.(FileProvider)
	if !ok {
		return "", nil, nil
	}
	return filesDir(fp, ep), fp.Files(g, ep), nil
}

// filesDir is where replicas find fp's files through ep.
func filesDir(fp FileProvider, ep Endpoints) string {
	if d, ok := ep.(FileDirs); ok {
		return d.FilesDir(fp.FilesDir())
	}
	return fp.FilesDir()
}

// slotHost is one line of a hostfile: a host and the processes it runs.
type slotHost struct {
	host  string
	slots int
}

// hostSlots lists the hosts of nodes in order of first appearance, each once with the
// slots of all the nodes on it summed: Open MPI refuses a hostfile that names a host
// twice, and on the local backend every replica is on 127.0.0.1.
func hostSlots(nodes []backend.ReplicaSpec, ep Endpoints) []slotHost {
	var out []slotHost
	at := map[string]int{}
	for _, n := range nodes {
		h := ep.Host(n.Role, n.Index)
		if i, ok := at[h]; ok {
			out[i].slots += slots(n)
			continue
		}
		at[h] = len(out)
		out = append(out, slotHost{host: h, slots: slots(n)})
	}
	return out
}

// hostfile is the Open MPI (and DeepSpeed) hostfile: "host slots=N" per line.
func hostfile(hosts []slotHost) string {
	var b strings.Builder
	for _, h := range hosts {
		b.WriteString(h.host + " slots=" + strconv.Itoa(h.slots) + "\n")
	}
	return b.String()
}

// SSHLauncher is implemented by the frameworks whose launcher starts processes on the
// other replicas over ssh (mpirun, horovodrun). A backend whose replicas are on
// separate hosts gives each such gang its own key pair, in every replica (see the
// Kubernetes backend); one whose replicas share a host needs none (mpirun starts local
// ranks itself).
type SSHLauncher interface {
	// LaunchesOverSSH reports whether the gang's launcher needs ssh to its peers.
	LaunchesOverSSH() bool
}

// LaunchesOverSSH reports whether framework f's launcher reaches its peers over ssh.
func LaunchesOverSSH(f schemas.Framework) bool {
	fw, err := Get(f)
	if err != nil {
		return false
	}
	s, ok := fw.(SSHLauncher)
	return ok && s.LaunchesOverSSH()
}
