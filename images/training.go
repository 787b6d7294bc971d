package images

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/opendlc/opendlc/internal/gobuild"
)

// The training image's Debian base, built by mmdebstrap. Changing any of these
// rebuilds the base once (a few minutes: the packages come from the machine's apt
// sources).
const (
	debianSuite = "bookworm"
	// TrainingUser is the non-root variant's user, with its uid and home.
	TrainingUser    = "trainer"
	TrainingUID     = 1000
	trainingHome    = "/home/" + TrainingUser
	trainingWorkdir = "/opt/opendlc"
)

// trainingPackages are the Debian packages of the training image: the frameworks the
// examples run (PyTorch, XGBoost, Open MPI with mpi4py), boto3 for the Python
// library's S3 checkpoints, an ssh server for MPI's launcher, and passwd for the
// non-root user.
var trainingPackages = []string{
	"python3-torch", "python3-xgboost", "openmpi-bin", "python3-mpi4py", "python3-boto3",
	"openssh-server", "openssh-client", "passwd", "procps",
}

// trainingHooks run in the finished base (mmdebstrap --customize-hook; $1 is its root):
// the non-root user, sshd's run directory, and a host key that user can read, so that
// an unprivileged sshd can serve MPI's launcher (mpi-operator's non-root images do the
// same).
var trainingHooks = []string{
	fmt.Sprintf(`chroot "$1" useradd --uid %d --user-group --create-home --shell /bin/bash %s`, TrainingUID, TrainingUser),
	`mkdir -p "$1/run/sshd"`,
	fmt.Sprintf(`chroot "$1" sh -c 'mkdir -p %[1]s/.sshd && ssh-keygen -q -t ed25519 -N "" -f %[1]s/.sshd/host_ed25519_key && chown -R %[2]s:%[2]s %[1]s/.sshd'`, trainingHome, TrainingUser),
}

// TrainingImages are the two variants of the training image.
type TrainingImages struct {
	// Root runs as root (the Debian default, what most framework images do).
	Root Image
	// NonRoot runs as TrainingUser (uid TrainingUID), home trainingHome.
	NonRoot Image
}

// Training builds the training image: the Debian base (cached by its package list and
// hooks) and, on top, a layer with the repository's python/ (the opendlc library, also
// on the interpreter's path) and examples/ under /opt/opendlc, the working directory,
// so the examples' job specs run in it unchanged, and examples/trainer built static as
// TrainerBinary. Both variants are in one tarball.
func Training(ctx context.Context) (TrainingImages, error) {
	root, err := sourceRoot()
	if err != nil {
		return TrainingImages{}, err
	}
	base, err := debianBase(ctx)
	if err != nil {
		return TrainingImages{}, err
	}
	files, appKey, err := appFiles(root)
	if err != nil {
		return TrainingImages{}, err
	}
	trainer, err := trainerBinary(ctx, root)
	if err != nil {
		return TrainingImages{}, err
	}
	files = append(files, file{path: "/usr/local", mode: 0o755, dir: true}, file{path: "/usr/local/bin", mode: 0o755, dir: true},
		file{path: TrainerBinary, mode: 0o755, data: trainer})
	trainerSum := sha256.Sum256(trainer)
	key := hashOf("training/2", base.Ref, appKey, hex.EncodeToString(trainerSum[:]))
	nonRootRef := ref("training-nonroot", key)
	img, err := cached(ctx, "training", key, func(string) ([]tagged, error) {
		baseImg, err := loadTarball(base)
		if err != nil {
			return nil, err
		}
		layer, err := memLayer(files)
		if err != nil {
			return nil, err
		}
		withApp, err := mutate.AppendLayers(baseImg, layer)
		if err != nil {
			return nil, err
		}
		env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
		rootImg, err := withConfig(withApp, v1.Config{Env: env, WorkingDir: trainingWorkdir, Cmd: []string{"/bin/bash"}})
		if err != nil {
			return nil, err
		}
		nonRoot, err := withConfig(withApp, v1.Config{
			Env: append(env, "HOME="+trainingHome), WorkingDir: trainingWorkdir, Cmd: []string{"/bin/bash"},
			User: fmt.Sprintf("%d:%d", TrainingUID, TrainingUID),
		})
		if err != nil {
			return nil, err
		}
		return []tagged{{ref: ref("training", key), img: rootImg}, {ref: nonRootRef, img: nonRoot}}, nil
	})
	if err != nil {
		return TrainingImages{}, err
	}
	return TrainingImages{Root: img, NonRoot: Image{Ref: nonRootRef, Tarball: img.Tarball}}, nil
}

// TrainerBinary is where the training image holds examples/trainer, OpenDLC's example
// Go training program, built static: the examples that run it with `go run
// ./examples/trainer` from a checkout run this binary in a container.
const TrainerBinary = "/usr/local/bin/trainer"

// trainerBinary builds examples/trainer (static, shared with the tests that run it:
// internal/gobuild) and returns its bytes: the image is keyed by their hash. The build
// carries no VCS stamp, so the image changes only with the trainer's code, not with
// every commit.
func trainerBinary(ctx context.Context, root string) ([]byte, error) {
	bin, err := gobuild.Static(ctx, root, "./examples/trainer", gobuild.Options{Target: imageTarget})
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return data, nil
}

func withConfig(img v1.Image, cfg v1.Config) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// sshClientConfig is the ssh client's configuration for MPI's launcher.
// The non-root user reaches its peers' unprivileged sshd (NonRootSSHDConfig) on
// nonRootSSHPort.
const sshClientConfig = `Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
Match localuser ` + TrainingUser + `
    Port 2222
`

// NonRootSSHDConfig is the sshd configuration of the non-root image's MPI workers, run
// as the image's user: `/usr/sbin/sshd -De -f NonRootSSHDConfig`, listening on 2222
// (an unprivileged port) with the host key the image holds for that user, and the
// gang's keys at /home/trainer/.ssh (the job's spec.pod.sshAuthMountPath), as
// mpi-operator's non-root examples run theirs.
const NonRootSSHDConfig = trainingHome + "/.sshd/sshd_config"

const nonRootSSHD = `Port 2222
HostKey ` + trainingHome + `/.sshd/host_ed25519_key
PidFile ` + trainingHome + `/.sshd/sshd.pid
AuthorizedKeysFile ` + trainingHome + `/.ssh/authorized_keys
StrictModes no
UsePAM no
`

// sshdConfig is the ssh server's configuration for MPI's workers.
const sshdConfig = "StrictModes no\n"

// appFiles lists the repository files of the training image's top layer and their hash:
// python/opendlc and examples/ (Python, YAML and shell files), and a .pth file that puts
// /opt/opendlc/python on the interpreter's path.
func appFiles(root string) ([]file, string, error) {
	keep := func(rel string) bool {
		switch path.Ext(rel) {
		case ".py", ".yaml", ".yml", ".sh", ".txt", ".json", ".typed":
			return !strings.HasSuffix(rel, "_test.go")
		}
		return false
	}
	files := []file{
		{path: "/opt", mode: 0o755, dir: true},
		{path: trainingWorkdir, mode: 0o755, dir: true},
		{path: "/usr/lib/python3/dist-packages/opendlc-source.pth", mode: 0o644, data: []byte(trainingWorkdir + "/python\n")},
		// MPI's launcher reaches its workers over ssh by their pod names, which change with
		// every gang: no host keys to check (mpi-operator's base images say the same).
		{path: "/etc/ssh/ssh_config.d/opendlc-mpi.conf", mode: 0o644, data: []byte(sshClientConfig)},
		// The gang's key pair is a Secret volume, whose directory is group- and
		// world-writable: sshd's StrictModes would refuse it (mpi-operator's base image
		// turns StrictModes off for the same reason).
		{path: "/etc/ssh/sshd_config.d/opendlc-mpi.conf", mode: 0o644, data: []byte(sshdConfig)},
		{path: NonRootSSHDConfig, mode: 0o600, data: []byte(nonRootSSHD), uid: TrainingUID},
		// sshd's privilege separation directory (mmdebstrap leaves /run empty).
		{path: "/run", mode: 0o755, dir: true},
		{path: "/run/sshd", mode: 0o755, dir: true},
	}
	var keys []string
	for _, sub := range []string{"python", "examples"} {
		key, err := hashTree(filepath.Join(root, sub), keep)
		if err != nil {
			return nil, "", err
		}
		keys = append(keys, key)
		err = filepath.WalkDir(filepath.Join(root, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			dst := path.Join(trainingWorkdir, filepath.ToSlash(rel))
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") || d.Name() == "__pycache__" {
					return filepath.SkipDir
				}
				files = append(files, file{path: dst, mode: 0o755, dir: true})
				return nil
			}
			if !d.Type().IsRegular() || !keep(filepath.ToSlash(rel)) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, file{path: dst, mode: 0o644, data: data})
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("images: %w", err)
		}
	}
	return files, hashOf(append(keys, sshClientConfig, sshdConfig, nonRootSSHD, "run/sshd")...), nil
}

// debianBase builds (once per package list and hooks) the Debian root file system with
// mmdebstrap from the machine's own apt sources, as a one-layer image.
func debianBase(ctx context.Context) (Image, error) {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return Image{}, fmt.Errorf("images: the training image's base needs mmdebstrap (apt-get install mmdebstrap; `task deps` installs it): %w", err)
	}
	sources, err := aptSources()
	if err != nil {
		return Image{}, err
	}
	args := []string{
		"--variant=minbase", "--include=" + strings.Join(trainingPackages, ","),
		// The machine's apt configuration may lack current Release files' dates.
		`--aptopt=Acquire::Check-Valid-Until "false"`,
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/info/*",
		// No device nodes in the layer: the runtime makes /dev.
		"--skip=output/dev", "--skip=output/mknod",
	}
	for _, h := range trainingHooks {
		args = append(args, "--customize-hook="+h)
	}
	key := hashOf(append([]string{"debian-base/1", debianSuite}, args...)...)
	return cached(ctx, "training-base", key, func(scratch string) ([]tagged, error) {
		out := filepath.Join(scratch, "rootfs.tar")
		cmd := exec.CommandContext(ctx, "mmdebstrap", append(args, debianSuite, out, sources)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+scratch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mmdebstrap: %w\n%s", err, tail(b, 4000))
		}
		layer, err := tarball.LayerFromFile(out, tarball.WithMediaType(types.OCILayer),
			// 2 GB of files: the fastest gzip level, once per base.
			tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
		if err != nil {
			return nil, err
		}
		img, err := newImage(v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, Cmd: []string{"/bin/bash"}}, layer)
		if err != nil {
			return nil, err
		}
		return []tagged{{ref: ref("training-base", key), img: img}}, nil
	})
}

// aptSources returns the machine's Debian apt sources for mmdebstrap: a deb822 file
// under /etc/apt/sources.list.d, or /etc/apt/sources.list.
func aptSources() (string, error) {
	for _, p := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			return p, nil
		}
	}
	return "", errors.New("images: no Debian apt sources (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list) for mmdebstrap")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
