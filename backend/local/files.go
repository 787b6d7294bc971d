package local

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
)

// filesDirName is the directory, in a gang's state directory, that holds the files its
// framework puts into replicas (frameworks.FileProvider): a directory a pod would find
// at /etc/mpi is <gang dir>/files/etc/mpi, since a replica cannot be given /etc.
const filesDirName = "files"

// filesEndpoints are the local endpoints of a gang, which also say where its framework
// files are (frameworks.FileDirs), so the variables that name a file name this copy.
type filesEndpoints struct {
	endpoints
	gangDir string
	// seenAt is where replicas see <gangDir>/files: there, or sandboxFilesDir in the
	// sandbox.
	seenAt string
}

// filesEndpoints are the endpoints of the gang in dir, with its allocated ports.
func (b *Backend) filesEndpoints(dir string, ports map[string]int) filesEndpoints {
	ep := filesEndpoints{endpoints: endpoints(ports), gangDir: dir, seenAt: filepath.Join(dir, filesDirName)}
	if b.sb != nil {
		ep.seenAt = sandboxFilesDir
	}
	return ep
}

// FilesDir maps dir, a directory on a pod, to where the replicas see the gang's copy
// of it.
func (e filesEndpoints) FilesDir(dir string) string {
	return filepath.Join(e.seenAt, filepath.FromSlash(dir))
}

// writeFrameworkFiles writes the gang's framework files with their modes, each
// atomically, before any replica starts, into the gang's files/ directory. The content
// depends on the spec and the allocated ports alone, so a repeated Launch writes the
// same.
func writeFrameworkFiles(spec backend.GangSpec, ep filesEndpoints) error {
	// The plain endpoints name the directory as a pod would see it.
	podDir, files, err := frameworks.FilesFor(spec, ep.endpoints)
	if err != nil || len(files) == 0 {
		return err
	}
	dir := filepath.Join(ep.gangDir, filesDirName, filepath.FromSlash(podDir))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("local: framework files: %w", err)
	}
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		if err := writeFileAtomic(p, []byte(f.Content)); err != nil {
			return fmt.Errorf("local: framework file %s: %w", f.Name, err)
		}
		if err := os.Chmod(p, f.Mode); err != nil {
			return fmt.Errorf("local: framework file %s: %w", f.Name, err)
		}
	}
	return nil
}
