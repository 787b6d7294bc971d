package frameworks

import (
	"path"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// DeepSpeed runs DeepSpeed programs under torch.distributed's rendezvous (the way the
// deepspeed launcher's --no_ssh mode and torchrun both start them), and gives the
// hostfile the deepspeed launcher reads, a line "host slots=N" per host in rank order
// (N = its replicas' GPUs, or 1 per replica without GPUs; a host shared by several
// replicas, 127.0.0.1 on the local backend, is listed once with their slots summed,
// since the launcher refuses a host named twice).
//
// The hostfile is on disk where the launcher looks by default, /job/hostfile
// (DeepSpeed's DLTS_HOSTFILE; see FileProvider for where each backend puts it), so
//
//	deepspeed --no_ssh --node_rank $RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT train.py
//
// on every replica finds the other nodes without --hostfile. DLC_HOSTFILE names the
// file (the local backend's copy there), and DLC_HOSTFILE_CONTENT holds it as well.
// mpi-operator's DeepSpeed example passes its /etc/mpi/hostfile with --hostfile instead;
// the format is the same.
type DeepSpeed struct{ torchRendezvous }

// Name returns "deepspeed".
func (DeepSpeed) Name() schemas.Framework { return schemas.FrameworkDeepSpeed }

// DeepSpeedJobDir is where DeepSpeed's launcher finds its hostfile by default
// (/job/hostfile, DLTS_HOSTFILE in deepspeed/launcher/runner.py), and so where
// DeepSpeed's Files go.
const DeepSpeedJobDir = "/job"

// DeepSpeedHostfile is the name of DeepSpeed's hostfile in DeepSpeedJobDir.
const DeepSpeedHostfile = "hostfile"

// Env returns PyTorch's environment plus DLC_HOSTFILE (the hostfile's path) and
// DLC_HOSTFILE_CONTENT (the hostfile).
func (d DeepSpeed) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	return append(torchEnv(g, r, ep),
		schemas.EnvVar{Name: "DLC_HOSTFILE", Value: path.Join(filesDir(d, ep), DeepSpeedHostfile)},
		schemas.EnvVar{Name: "DLC_HOSTFILE_CONTENT", Value: deepSpeedHostfile(g, ep)},
	)
}

// FilesDir returns DeepSpeedJobDir.
func (DeepSpeed) FilesDir() string { return DeepSpeedJobDir }

// Files returns the hostfile, read-only.
func (DeepSpeed) Files(g backend.GangSpec, ep Endpoints) []File {
	return []File{{Name: DeepSpeedHostfile, Content: deepSpeedHostfile(g, ep), Mode: 0o444}}
}

// deepSpeedHostfile lists every replica's host in rank order with its slots.
func deepSpeedHostfile(g backend.GangSpec, ep Endpoints) string {
	return hostfile(hostSlots(RankOrder(g), ep))
}
