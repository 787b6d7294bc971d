package schemas

import (
	"fmt"
	"path"
	"strings"
)

// This file substitutes template references (${params.lr}, ${steps.train.outputs.x},
// ${pipeline.name}) into a job spec without ever handing a value to a shell parser.
// Values come from events, S3 object keys, upstream jobs and the HPO search: they are
// untrusted text. A value goes, byte for byte, into an argument (one argv element,
// never split or parsed), an environment variable's value, the working directory or a
// URI. The one place where a splice would be parsed is an inline shell script, the
// argument after -c of sh, bash and the like: there the reference is replaced by a
// reference to an environment variable that holds the value (${DLC_PARAM_LR}), so the
// shell expands it as data, and $(...), backticks, ';', quotes and newlines in the
// value stay literal. Values with a NUL byte (which no argument or variable can hold)
// and values over MaxTemplateValueLength bytes are refused, naming the reference.

// MaxTemplateValueLength bounds a value substituted into a job spec.
const MaxTemplateValueLength = 4096

// CheckTemplateValue refuses a value that cannot be substituted: one holding a NUL
// byte, or longer than MaxTemplateValueLength bytes. name names the parameter in the
// error.
func CheckTemplateValue(name, v string) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return fmt.Errorf("the value of %s holds a NUL byte (at byte %d), which no argument or environment variable can carry", name, i)
	}
	if len(v) > MaxTemplateValueLength {
		return fmt.Errorf("the value of %s is %d bytes long; at most %d are allowed", name, len(v), MaxTemplateValueLength)
	}
	return nil
}

// shells are the programs whose -c argument is a script.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "zsh": true, "ksh": true, "mksh": true, "yash": true}

// ShellScriptArg returns the index in argv of an inline shell script: the command
// string of "sh -c SCRIPT", "bash -euo pipefail -c SCRIPT", "/usr/bin/env bash -lc
// SCRIPT" or "busybox sh -c SCRIPT"; -1 when argv runs no inline script. The arguments
// after the script ($0, $1...) are not parsed by the shell.
func ShellScriptArg(argv []string) int {
	i := 0
	if i < len(argv) && path.Base(argv[i]) == "env" {
		i++
		for i < len(argv) && (strings.HasPrefix(argv[i], "-") || strings.Contains(argv[i], "=")) {
			i++ // env's options and NAME=VALUE assignments
		}
	}
	if i < len(argv) && path.Base(argv[i]) == "busybox" {
		i++
	}
	if i >= len(argv) || !shells[path.Base(argv[i])] {
		return -1
	}
	sawC := false
	for i++; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--" || a == "-":
			if sawC && i+1 < len(argv) {
				return i + 1
			}
			return -1
		case strings.HasPrefix(a, "--"):
			// a long option (--norc, --login)
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			if a[0] == '-' && strings.ContainsRune(a[1:], 'c') {
				sawC = true
			}
			if strings.ContainsAny(a[1:], "oO") {
				i++ // -o NAME, -euo NAME: the option's argument
			}
		default:
			// The first operand: the command string after -c, else a script file.
			if sawC {
				return i
			}
			return -1
		}
	}
	return -1
}

// TemplateEnvName is the environment variable that carries a reference's value into an
// inline shell script: DLC_PARAM_LR for ${params.lr}, DLC_PIPELINE_NAME,
// DLC_STEP_TRAIN_OUTPUTS_CHECKPOINT for ${steps.train.outputs.checkpoint},
// DLC_EVENT_DATA_KEY for ${event.data.key}. Characters other than letters, digits and
// '_' become '_'.
func TemplateEnvName(r TemplateRef) string {
	var name string
	switch r.Root {
	case RefParams:
		name = "DLC_PARAM_" + r.Name
	case RefPipeline:
		name = "DLC_PIPELINE_" + r.Name
	case RefSteps:
		name = "DLC_STEP_" + r.Name + "_" + r.Field + "_" + r.Key
	case RefItem:
		name = "DLC_ITEM"
		if r.Key != "" {
			name += "_" + r.Key
		}
	default:
		name = "DLC_" + r.Root + "_" + r.Path.String()
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z':
			return c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			return c
		}
		return '_'
	}, name)
}

// SubstituteJob replaces every reference in the strings of spec where templates are
// substituted (JobTemplateFields) with what resolve returns for it, checked with
// CheckTemplateValue. Arguments, environment values, the working directory and URIs
// get the value as text. An inline shell script (ShellScriptArg of a role's command and
// args) gets ${NAME} instead, NAME an environment variable (TemplateEnvName, with a
// suffix _2, _3... when the spec uses that name already) that SubstituteJob adds to
// spec.env with the value. p is the spec's path, for the errors, one per field at
// fault. resolve may return the reference's own text (r.String()) to leave it as it is.
func SubstituteJob(spec *TrainingJobSpec, p Path, resolve func(TemplateRef) (string, error)) []error {
	return substituteJob(spec, p, false, resolve)
}

// SubstituteItemJob is SubstituteJob for a child of a fan-out step, where ${item} and
// ${item.<key>} are references too (ExpandItemTemplate).
func SubstituteItemJob(spec *TrainingJobSpec, p Path, resolve func(TemplateRef) (string, error)) []error {
	return substituteJob(spec, p, true, resolve)
}

func substituteJob(spec *TrainingJobSpec, p Path, item bool, resolve func(TemplateRef) (string, error)) []error {
	scripts := shellScriptFields(spec, p)
	taken := map[string]bool{}
	for _, e := range spec.Env {
		taken[e.Name] = true
	}
	for _, name := range sortedKeys(spec.Roles) {
		for _, e := range spec.Roles[name].Env {
			taken[e.Name] = true
		}
	}
	assigned := map[string]string{} // reference -> variable
	var added []EnvVar
	var errs []error
	JobTemplateFields(spec, p, func(fp Path, v *string) {
		script := scripts[fp]
		s, err := expandTemplate(*v, item, func(r TemplateRef) (string, error) {
			val, err := resolve(r)
			if err != nil || val == r.String() {
				return val, err
			}
			if err := CheckTemplateValue(r.String(), val); err != nil {
				return "", err
			}
			if !script {
				return val, nil
			}
			name, ok := assigned[r.Raw]
			if !ok {
				base := TemplateEnvName(r)
				name = base
				for n := 2; taken[name]; n++ {
					name = fmt.Sprintf("%s_%d", base, n)
				}
				taken[name], assigned[r.Raw] = true, name
				added = append(added, EnvVar{Name: name, Value: val})
			}
			return "${" + name + "}", nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fp, err))
			return
		}
		*v = s
	})
	spec.Env = append(spec.Env, added...)
	return errs
}

// shellScriptFields returns the paths of the fields of spec that hold an inline shell
// script: the job's own command and args, and each role's, as the backends combine
// them (a role's command replaces the job's command and args; a role's args replace
// the args).
func shellScriptFields(spec *TrainingJobSpec, p Path) map[Path]bool {
	out := map[Path]bool{}
	mark := func(command, args []string, cp, ap Path) {
		i := ShellScriptArg(append(append([]string{}, command...), args...))
		switch {
		case i < 0:
		case i < len(command):
			out[cp.Index(i)] = true
		default:
			out[ap.Index(i-len(command))] = true
		}
	}
	mark(spec.Command, spec.Args, p.Child("command"), p.Child("args"))
	for _, name := range sortedKeys(spec.Roles) {
		rs, rp := spec.Roles[name], p.Child("roles").Key(name)
		command, args, cp, ap := spec.Command, spec.Args, p.Child("command"), p.Child("args")
		if len(rs.Command) > 0 {
			command, args, cp = rs.Command, nil, rp.Child("command")
		}
		if len(rs.Args) > 0 {
			args, ap = rs.Args, rp.Child("args")
		}
		mark(command, args, cp, ap)
	}
	return out
}
