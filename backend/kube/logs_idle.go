package kube

import "time"

// A followed log stream that ends while its pod still runs is reopened after
// eofPatience. Some kubelets (kwok's, and a real one whose log rotates while nothing is
// written) end such streams again at once, so a quiet pod's log was reopened every
// eofPatience: at 10,000 pods, a thousand log requests a second to the API server for
// no line. The patience doubles with each stream in a row that ended without a new
// line, up to maxEOFPatience, and falls back to eofPatience as soon as one delivers a
// line. Nothing is lost meanwhile: the reopened stream starts where the last ended;
// only the forwarding of a quiet pod's next line may wait up to maxEOFPatience.

// maxEOFPatience bounds the wait before reopening a quiet pod's log stream.
const maxEOFPatience = 2 * time.Minute

// nextIdleEnds counts the clean ends in a row without a new line: reset by one that
// delivered a line.
func nextIdleEnds(idle int, delivered bool) int {
	if delivered {
		return 0
	}
	return min(idle+1, 16)
}

// idlePatience is how long to wait for the pod to finish after the idle-th quiet end
// in a row (0: the stream delivered lines) before reopening its log.
func idlePatience(idle int) time.Duration {
	d := eofPatience
	for range max(idle-1, 0) {
		if d >= maxEOFPatience {
			break
		}
		d *= 2
	}
	return min(d, maxEOFPatience)
}
