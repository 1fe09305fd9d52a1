// Command trafficsplit-argo-rollouts-plugin is an Argo Rollouts traffic-router plugin for trafficsplit: it drives
// an HTTPRoute served by trafficsplit's Gateway, or a TrafficSplit, and verifies a weight only once every gateway
// replica serves it. Argo Rollouts downloads it at start from the location in the argo-rollouts-config ConfigMap
// (the release's URL, checked against its sha256) and starts it as a child process (hashicorp go-plugin, net/rpc);
// run by hand it only says so and exits.
package main

import (
	"log"
	"os"

	"github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	goPlugin "github.com/hashicorp/go-plugin"
)

// handshake is the one Argo Rollouts' controller uses for traffic routers (rollout/trafficrouting/plugin/client).
var handshake = goPlugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
	MagicCookieValue: "trafficrouter",
}

func main() {
	// stderr reaches the controller's log through go-plugin.
	p := &Plugin{log: log.New(os.Stderr, "trafficsplit-plugin: ", 0)}
	goPlugin.Serve(&goPlugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         map[string]goPlugin.Plugin{"RpcTrafficRouterPlugin": &rpc.RpcTrafficRouterPlugin{Impl: p}},
	})
}
