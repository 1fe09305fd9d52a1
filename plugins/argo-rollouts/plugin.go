package main

// The RPC shell: Argo's TrafficRouterPlugin methods as Kubernetes reads and writes around the pure edits in edit.go.

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// callTimeout bounds every API call of one RPC: Argo's reconcile waits on the answer.
const callTimeout = 30 * time.Second

var gvr = map[string]schema.GroupVersionResource{
	KindHTTPRoute:    {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
	KindTrafficSplit: {Group: "trafficsplit.dev", Version: "v1alpha1", Resource: "trafficsplits"},
}

// Plugin implements rpc.TrafficRouterPlugin.
type Plugin struct {
	client dynamic.Interface
	log    *log.Logger
}

func rpcErr(err error) types.RpcError {
	if err == nil {
		return types.RpcError{}
	}
	return types.RpcError{ErrorString: err.Error()}
}

// restConfig: $KUBECONFIG when set (the tests, a controller run outside a cluster), else the Pod's service account,
// which is the Argo Rollouts controller's: the plugin runs as its child process.
func restConfig() (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}

func (p *Plugin) InitPlugin() types.RpcError {
	cfg, err := restConfig()
	if err != nil {
		return rpcErr(fmt.Errorf("kubernetes config: %w", err))
	}
	cfg.UserAgent = "trafficsplit-argo-rollouts-plugin"
	p.client, err = dynamic.NewForConfig(cfg)
	return rpcErr(err)
}

func (p *Plugin) resource(t Target) dynamic.ResourceInterface {
	return p.client.Resource(gvr[t.Kind]).Namespace(t.Namespace)
}

// edit reads the object, applies fn and writes it back when fn reports a change, retrying on a write conflict.
func (p *Plugin) edit(ro *v1alpha1.Rollout, what string, fn func(*unstructured.Unstructured, Target) (bool, error)) types.RpcError {
	t, err := TargetOf(ro)
	if err != nil {
		return rpcErr(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := p.resource(t).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed, err := fn(obj, t)
		if err != nil || !changed {
			return err
		}
		_, err = p.resource(t).Update(ctx, obj, metav1.UpdateOptions{FieldManager: "trafficsplit-argo-rollouts-plugin"})
		if err == nil {
			p.log.Printf("%s: %s %s/%s updated", what, t.Kind, t.Namespace, t.Name)
		}
		return err
	})
	if err != nil {
		return rpcErr(fmt.Errorf("%s on %s %s/%s: %w", what, t.Kind, t.Namespace, t.Name, err))
	}
	return types.RpcError{}
}

// UpdateHash: nothing to do; the stable and canary Services select the pods (Argo updates their selectors).
func (p *Plugin) UpdateHash(*v1alpha1.Rollout, string, string, []v1alpha1.WeightDestination) types.RpcError {
	return types.RpcError{}
}

func (p *Plugin) SetWeight(ro *v1alpha1.Rollout, desired int32, extra []v1alpha1.WeightDestination) types.RpcError {
	return p.edit(ro, fmt.Sprintf("SetWeight %d", desired), func(obj *unstructured.Unstructured, t Target) (bool, error) {
		return SetWeight(obj, t, desired, extra)
	})
}

func (p *Plugin) SetHeaderRoute(ro *v1alpha1.Rollout, r *v1alpha1.SetHeaderRoute) types.RpcError {
	return p.edit(ro, "SetHeaderRoute "+r.Name, func(obj *unstructured.Unstructured, t Target) (bool, error) {
		before := obj.DeepCopy()
		err := SetHeaderRoute(obj, t, r)
		return err == nil && !equalObjects(before, obj), err
	})
}

func (p *Plugin) RemoveManagedRoutes(ro *v1alpha1.Rollout) types.RpcError {
	return p.edit(ro, "RemoveManagedRoutes", func(obj *unstructured.Unstructured, t Target) (bool, error) {
		before := obj.DeepCopy()
		err := RemoveHeaderRoutes(obj, t)
		return err == nil && !equalObjects(before, obj), err
	})
}

// SetMirrorRoute: neither a TrafficSplit nor the HTTPRoute filters served here mirror traffic; say so rather than
// pretend.
func (p *Plugin) SetMirrorRoute(*v1alpha1.Rollout, *v1alpha1.SetMirrorRoute) types.RpcError {
	return types.RpcError{ErrorString: "setMirrorRoute is not supported by the trafficsplit plugin (no mirroring)"}
}

// VerifyWeight answers Verified only when the object's status says every gateway replica serves a generation carrying
// the step's weights (edit.go's Served); NotVerified makes Argo hold the step and ask again.
func (p *Plugin) VerifyWeight(ro *v1alpha1.Rollout, desired int32, extra []v1alpha1.WeightDestination) (types.RpcVerified, types.RpcError) {
	t, err := TargetOf(ro)
	if err != nil {
		return types.NotVerified, rpcErr(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	obj, err := p.resource(t).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return types.NotVerified, rpcErr(fmt.Errorf("VerifyWeight: %s %s/%s: %w", t.Kind, t.Namespace, t.Name, err))
	}
	ok, why, err := Verify(obj, t, desired, extra)
	if err != nil {
		return types.NotVerified, rpcErr(err)
	}
	p.log.Printf("VerifyWeight %d on %s %s/%s: verified=%t (%s)", desired, t.Kind, t.Namespace, t.Name, ok, why)
	if ok {
		return types.Verified, types.RpcError{}
	}
	return types.NotVerified, types.RpcError{}
}

func (p *Plugin) Type() string { return PluginName }

func equalObjects(a, b *unstructured.Unstructured) bool {
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	return string(ja) == string(jb)
}
