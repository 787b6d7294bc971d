// Command coscheduler is kube-scheduler with the Coscheduling plugin of
// sigs.k8s.io/scheduler-plugins registered, and no other plugin of that project:
// the gang scheduler kubestack runs as a second scheduler in tests.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics, as kube-scheduler registers them
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// The scheme that decodes CoschedulingArgs in the scheduler configuration.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, coscheduling.New))
	os.Exit(cli.Run(cmd))
}
