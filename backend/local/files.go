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
}

// FilesDir maps dir, a directory on a pod, to the gang's copy of it.
func (e filesEndpoints) FilesDir(dir string) string {
	return filepath.Join(e.gangDir, filesDirName, filepath.FromSlash(dir))
}

// writeFrameworkFiles writes the gang's framework files with their modes, each
// atomically, before any replica starts. The content depends on the spec and the
// allocated ports alone, so a repeated Launch writes the same.
func writeFrameworkFiles(spec backend.GangSpec, ep filesEndpoints) error {
	dir, files, err := frameworks.FilesFor(spec, ep)
	if err != nil || len(files) == 0 {
		return err
	}
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
