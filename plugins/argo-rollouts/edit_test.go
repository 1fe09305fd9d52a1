package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func load(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return obj
}

func rollout(t *testing.T, cfg string) *v1alpha1.Rollout {
	t.Helper()
	ro := &v1alpha1.Rollout{}
	ro.Namespace = "shop"
	ro.Spec.Strategy.Canary = &v1alpha1.CanaryStrategy{
		StableService: "shop-stable",
		CanaryService: "shop-canary",
		TrafficRouting: &v1alpha1.RolloutTrafficRouting{
			Plugins: map[string]json.RawMessage{PluginName: json.RawMessage(cfg)},
		},
	}
	return ro
}

func target(t *testing.T, cfg string) Target {
	t.Helper()
	tg, err := TargetOf(rollout(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

const splitCfg = `{"trafficSplit": "shop"}`
const routeCfg = `{"httpRoute": "shop"}`

// weights reads the stable, canary (and for a TrafficSplit the third backend's) spec weights.
func specWeights(obj *unstructured.Unstructured) []int64 {
	var out []int64
	if obj.GetKind() == KindTrafficSplit {
		bs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "backends")
		for _, b := range bs {
			out = append(out, num(asMap(b), "weight", -1))
		}
		return out
	}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	for _, r := range rules {
		for _, b := range asMap(r)["backendRefs"].([]any) {
			out = append(out, num(asMap(b), "weight", 1))
		}
	}
	return out
}

func TestSetWeightOnTrafficSplitChangesOnlyTheTwoWeights(t *testing.T) {
	obj := load(t, "trafficsplit-published.yaml")
	before := obj.DeepCopy()
	changed, err := SetWeight(obj, target(t, splitCfg), 50, nil)
	if err != nil || !changed {
		t.Fatalf("SetWeight 50: changed=%v err=%v", changed, err)
	}
	if got := specWeights(obj); !reflect.DeepEqual(got, []int64{50, 50, 0}) {
		t.Fatalf("weights %v, want [50 50 0]", got)
	}
	// Everything else is the user's: assignment minimal, sticky persistent, the user's match, the beta backend.
	bs, _, _ := unstructured.NestedSlice(before.Object, "spec", "backends")
	asMap(bs[0])["weight"], asMap(bs[1])["weight"] = int64(50), int64(50)
	_ = unstructured.SetNestedSlice(before.Object, bs, "spec", "backends")
	if !reflect.DeepEqual(normalize(before.Object), normalize(obj.Object)) {
		t.Fatalf("SetWeight changed more than the two weights:\n%v\n%v", before.Object["spec"], obj.Object["spec"])
	}
	if changed, err := SetWeight(obj, target(t, splitCfg), 50, nil); err != nil || changed {
		t.Fatalf("the same weight again must be no write: changed=%v err=%v", changed, err)
	}
}

func TestSetWeightOnHTTPRouteWeighsOnlyTheRuleWithBothServices(t *testing.T) {
	obj := load(t, "httproute-accepted.yaml")
	changed, err := SetWeight(obj, target(t, routeCfg), 100, nil)
	if err != nil || !changed {
		t.Fatalf("SetWeight 100: changed=%v err=%v", changed, err)
	}
	// rule static keeps weight 1; rule canary: stable 0, canary 100.
	if got := specWeights(obj); !reflect.DeepEqual(got, []int64{1, 0, 100}) {
		t.Fatalf("weights %v, want [1 0 100]", got)
	}
}

func TestSetWeightUsesMaxTrafficWeightAndRefusesOutOfRange(t *testing.T) {
	ro := rollout(t, splitCfg)
	maxW := int32(1000)
	ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = &maxW
	tg, err := TargetOf(ro)
	if err != nil {
		t.Fatal(err)
	}
	obj := load(t, "trafficsplit-published.yaml")
	if _, err := SetWeight(obj, tg, 250, nil); err != nil {
		t.Fatal(err)
	}
	if got := specWeights(obj); !reflect.DeepEqual(got, []int64{750, 250, 0}) {
		t.Fatalf("weights %v, want [750 250 0]", got)
	}
	if _, err := SetWeight(obj, tg, 1001, nil); err == nil {
		t.Fatal("weight 1001 over maxTrafficWeight 1000 was accepted")
	}
	extra := []v1alpha1.WeightDestination{{ServiceName: "exp", Weight: 5}}
	if _, err := SetWeight(obj, tg, 10, extra); err == nil || !strings.Contains(err.Error(), "additional destinations") {
		t.Fatalf("additional destinations: err=%v", err)
	}
}

func TestTargetOfRefusesBadConfig(t *testing.T) {
	for _, cfg := range []string{
		`{"httpRoute": "shop", "trafficSplit": "shop"}`,
		`{}`,
		`{"trafficSplit": "Shop"}`,
		`{"trafficSplit": "shop", "namespace": "a/b"}`,
		`{"trafficSplit": 3}`,
	} {
		if _, err := TargetOf(rollout(t, cfg)); err == nil {
			t.Errorf("config %s accepted", cfg)
		}
	}
	ro := rollout(t, splitCfg)
	ro.Spec.Strategy.Canary.CanaryService = "shop-stable"
	if _, err := TargetOf(ro); err == nil {
		t.Error("the same Service as stable and canary accepted")
	}
}

func TestVerifyWeightTrafficSplit(t *testing.T) {
	tg := target(t, splitCfg)
	cases := []struct {
		file    string
		desired int32
		edit    func(*unstructured.Unstructured)
		want    bool
		why     string
	}{
		{"trafficsplit-behind.yaml", 10, nil, false, "behind: gw-1"},
		{"trafficsplit-published.yaml", 10, nil, true, "2/2 dataplanes"},
		// The spec no longer carries the step's weight (someone, or the next step, changed it).
		{"trafficsplit-published.yaml", 20, nil, false, "does not carry weight 20"},
		// A newer spec than the status describes: published for 5, the object is at 6.
		{"trafficsplit-published.yaml", 10, func(o *unstructured.Unstructured) { o.SetGeneration(6) }, false, "observedGeneration 5"},
		// Published for the generation, but the served weights are not the spec's: never trust the condition alone.
		{"trafficsplit-published.yaml", 10, func(o *unstructured.Unstructured) {
			bs, _, _ := unstructured.NestedSlice(o.Object, "status", "backends")
			asMap(bs[1])["weight"] = int64(0)
			_ = unstructured.SetNestedSlice(o.Object, bs, "status", "backends")
		}, false, "backend canary at weight 10"},
		{"trafficsplit-published.yaml", 10, func(o *unstructured.Unstructured) { delete(o.Object, "status") }, false, "no status"},
	}
	for _, c := range cases {
		obj := load(t, c.file)
		if c.edit != nil {
			c.edit(obj)
		}
		ok, why, err := Verify(obj, tg, c.desired, nil)
		if err != nil || ok != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s weight %d: verified=%v (%q) err=%v, want %v (%q)", c.file, c.desired, ok, why, err, c.want, c.why)
		}
	}
}

func TestVerifyWeightHTTPRoute(t *testing.T) {
	tg := target(t, routeCfg)
	cases := []struct {
		file string
		edit func(*unstructured.Unstructured)
		want bool
		why  string
	}{
		{"httproute-pending.yaml", nil, false, "Accepted is for generation 6"},
		{"httproute-accepted.yaml", nil, true, "1 parent(s) accepted generation 7"},
		// Only another implementation's parent: nothing of ours says it is served.
		{"httproute-accepted.yaml", func(o *unstructured.Unstructured) {
			ps, _, _ := unstructured.NestedSlice(o.Object, "status", "parents")
			_ = unstructured.SetNestedSlice(o.Object, ps[1:], "status", "parents")
		}, false, "no parent status from controller"},
		{"httproute-accepted.yaml", func(o *unstructured.Unstructured) {
			ps, _, _ := unstructured.NestedSlice(o.Object, "status", "parents")
			conds := asMap(ps[0])["conditions"].([]any)
			asMap(conds[1])["status"], asMap(conds[1])["reason"] = "False", "BackendNotFound"
			_ = unstructured.SetNestedSlice(o.Object, ps, "status", "parents")
		}, false, "ResolvedRefs False: BackendNotFound"},
		{"httproute-accepted.yaml", func(o *unstructured.Unstructured) {
			ps, _, _ := unstructured.NestedSlice(o.Object, "status", "parents")
			asMap(asMap(ps[0])["conditions"].([]any)[0])["status"] = "False"
			_ = unstructured.SetNestedSlice(o.Object, ps, "status", "parents")
		}, false, "Accepted False"},
	}
	for _, c := range cases {
		obj := load(t, c.file)
		if c.edit != nil {
			c.edit(obj)
		}
		ok, why, err := Verify(obj, tg, 10, nil)
		if err != nil || ok != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: verified=%v (%q) err=%v, want %v (%q)", c.file, ok, why, err, c.want, c.why)
		}
	}
	// Accepted at the generation, but the spec carries another weight than the step's.
	if ok, _, _ := Verify(load(t, "httproute-accepted.yaml"), tg, 30, nil); ok {
		t.Error("weight 30 verified on a route carrying 10")
	}
}

func header(name string, v v1alpha1.StringMatch) v1alpha1.HeaderRoutingMatch {
	return v1alpha1.HeaderRoutingMatch{HeaderName: name, HeaderValue: &v}
}

// The header rule goes last: a rule's index names its sticky sessions (the gateway seals a session cookie to the rule's
// split, route.rule-<index>), so a rule inserted before the weighted one would re-pick every session it holds. Spec
// precedence still sends the header's requests to it: its matches are the weighted rule's with more headers.
func TestHeaderRouteOnHTTPRouteIsALastRuleKeepingEveryIndexAndRemovesCleanly(t *testing.T) {
	tg := target(t, routeCfg)
	obj := load(t, "httproute-accepted.yaml")
	orig := obj.DeepCopy()
	r := &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
		header("x-canary", v1alpha1.StringMatch{Exact: "yes"}),
		header("x-user", v1alpha1.StringMatch{Prefix: "qa."}),
	}}
	if err := SetHeaderRoute(obj, tg, r); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if len(rules) != 3 || str(asMap(rules[0]), "name") != "static" || str(asMap(rules[1]), "name") != "canary" ||
		str(asMap(rules[2]), "name") != "argo-beta" {
		t.Fatalf("want the header rule after every rule of the route, got %v", rules)
	}
	got := normalize(asMap(rules[2]))
	want := normalize(map[string]any{
		"name": "argo-beta",
		"matches": []any{
			map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}, "headers": []any{
				map[string]any{"type": "Exact", "name": "x-canary", "value": "yes"},
				map[string]any{"type": "RegularExpression", "name": "x-user", "value": `^qa\..*`},
			}},
			map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/api"}, "headers": []any{
				map[string]any{"type": "Exact", "name": "x-tenant", "value": "acme"},
				map[string]any{"type": "Exact", "name": "x-canary", "value": "yes"},
				map[string]any{"type": "RegularExpression", "name": "x-user", "value": `^qa\..*`},
			}},
		},
		"backendRefs": []any{map[string]any{"name": "shop-canary", "port": 80, "weight": 1}},
	})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("header rule\n got %v\nwant %v", got, want)
	}
	// The source rule's matches are copied, not shared: it still has one header.
	if h := asMap(asMap(rules[1])["matches"].([]any)[1])["headers"].([]any); len(h) != 1 {
		t.Fatalf("the weighted rule's match was changed: %v", h)
	}
	// SetWeight still weighs only the weighted rule (the header rule sends everything to the canary).
	if _, err := SetWeight(obj, tg, 0, nil); err != nil {
		t.Fatal(err)
	}
	if w := specWeights(obj); !reflect.DeepEqual(w, []int64{1, 100, 0, 1}) {
		t.Fatalf("weights %v, want [1 100 0 1]", w)
	}
	if _, err := SetWeight(obj, tg, 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := RemoveHeaderRoutes(obj, tg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(orig.Object), normalize(obj.Object)) {
		t.Fatalf("RemoveManagedRoutes left the route changed:\n%v\n%v", orig.Object, obj.Object)
	}
}

func TestHeaderRouteOnTrafficSplitIsAFirstMatchAndRemovesCleanly(t *testing.T) {
	tg := target(t, splitCfg)
	obj := load(t, "trafficsplit-published.yaml")
	orig := obj.DeepCopy()
	if err := SetHeaderRoute(obj, tg, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
		header("x-canary", v1alpha1.StringMatch{Regex: "yes|y"}),
	}}); err != nil {
		t.Fatal(err)
	}
	matches, _, _ := unstructured.NestedSlice(obj.Object, "spec", "matches")
	want := normalize([]any{
		map[string]any{"header": map[string]any{"name": "x-canary", "type": "RegularExpression", "value": "yes|y"}, "backend": "canary"},
		map[string]any{"header": map[string]any{"name": "x-beta", "type": "Exact", "value": "1"}, "backend": "beta"},
	})
	if !reflect.DeepEqual(normalize(matches), want) {
		t.Fatalf("matches %v", matches)
	}
	// Setting it again replaces it (no duplicate); an empty match removes it; the user's match stays throughout.
	if err := SetHeaderRoute(obj, tg, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
		header("x-canary", v1alpha1.StringMatch{Regex: "yes|y"}),
	}}); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := unstructured.NestedSlice(obj.Object, "spec", "matches"); len(m) != 2 {
		t.Fatalf("set twice: %d matches", len(m))
	}
	if err := SetHeaderRoute(obj, tg, &v1alpha1.SetHeaderRoute{Name: "beta"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(orig.Object), normalize(obj.Object)) {
		t.Fatalf("removing the header route left the split changed:\n%v\n%v", orig.Object, obj.Object)
	}
	two := &v1alpha1.SetHeaderRoute{Name: "two", Match: []v1alpha1.HeaderRoutingMatch{
		header("a", v1alpha1.StringMatch{Exact: "1"}), header("b", v1alpha1.StringMatch{Exact: "2"}),
	}}
	if err := SetHeaderRoute(obj, tg, two); err == nil {
		t.Fatal("two headers (an AND a TrafficSplit match cannot express) accepted")
	}
	if err := SetHeaderRoute(obj, tg, &v1alpha1.SetHeaderRoute{Name: "Bad_Name"}); err == nil {
		t.Fatal("an invalid managed route name accepted")
	}
}

func TestRemoveManagedRoutesLeavesAnUntouchedObjectAlone(t *testing.T) {
	for file, cfg := range map[string]string{"trafficsplit-published.yaml": splitCfg, "httproute-accepted.yaml": routeCfg} {
		obj := load(t, file)
		orig := obj.DeepCopy()
		if err := RemoveHeaderRoutes(obj, target(t, cfg)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(orig.Object, obj.Object) {
			t.Errorf("%s changed by RemoveManagedRoutes with nothing managed", file)
		}
	}
}
