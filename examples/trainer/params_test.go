package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParamsPrecedence(t *testing.T) {
	tests := map[string]struct {
		args         []string
		params       string // DLC_PARAMS
		want         Params
		wantWarnings []string
		wantErr      string
	}{
		"defaults": {
			want: defaultParams,
		},
		"flags": {
			args: []string{"--lr", "0.5", "--epochs", "3", "--batch-size", "8", "--l2", "0"},
			want: Params{LR: 0.5, Epochs: 3, BatchSize: 8, L2: 0},
		},
		"DLC_PARAMS over defaults": {
			params: `{"lr": 0.2, "epochs": 7, "batch_size": 16, "l2": 0.01}`,
			want:   Params{LR: 0.2, Epochs: 7, BatchSize: 16, L2: 0.01},
		},
		"explicit flags win over DLC_PARAMS": {
			args:   []string{"--epochs", "3", "-lr=0.05"},
			params: `{"lr": 0.2, "epochs": 7, "l2": 0.01}`,
			want:   Params{LR: 0.05, Epochs: 3, BatchSize: 32, L2: 0.01},
		},
		"a flag set to its default still wins": {
			args:   []string{"--epochs", "20"},
			params: `{"epochs": 7}`,
			want:   Params{LR: 0.1, Epochs: 20, BatchSize: 32, L2: 1e-4},
		},
		"numeric strings and key spellings": {
			params: `{"learning_rate": "0.3", "batch-size": "64", "EPOCHS": 5.0}`,
			want:   Params{LR: 0.3, Epochs: 5, BatchSize: 64, L2: 1e-4},
		},
		"unknown keys are warnings": {
			params:       `{"lr": 0.2, "momentum": 0.9, "optimizer": "adam"}`,
			want:         Params{LR: 0.2, Epochs: 20, BatchSize: 32, L2: 1e-4},
			wantWarnings: []string{`DLC_PARAMS: ignoring unknown parameter "momentum"`, `DLC_PARAMS: ignoring unknown parameter "optimizer"`},
		},
		"blank DLC_PARAMS":  {params: "  ", want: defaultParams},
		"empty object":      {params: "{}", want: defaultParams},
		"not an object":     {params: `[1, 2]`, wantErr: "DLC_PARAMS: must be a JSON object"},
		"not JSON":          {params: `lr=0.1`, wantErr: "DLC_PARAMS: must be a JSON object"},
		"not a number":      {params: `{"lr": true}`, wantErr: `DLC_PARAMS: "lr": want a number`},
		"bad numeric text":  {params: `{"lr": "fast"}`, wantErr: `want a number, got "fast"`},
		"fractional epochs": {params: `{"epochs": 2.5}`, wantErr: `"epochs": 2.5 is not a whole number`},
		"two spellings":     {params: `{"lr": 0.1, "learning_rate": 0.2}`, wantErr: "both set lr"},
		// A bad value in DLC_PARAMS is an error even when a flag overrides it: the trial's
		// parameters are wrong, and saying so beats ignoring it.
		"bad value under a flag":       {args: []string{"--lr", "0.1"}, params: `{"lr": "x"}`, wantErr: `"lr": want a number`},
		"out of range from DLC_PARAMS": {params: `{"lr": -1}`, wantErr: "lr must be a positive number"},
		"out of range from a flag":     {args: []string{"--batch-size", "0"}, wantErr: "batch-size must be >= 1"},
		"zero epochs":                  {args: []string{"--epochs", "0"}, wantErr: "epochs must be >= 1"},
		"negative l2":                  {args: []string{"--l2", "-0.1"}, wantErr: "l2 must be >= 0"},
		"unknown flag":                 {args: []string{"--momentum", "0.9"}, wantErr: "flag provided but not defined"},
		"stray argument":               {args: []string{"train.py"}, wantErr: `unexpected arguments ["train.py"]`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, warnings, err := parseConfig(tc.args, envOf(map[string]string{"DLC_PARAMS": tc.params}), io.Discard)
			if configFailed(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, cfg.Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	type want struct {
		Rank, WorldSize int
		MasterAddr      string
		CheckpointURI   string
		CheckpointKeep  int
		ResumeFrom      string
		DataDir         string
	}
	tests := map[string]struct {
		args    []string
		env     map[string]string
		want    want
		wantErr string
	}{
		"nothing set: one process": {want: want{WorldSize: 1}},
		"world of one ignores the master": {
			env:  map[string]string{"WORLD_SIZE": "1", "RANK": "0"},
			want: want{WorldSize: 1},
		},
		"rank 1 of 4": {
			env:  map[string]string{"WORLD_SIZE": "4", "RANK": "1", "MASTER_ADDR": "logreg-worker-0", "MASTER_PORT": "29500"},
			want: want{Rank: 1, WorldSize: 4, MasterAddr: "logreg-worker-0:29500"},
		},
		"IPv6 master": {
			env:  map[string]string{"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "::1", "MASTER_PORT": "29500"},
			want: want{WorldSize: 2, MasterAddr: "[::1]:29500"},
		},
		"checkpointing and resume": {
			env: map[string]string{
				"DLC_CHECKPOINT_URI": "s3://dlc/ckpt/job", "DLC_CHECKPOINT_KEEP": "3",
				"DLC_RESUME_FROM": "s3://dlc/ckpt/job/000000000126",
			},
			want: want{WorldSize: 1, CheckpointURI: "s3://dlc/ckpt/job", CheckpointKeep: 3, ResumeFrom: "s3://dlc/ckpt/job/000000000126"},
		},
		"data dir from env": {
			env:  map[string]string{"DLC_DATA_DIR": "/data"},
			want: want{WorldSize: 1, DataDir: "/data"},
		},
		"data flag wins over env": {
			args: []string{"--data", "/mine"},
			env:  map[string]string{"DLC_DATA_DIR": "/data"},
			want: want{WorldSize: 1, DataDir: "/mine"},
		},
		"rank missing":      {env: map[string]string{"WORLD_SIZE": "2"}, wantErr: "RANK is not set but WORLD_SIZE=2"},
		"rank out of range": {env: map[string]string{"WORLD_SIZE": "2", "RANK": "2"}, wantErr: "from 0 to WORLD_SIZE-1 (1)"},
		"bad world size":    {env: map[string]string{"WORLD_SIZE": "zero"}, wantErr: `WORLD_SIZE="zero"`},
		"master missing": {
			env: map[string]string{"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "29500"}, wantErr: "needs MASTER_ADDR and MASTER_PORT",
		},
		"bad master port": {
			env: map[string]string{"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "http"}, wantErr: `MASTER_PORT="http"`,
		},
		"bad checkpoint uri":   {env: map[string]string{"DLC_CHECKPOINT_URI": "/tmp/ckpt"}, wantErr: "DLC_CHECKPOINT_URI: checkpoint: invalid URI"},
		"bad keep":             {env: map[string]string{"DLC_CHECKPOINT_KEEP": "-1"}, wantErr: "DLC_CHECKPOINT_KEEP"},
		"bad resume ref":       {env: map[string]string{"DLC_RESUME_FROM": "s3://dlc/ckpt/job"}, wantErr: "DLC_RESUME_FROM: checkpoint: invalid URI"},
		"bad checkpoint-every": {args: []string{"--checkpoint-every", "0"}, wantErr: "--checkpoint-every must be >= 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := parseConfig(tc.args, envOf(tc.env), io.Discard)
			if configFailed(t, err, tc.wantErr) {
				return
			}
			got := want{cfg.Rank, cfg.WorldSize, cfg.MasterAddr, cfg.CheckpointURI, cfg.CheckpointKeep, cfg.ResumeFrom, cfg.DataDir}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFaultFlags(t *testing.T) {
	cfg, _, err := parseConfig([]string{"--epoch-sleep", "250ms", "--fail-at-epoch", "3", "--exit-code", "42", "--fail-attempt", "1"}, envOf(map[string]string{"DLC_ATTEMPT": "1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.EpochSleep, cfg.FailAtEpoch, cfg.ExitCode, cfg.FailAttempt, cfg.Attempt}
	if diff := cmp.Diff([]any{250 * time.Millisecond, 3, 42, "1", "1"}, got); diff != "" {
		t.Errorf("fault flags (-want +got):\n%s", diff)
	}
}

func TestListenAddr(t *testing.T) {
	tests := map[string]string{
		"127.0.0.1:29500":       "127.0.0.1:29500",
		"localhost:29500":       "localhost:29500",
		"[::1]:29500":           "[::1]:29500",
		"logreg-worker-0:29500": ":29500",
		"10.0.0.5:29500":        ":29500",
	}
	for master, want := range tests {
		if got := listenAddr(master); got != want {
			t.Errorf("listenAddr(%q) = %q, want %q", master, got, want)
		}
	}
}

// configFailed checks the error of parseConfig: with wantErr set it must contain
// wantErr, otherwise be nil. It reports whether an error was wanted (and found), so
// that the caller checks the config only when none was.
func configFailed(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("parseConfig error = %v, want one containing %q", err, wantErr)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
