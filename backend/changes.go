package backend

// ChangeNotifier is implemented by backends that can tell when a gang may have
// changed, from a watch they share between all the gangs of the process (the kube
// backend's informers). A watcher takes the channel, observes, and waits for the
// channel to close instead of observing on a timer, so watching N gangs costs no
// requests to the cluster per gang.
type ChangeNotifier interface {
	// GangChanges returns a channel that is closed at the next change the backend
	// sees to the gang's replicas. It may close for a change that leaves the gang's
	// status as it was; take it before observing, so that no change is missed.
	GangChanges(ref GangRef) <-chan struct{}
}
