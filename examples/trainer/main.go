// Command trainer is OpenDLC's example training program: a logistic regression trained by
// mini-batch gradient descent on a small data set shipped with it, optionally data-parallel
// over several processes. It follows the contract between OpenDLC and training code:
//
//   - hyper-parameters from flags and from DLC_PARAMS (JSON; an explicit flag wins);
//   - rendezvous from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as PyTorch's;
//   - a "dlc:metric epoch=E step=S loss=L accuracy=A" line on stdout after every epoch;
//   - checkpoints under DLC_CHECKPOINT_URI (rank 0 saves, in the background with
//     --async-checkpoint; "dlc:checkpoint step=S uri=REF" once each is complete), pruned
//     to DLC_CHECKPOINT_KEEP;
//   - resume from DLC_RESUME_FROM: rank 0 loads it and sends the state to the other ranks
//     in the first exchange, so only rank 0 needs S3;
//   - a final checkpoint on notice: when the replica is stopped (SIGTERM: a preemption, a
//     quota reclaim, a spot node reclaimed, a user's stop; or SIGINT), rank 0 does not
//     start another epoch, prints "dlc:notice signal=SIGTERM step=S", saves the state
//     after the last epoch every rank completed, at step S, unless that one is saved
//     already, prints its "dlc:checkpoint step=S uri=REF" once complete, and exits 128+N
//     (--notice-checkpoint, on by default; the other ranks exit at once);
//   - stop after epoch DLC_STOP_AT_STEP when it is set (an experiment with algorithm pbt
//     and stepMetric epoch sets it to the end of the trial's generation), with a
//     checkpoint there.
//
// Exit status: 0 on success, 2 for bad flags or environment, 1 for any other error, the
// --exit-code value for an injected failure, 128+N when stopped by signal N.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opendlc/opendlc/checkpoint"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	n := newNotice(cancel)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for sig := range sigs {
			n.deliver(sig)
		}
	}()
	rc := run(ctx, n, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if sig, _ := n.received(); sig != nil {
		rc = exitCode(sig)
	}
	os.Exit(rc)
}

// config is everything the trainer is told, by flags and environment.
type config struct {
	Params
	DataDir           string
	Seed              uint64
	CheckpointEvery   int
	AsyncCheckpoint   bool
	NoticeCheckpoint  bool
	EpochSleep        time.Duration
	FailAtEpoch       int
	FailAttempt       string
	ExitCode          int
	RendezvousTimeout time.Duration

	Rank, WorldSize int
	MasterAddr      string // host:port of rank 0
	CheckpointURI   string
	CheckpointKeep  int
	ResumeFrom      string
	Attempt         string // DLC_ATTEMPT
}

// parseConfig reads flags and environment. Hyper-parameters come from, lowest first: the
// defaults, DLC_PARAMS, flags given on the command line. Warnings are for the log.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (cfg config, warnings []string, err error) {
	fs := flag.NewFlagSet("trainer", flag.ContinueOnError)
	fs.SetOutput(usage)
	p := defaultParams
	fs.Float64Var(&p.LR, "lr", p.LR, "learning rate")
	fs.IntVar(&p.Epochs, "epochs", p.Epochs, "number of passes over the training data")
	fs.IntVar(&p.BatchSize, "batch-size", p.BatchSize, "rows per gradient step, per rank")
	fs.Float64Var(&p.L2, "l2", p.L2, "L2 penalty on the weights")
	fs.StringVar(&cfg.DataDir, "data", getenv("DLC_DATA_DIR"), "directory holding train.csv and test.csv (default $DLC_DATA_DIR, else the embedded data set)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the row order in each epoch")
	fs.IntVar(&cfg.CheckpointEvery, "checkpoint-every", 1, "save a checkpoint every N epochs (and after the last) when DLC_CHECKPOINT_URI is set")
	fs.BoolVar(&cfg.AsyncCheckpoint, "async-checkpoint", false, "upload checkpoints in the background while training goes on (one at a time, in order); the dlc:checkpoint line follows once the upload is complete")
	fs.BoolVar(&cfg.NoticeCheckpoint, "notice-checkpoint", true, "on SIGTERM or SIGINT, rank 0 ends the epoch it is in, saves a final checkpoint of the last epoch every rank completed (unless saved already) and exits 128+N, when DLC_CHECKPOINT_URI is set; a second signal stops at once")
	fs.DurationVar(&cfg.EpochSleep, "epoch-sleep", 0, "sleep this long after each epoch (tests use it to stop a job mid-run)")
	fs.IntVar(&cfg.FailAtEpoch, "fail-at-epoch", 0, "exit with --exit-code when epoch N starts (0: never)")
	fs.StringVar(&cfg.FailAttempt, "fail-attempt", "", "inject the failure only when DLC_ATTEMPT equals this (default: every attempt)")
	fs.IntVar(&cfg.ExitCode, "exit-code", 1, "exit status of the failure injected by --fail-at-epoch")
	fs.DurationVar(&cfg.RendezvousTimeout, "rendezvous-timeout", 60*time.Second, "how long the ranks wait for each other at start")
	if err := fs.Parse(args); err != nil {
		return config{}, nil, err
	}
	if fs.NArg() > 0 {
		return config{}, nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if warnings, err = applyParamsJSON(&p, getenv("DLC_PARAMS"), explicit); err != nil {
		return config{}, nil, err
	}
	if err := p.Validate(); err != nil {
		return config{}, nil, err
	}
	cfg.Params = p
	switch {
	case cfg.CheckpointEvery < 1:
		return config{}, nil, fmt.Errorf("--checkpoint-every must be >= 1, got %d", cfg.CheckpointEvery)
	case cfg.EpochSleep < 0:
		return config{}, nil, fmt.Errorf("--epoch-sleep must be >= 0, got %s", cfg.EpochSleep)
	case cfg.RendezvousTimeout <= 0:
		return config{}, nil, fmt.Errorf("--rendezvous-timeout must be > 0, got %s", cfg.RendezvousTimeout)
	}

	if cfg.Rank, cfg.WorldSize, cfg.MasterAddr, err = rendezvousEnv(getenv); err != nil {
		return config{}, nil, err
	}
	cfg.CheckpointURI = getenv("DLC_CHECKPOINT_URI")
	if cfg.CheckpointURI != "" {
		if _, _, err := checkpoint.ParseURI(cfg.CheckpointURI); err != nil {
			return config{}, nil, fmt.Errorf("DLC_CHECKPOINT_URI: %w", err)
		}
	}
	if v := getenv("DLC_CHECKPOINT_KEEP"); v != "" {
		if cfg.CheckpointKeep, err = strconv.Atoi(v); err != nil || cfg.CheckpointKeep < 0 {
			return config{}, nil, fmt.Errorf("DLC_CHECKPOINT_KEEP=%q: want a whole number >= 0 (0 keeps all)", v)
		}
	}
	cfg.ResumeFrom = getenv("DLC_RESUME_FROM")
	if cfg.ResumeFrom != "" {
		if _, _, err := checkpoint.ParseRef(cfg.ResumeFrom); err != nil {
			return config{}, nil, fmt.Errorf("DLC_RESUME_FROM: %w", err)
		}
	}
	cfg.Attempt = getenv("DLC_ATTEMPT")
	if v := getenv("DLC_STOP_AT_STEP"); v != "" {
		// Population-based training: this trial's generation ends after epoch N.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return config{}, nil, fmt.Errorf("DLC_STOP_AT_STEP=%q: want an epoch >= 1", v)
		}
		cfg.Epochs = min(cfg.Epochs, n)
	}
	return cfg, warnings, nil
}

// rendezvousEnv reads PyTorch's rendezvous variables. WORLD_SIZE unset or 1 means a single
// process, with no networking.
func rendezvousEnv(getenv func(string) string) (rank, world int, master string, err error) {
	world = 1
	if v := getenv("WORLD_SIZE"); v != "" {
		if world, err = strconv.Atoi(v); err != nil || world < 1 {
			return 0, 0, "", fmt.Errorf("WORLD_SIZE=%q: want a whole number >= 1", v)
		}
	}
	if v := getenv("RANK"); v != "" {
		if rank, err = strconv.Atoi(v); err != nil || rank < 0 || rank >= world {
			return 0, 0, "", fmt.Errorf("RANK=%q: want a whole number from 0 to WORLD_SIZE-1 (%d)", v, world-1)
		}
	} else if world > 1 {
		return 0, 0, "", fmt.Errorf("RANK is not set but WORLD_SIZE=%d", world)
	}
	if world == 1 {
		return 0, 1, "", nil
	}
	host, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	if host == "" || port == "" {
		return 0, 0, "", fmt.Errorf("WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (got %q, %q)", world, host, port)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return 0, 0, "", fmt.Errorf("MASTER_PORT=%q: want a port number", port)
	}
	return rank, world, net.JoinHostPort(host, port), nil
}

// usageError marks errors in flags or environment (exit status 2).
type usageError struct{ error }

// run is the whole program; it returns the exit status.
func run(ctx context.Context, n *notice, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	res, err := runErr(ctx, n, args, getenv, stdout, stderr)
	var exit *exitError
	var usage usageError
	var taken *noticeTaken
	switch {
	case err == nil:
		if res.Epoch > 0 {
			fmt.Fprintf(stderr, "trainer: done: epoch=%d step=%d loss=%.4f accuracy=%.4f\n", res.Epoch, res.Step, res.Loss, res.Accuracy)
		}
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &exit):
		fmt.Fprintln(stderr, "trainer:", err)
		return exit.code
	case errors.As(err, &taken):
		fmt.Fprintln(stderr, "trainer:", err)
		return exitCode(taken.sig)
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "trainer:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "trainer: error:", err)
		return 1
	}
}

func runErr(ctx context.Context, n *notice, args []string, getenv func(string) string, stdout, stderr io.Writer) (result, error) {
	cfg, warnings, err := parseConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return result{}, err
		}
		return result{}, usageError{err}
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "trainer: warning:", w)
	}
	train, test, err := loadData(cfg.DataDir)
	if err != nil {
		return result{}, err
	}
	t := &trainer{cfg: cfg, train: train, test: test, out: stdout, log: stderr, notice: n}
	if cfg.Rank == 0 && (cfg.CheckpointURI != "" || cfg.ResumeFrom != "") {
		if t.store, err = checkpoint.NewStore(checkpoint.ConfigFromEnv()); err != nil {
			return result{}, err
		}
	}
	if t.group, err = joinGroup(ctx, cfg); err != nil {
		return result{}, err
	}
	defer t.group.Close()
	fmt.Fprintf(stderr, "trainer: rank %d of %d: %d training rows (%d in this shard), %d test rows, %d features; lr=%g epochs=%d batch-size=%d l2=%g\n",
		cfg.Rank, cfg.WorldSize, train.Len(), train.Shard(cfg.Rank, cfg.WorldSize).Len(), test.Len(), len(train.Features),
		cfg.LR, cfg.Epochs, cfg.BatchSize, cfg.L2)
	return t.run(ctx)
}

// joinGroup sets up data parallelism: rank 0 listens on MASTER_PORT, the others connect.
func joinGroup(ctx context.Context, cfg config) (Group, error) {
	if cfg.WorldSize == 1 {
		return single{}, nil
	}
	if cfg.Rank != 0 {
		return dialHub(ctx, cfg.MasterAddr, cfg.Rank, cfg.WorldSize, cfg.RendezvousTimeout)
	}
	ln, err := net.Listen("tcp", listenAddr(cfg.MasterAddr))
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank 0 listen: %w", err)
	}
	return listenHub(ctx, ln, cfg.WorldSize, cfg.RendezvousTimeout)
}

// listenAddr is where rank 0 listens. MASTER_ADDR names rank 0 as the others see it (in
// Kubernetes, a Service name that may not be an address of the pod itself), so rank 0
// listens on every interface, except when MASTER_ADDR is a loopback address: then the job
// is local and stays off the network.
func listenAddr(master string) string {
	host, port, _ := net.SplitHostPort(master)
	if host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1" {
		return master
	}
	return ":" + port
}
