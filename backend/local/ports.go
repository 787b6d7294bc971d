package local

import (
	"fmt"

	"github.com/opendlc/opendlc/internal/freeport"
)

// allocatePorts returns a free loopback port per name, distinct. A gang's ports are
// chosen when it is laid out and bound by its rank 0 seconds later, so they come from
// below the kernel's ephemeral range (package freeport says why).
func allocatePorts(names []string) (map[string]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	taken, err := freeport.Take(len(names))
	if err != nil {
		return nil, fmt.Errorf("local: allocate ports %q: %w", names, err)
	}
	ports := make(map[string]int, len(names))
	for i, name := range names {
		ports[name] = taken[i]
	}
	return ports, nil
}
