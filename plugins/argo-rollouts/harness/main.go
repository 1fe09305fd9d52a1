// Command harness starts a traffic-router plugin binary the way the Argo Rollouts controller does (go-plugin with
// Argo's handshake and plugin map, net/rpc, Argo's own RPC client types) and calls it on behalf of a test: one JSON
// request per stdin line, one JSON answer per stdout line. tests/integration/test_argo_rollouts_plugin.py drives it.
//
//	harness -plugin /path/to/plugin -rollout rollout.json
//	{"method": "SetWeight", "weight": 10}              → {"error": ""}
//	{"method": "VerifyWeight", "weight": 10}           → {"verified": "Verified" | "NotVerified" | "NotImplemented", "error": ""}
//	{"method": "SetHeaderRoute", "headerRoute": {...}} → {"error": ""}   (v1alpha1.SetHeaderRoute as JSON)
//	{"method": "RemoveManagedRoutes"} / {"method": "Type"} / {"method": "SetMirrorRoute"}
//
// The plugin process inherits this process's environment (KUBECONFIG), as it inherits the controller's.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/hashicorp/go-hclog"
	goPlugin "github.com/hashicorp/go-plugin"
)

// Copied from Argo Rollouts v1.9.1 rollout/trafficrouting/plugin/client (unexported there).
var handshakeConfig = goPlugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
	MagicCookieValue: "trafficrouter",
}

var pluginMap = map[string]goPlugin.Plugin{
	"RpcTrafficRouterPlugin": &rpc.RpcTrafficRouterPlugin{},
}

type request struct {
	Method      string                   `json:"method"`
	Weight      int32                    `json:"weight"`
	HeaderRoute *v1alpha1.SetHeaderRoute `json:"headerRoute"`
}

type answer struct {
	Error    string `json:"error"`
	Verified string `json:"verified,omitempty"`
	Type     string `json:"type,omitempty"`
}

var verdicts = map[types.RpcVerified]string{
	types.Verified: "Verified", types.NotVerified: "NotVerified", types.NotImplemented: "NotImplemented",
}

const maxLine = 1 << 20 // one request line; the test's are a few hundred bytes

func main() {
	pluginPath := flag.String("plugin", "", "the plugin binary")
	rolloutPath := flag.String("rollout", "", "the Rollout, as JSON")
	flag.Parse()
	raw, err := os.ReadFile(*rolloutPath)
	if err != nil {
		fail(err)
	}
	ro := &v1alpha1.Rollout{}
	if err := json.Unmarshal(raw, ro); err != nil {
		fail(fmt.Errorf("rollout: %w", err))
	}

	// As the controller's startPluginLocked: Managed client, Client(), Dispense, InitPlugin, Ping.
	client := goPlugin.NewClient(&goPlugin.ClientConfig{
		HandshakeConfig: handshakeConfig,
		Plugins:         pluginMap,
		Cmd:             exec.Command(*pluginPath),
		Managed:         true,
		Logger:          hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Debug, Name: "harness"}),
	})
	defer goPlugin.CleanupClients()
	rpcClient, err := client.Client()
	if err != nil {
		fail(fmt.Errorf("plugin client: %w", err))
	}
	raw2, err := rpcClient.Dispense("RpcTrafficRouterPlugin")
	if err != nil {
		fail(fmt.Errorf("dispense: %w", err))
	}
	p, ok := raw2.(rpc.TrafficRouterPlugin)
	if !ok {
		fail(fmt.Errorf("unexpected type %T from plugin", raw2))
	}
	if resp := p.InitPlugin(); resp.HasError() {
		fail(fmt.Errorf("InitPlugin: %w", resp))
	}
	if err := rpcClient.Ping(); err != nil {
		fail(fmt.Errorf("ping: %w", err))
	}

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 4096), maxLine)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			a.Error = "bad request: " + err.Error()
		} else {
			a = call(p, ro, req)
		}
		if err := out.Encode(a); err != nil {
			fail(err)
		}
	}
	if err := in.Err(); err != nil && err != io.EOF {
		fail(err)
	}
}

func call(p rpc.TrafficRouterPlugin, ro *v1alpha1.Rollout, req request) answer {
	switch req.Method {
	case "SetWeight":
		return answer{Error: p.SetWeight(ro, req.Weight, nil).ErrorString}
	case "VerifyWeight":
		v, e := p.VerifyWeight(ro, req.Weight, nil)
		return answer{Verified: verdicts[v], Error: e.ErrorString}
	case "SetHeaderRoute":
		if req.HeaderRoute == nil {
			return answer{Error: "headerRoute missing"}
		}
		return answer{Error: p.SetHeaderRoute(ro, req.HeaderRoute).ErrorString}
	case "SetMirrorRoute":
		return answer{Error: p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "m"}).ErrorString}
	case "RemoveManagedRoutes":
		return answer{Error: p.RemoveManagedRoutes(ro).ErrorString}
	case "Type":
		return answer{Type: p.Type()}
	}
	return answer{Error: "unknown method " + req.Method}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "harness:", err)
	goPlugin.CleanupClients()
	os.Exit(1)
}
