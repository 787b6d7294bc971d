package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Params are the trainer's hyper-parameters. Each can be set by a flag of the same name or
// by a key of the JSON object in DLC_PARAMS (how HPO trials receive theirs).
type Params struct {
	LR        float64 `json:"lr"`
	Epochs    int     `json:"epochs"`
	BatchSize int     `json:"batch_size"`
	L2        float64 `json:"l2"`
}

// defaultParams apply when neither a flag nor DLC_PARAMS says otherwise.
var defaultParams = Params{LR: 0.1, Epochs: 20, BatchSize: 32, L2: 1e-4}

// paramKeys maps the accepted DLC_PARAMS keys, after normalization (lower case, '_' as
// '-'), to the flag that sets the same parameter.
var paramKeys = map[string]string{
	"lr": "lr", "learning-rate": "lr",
	"epochs":     "epochs",
	"batch-size": "batch-size", "batchsize": "batch-size",
	"l2": "l2",
}

// applyParamsJSON sets the parameters named in the JSON object js on p, except those whose
// flag is in explicit: a flag given on the command line wins over DLC_PARAMS. Values may
// be JSON numbers or numeric strings ("0.1"). Keys the trainer does not know are returned
// as warnings, not errors, because a trial's parameters may also feed its command line.
func applyParamsJSON(p *Params, js string, explicit map[string]bool) (warnings []string, err error) {
	if strings.TrimSpace(js) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(js)))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("DLC_PARAMS: must be a JSON object: %w", err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[string]string{}
	for _, k := range keys {
		flagName, ok := paramKeys[strings.ReplaceAll(strings.ToLower(k), "_", "-")]
		if !ok {
			warnings = append(warnings, fmt.Sprintf("DLC_PARAMS: ignoring unknown parameter %q", k))
			continue
		}
		if other, dup := seen[flagName]; dup {
			return nil, fmt.Errorf("DLC_PARAMS: %q and %q both set %s", other, k, flagName)
		}
		seen[flagName] = k
		v, err := number(raw[k])
		if err != nil {
			return nil, fmt.Errorf("DLC_PARAMS: %q: %w", k, err)
		}
		if explicit[flagName] {
			continue
		}
		switch flagName {
		case "lr":
			p.LR = v
		case "l2":
			p.L2 = v
		case "epochs", "batch-size":
			if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
				return nil, fmt.Errorf("DLC_PARAMS: %q: %v is not a whole number", k, v)
			}
			if flagName == "epochs" {
				p.Epochs = int(v)
			} else {
				p.BatchSize = int(v)
			}
		}
	}
	return warnings, nil
}

// number reads a JSON number or a string holding one.
func number(v any) (float64, error) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = strings.TrimSpace(v)
	default:
		return 0, fmt.Errorf("want a number, got %v", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("want a number, got %q", s)
	}
	return f, nil
}

// Validate reports the first parameter out of range.
func (p Params) Validate() error {
	switch {
	case !(p.LR > 0) || math.IsInf(p.LR, 0):
		return fmt.Errorf("lr must be a positive number, got %v", p.LR)
	case p.Epochs < 1:
		return fmt.Errorf("epochs must be >= 1, got %d", p.Epochs)
	case p.BatchSize < 1:
		return fmt.Errorf("batch-size must be >= 1, got %d", p.BatchSize)
	case !(p.L2 >= 0) || math.IsInf(p.L2, 0):
		return fmt.Errorf("l2 must be >= 0, got %v", p.L2)
	}
	return nil
}
