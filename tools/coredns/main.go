// Command coredns is CoreDNS with only the plugins kubestack's cluster DNS needs:
// the kubernetes plugin answers the cluster.local zone (services, headless services'
// pod records) from the test API server, and nothing is forwarded anywhere (the test
// cluster reaches no address outside the machine). Upstream's main with a shorter
// plugin list; the Corefile kubestack writes uses only these directives.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins in CoreDNS's own execution order (plugin.cfg).
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
