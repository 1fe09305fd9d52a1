package main

// The weight and header-route edits and the VerifyWeight decision, as pure functions over object bodies
// (unstructured maps), so the unit tests read them on recorded objects and the RPC shell only adds Kubernetes I/O.

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	// PluginName is the key of this plugin in argo-rollouts-config and in a Rollout's trafficRouting.plugins.
	PluginName = "trafficsplit/trafficsplit"
	// ControllerName is the GatewayClass controllerName whose HTTPRoute parent status this plugin trusts.
	ControllerName = "trafficsplit.dev/gateway-controller"
	// ManagedAnnotation records the header routes this plugin added, so it removes exactly those and nothing a person
	// wrote: managed route name → the HTTPRoute rule name, or the TrafficSplit matches entries it added.
	ManagedAnnotation = "rollouts.trafficsplit.dev/managed-routes"
	// ManagedRulePrefix prefixes the name of an HTTPRoute rule added for a header route.
	ManagedRulePrefix = "argo-"

	KindHTTPRoute    = "HTTPRoute"
	KindTrafficSplit = "TrafficSplit"

	maxNameLen = 63 // a Kubernetes object name as this plugin accepts it (Services, TrafficSplits, HTTPRoutes)
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Config is the plugin's entry in a Rollout: exactly one of httpRoute / trafficSplit, in namespace (default: the
// Rollout's).
type Config struct {
	HTTPRoute    string `json:"httpRoute,omitempty"`
	TrafficSplit string `json:"trafficSplit,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
}

// Target is what one Rollout drives: the object, the stable and canary Service names and Argo's weight scale.
type Target struct {
	Kind      string
	Namespace string
	Name      string
	Stable    string
	Canary    string
	MaxWeight int32
}

func checkName(what, name string) error {
	if len(name) > maxNameLen || !dnsLabel.MatchString(name) {
		return fmt.Errorf("%s %q is not a valid name (lowercase letters, digits and '-', at most %d)", what, name, maxNameLen)
	}
	return nil
}

// TargetOf reads the Rollout's canary strategy and this plugin's config; every name is checked before it is used.
func TargetOf(ro *v1alpha1.Rollout) (Target, error) {
	c := ro.Spec.Strategy.Canary
	if c == nil || c.TrafficRouting == nil {
		return Target{}, errors.New("the Rollout has no canary trafficRouting")
	}
	raw, ok := c.TrafficRouting.Plugins[PluginName]
	if !ok {
		return Target{}, fmt.Errorf("the Rollout's trafficRouting.plugins has no %q entry", PluginName)
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return Target{}, fmt.Errorf("trafficRouting.plugins[%q]: %w", PluginName, err)
	}
	t := Target{Namespace: cfg.Namespace, Stable: c.StableService, Canary: c.CanaryService, MaxWeight: 100}
	if t.Namespace == "" {
		t.Namespace = ro.Namespace
	}
	switch {
	case cfg.HTTPRoute != "" && cfg.TrafficSplit == "":
		t.Kind, t.Name = KindHTTPRoute, cfg.HTTPRoute
	case cfg.TrafficSplit != "" && cfg.HTTPRoute == "":
		t.Kind, t.Name = KindTrafficSplit, cfg.TrafficSplit
	default:
		return Target{}, fmt.Errorf("trafficRouting.plugins[%q] needs exactly one of httpRoute, trafficSplit", PluginName)
	}
	if c.TrafficRouting.MaxTrafficWeight != nil {
		t.MaxWeight = *c.TrafficRouting.MaxTrafficWeight
	}
	for what, name := range map[string]string{
		"namespace": t.Namespace, t.Kind: t.Name, "stableService": t.Stable, "canaryService": t.Canary,
	} {
		if err := checkName(what, name); err != nil {
			return Target{}, err
		}
	}
	if t.Stable == t.Canary {
		return Target{}, errors.New("stableService and canaryService must differ")
	}
	if t.MaxWeight < 1 || t.MaxWeight > 1000000 {
		return Target{}, fmt.Errorf("maxTrafficWeight %d is out of 1..1000000", t.MaxWeight)
	}
	return t, nil
}

// Weights are the two weights a step asks for, on Argo's scale: canary = the step's weight, stable = the rest.
func (t Target) Weights(desired int32) (stable, canary int64, err error) {
	if desired < 0 || desired > t.MaxWeight {
		return 0, 0, fmt.Errorf("weight %d is out of 0..%d", desired, t.MaxWeight)
	}
	return int64(t.MaxWeight - desired), int64(desired), nil
}

func noExtraDestinations(extra []v1alpha1.WeightDestination) error {
	if len(extra) > 0 {
		return errors.New("additional destinations (experiment traffic) are not supported by the trafficsplit plugin")
	}
	return nil
}

// --- reading and writing nested fields --------------------------------------------------------------------------

func list(obj map[string]any, path ...string) ([]any, error) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !found || v == nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%v is not a list", path)
	}
	return l, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// num reads an integer field as json.Unmarshal (float64) or the API machinery (int64) leaves it; def when absent.
func num(m map[string]any, key string, def int64) int64 {
	switch v := m[key].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	return def
}

func managed(obj *unstructured.Unstructured) (map[string]any, error) {
	out := map[string]any{}
	raw := obj.GetAnnotations()[ManagedAnnotation]
	if raw == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", ManagedAnnotation, err)
	}
	return out, nil
}

func setManaged(obj *unstructured.Unstructured, m map[string]any) error {
	ann := obj.GetAnnotations()
	if len(m) == 0 {
		delete(ann, ManagedAnnotation)
	} else {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if ann == nil {
			ann = map[string]string{}
		}
		ann[ManagedAnnotation] = string(b)
	}
	if len(ann) == 0 {
		ann = nil // no `annotations: {}` left behind: the object reads back as it was
	}
	obj.SetAnnotations(ann)
	return nil
}

// --- HTTPRoute ---------------------------------------------------------------------------------------------------

// isService: a backendRef to a core Service (group "" and kind Service, both defaults).
func isService(ref map[string]any, name string) bool {
	g, k := str(ref, "group"), str(ref, "kind")
	return str(ref, "name") == name && g == "" && (k == "" || k == "Service") && str(ref, "namespace") == ""
}

// splitRules: indices of the rules this plugin weighs, those with exactly one backendRef to each Service (the header
// rules it adds have only the canary, so they are never among them).
func splitRules(obj *unstructured.Unstructured, t Target) ([]int, []any, error) {
	rules, err := list(obj.Object, "spec", "rules")
	if err != nil {
		return nil, nil, err
	}
	var out []int
	for i, r := range rules {
		rule := asMap(r)
		if rule == nil {
			continue
		}
		refs, _ := rule["backendRefs"].([]any)
		stable, canary := 0, 0
		for _, b := range refs {
			if isService(asMap(b), t.Stable) {
				stable++
			}
			if isService(asMap(b), t.Canary) {
				canary++
			}
		}
		if stable == 1 && canary == 1 {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("HTTPRoute %s/%s has no rule with one backendRef to Service %s and one to Service %s",
			t.Namespace, t.Name, t.Stable, t.Canary)
	}
	return out, rules, nil
}

func routeWeights(obj *unstructured.Unstructured, t Target, set bool, stable, canary int64) (bool, error) {
	idx, rules, err := splitRules(obj, t)
	if err != nil {
		return false, err
	}
	match := true
	for _, i := range idx {
		for _, b := range asMap(rules[i])["backendRefs"].([]any) {
			ref := asMap(b)
			want := int64(-1)
			if isService(ref, t.Stable) {
				want = stable
			} else if isService(ref, t.Canary) {
				want = canary
			}
			if want < 0 {
				continue
			}
			if num(ref, "weight", 1) != want { // Gateway API: an absent weight is 1
				match = false
				if set {
					ref["weight"] = want
				}
			}
		}
	}
	return match, nil
}

// --- TrafficSplit ------------------------------------------------------------------------------------------------

// splitBackends: the spec.backends entries for the stable and canary Services (exactly one each).
func splitBackends(obj *unstructured.Unstructured, t Target) (stable, canary map[string]any, err error) {
	backends, err := list(obj.Object, "spec", "backends")
	if err != nil {
		return nil, nil, err
	}
	for _, b := range backends {
		m := asMap(b)
		switch str(m, "service") {
		case t.Stable:
			if stable != nil {
				return nil, nil, fmt.Errorf("TrafficSplit %s/%s has two backends for Service %s", t.Namespace, t.Name, t.Stable)
			}
			stable = m
		case t.Canary:
			if canary != nil {
				return nil, nil, fmt.Errorf("TrafficSplit %s/%s has two backends for Service %s", t.Namespace, t.Name, t.Canary)
			}
			canary = m
		}
	}
	if stable == nil || canary == nil {
		return nil, nil, fmt.Errorf("TrafficSplit %s/%s needs a backend for Service %s and one for Service %s",
			t.Namespace, t.Name, t.Stable, t.Canary)
	}
	return stable, canary, nil
}

func splitWeights(obj *unstructured.Unstructured, t Target, set bool, stable, canary int64) (bool, error) {
	s, c, err := splitBackends(obj, t)
	if err != nil {
		return false, err
	}
	match := num(s, "weight", -1) == stable && num(c, "weight", -1) == canary
	if set {
		// Only the two weights: assignment, sticky, matches and every other backend are the user's and stay.
		s["weight"], c["weight"] = stable, canary
	}
	return match, nil
}

// --- the edits ---------------------------------------------------------------------------------------------------

// SetWeight writes the step's weights into obj; false when they were there already (nothing to write).
func SetWeight(obj *unstructured.Unstructured, t Target, desired int32, extra []v1alpha1.WeightDestination) (bool, error) {
	if err := noExtraDestinations(extra); err != nil {
		return false, err
	}
	stable, canary, err := t.Weights(desired)
	if err != nil {
		return false, err
	}
	var match bool
	if t.Kind == KindHTTPRoute {
		match, err = routeWeights(obj, t, true, stable, canary)
	} else {
		match, err = splitWeights(obj, t, true, stable, canary)
	}
	return !match && err == nil, err
}

// SpecHasWeight: obj's spec carries the step's weights.
func SpecHasWeight(obj *unstructured.Unstructured, t Target, desired int32) (bool, error) {
	stable, canary, err := t.Weights(desired)
	if err != nil {
		return false, err
	}
	if t.Kind == KindHTTPRoute {
		return routeWeights(obj.DeepCopy(), t, false, stable, canary)
	}
	return splitWeights(obj.DeepCopy(), t, false, stable, canary)
}

func condition(conds []any, typ string) map[string]any {
	for _, c := range conds {
		if m := asMap(c); m != nil && str(m, "type") == typ {
			return m
		}
	}
	return nil
}

// Served says whether obj's status reports the object's current generation as served by every gateway replica,
// and why not. The operator writes these only after every replica acknowledged the generation carrying the spec:
//
//   - TrafficSplit: status.observedGeneration and the Published condition (status True) at metadata.generation, and
//     status.backends showing the spec's weights for the stable and canary backends.
//   - HTTPRoute: every status.parents[] entry of controllerName trafficsplit.dev/gateway-controller (at least one)
//     has Accepted True at metadata.generation, and no ResolvedRefs False at that generation.
func Served(obj *unstructured.Unstructured, t Target) (bool, string) {
	gen := obj.GetGeneration()
	if t.Kind == KindTrafficSplit {
		status := asMap(obj.Object["status"])
		if status == nil {
			return false, "no status yet"
		}
		if og := num(status, "observedGeneration", -1); og != gen {
			return false, fmt.Sprintf("status.observedGeneration %d, metadata.generation %d", og, gen)
		}
		conds, _ := status["conditions"].([]any)
		p := condition(conds, "Published")
		if p == nil {
			return false, "no Published condition"
		}
		if og := num(p, "observedGeneration", -1); og != gen {
			return false, fmt.Sprintf("Published is for generation %d, metadata.generation %d", og, gen)
		}
		if str(p, "status") != "True" {
			return false, fmt.Sprintf("Published %s: %s: %s", str(p, "status"), str(p, "reason"), str(p, "message"))
		}
		s, c, err := splitBackends(obj, t)
		if err != nil {
			return false, err.Error()
		}
		served := map[string]int64{}
		backends, _ := status["backends"].([]any)
		for _, b := range backends {
			if m := asMap(b); m != nil {
				served[str(m, "name")] = num(m, "weight", -1)
			}
		}
		for _, b := range []map[string]any{s, c} {
			w, ok := served[str(b, "name")]
			if !ok || w != num(b, "weight", -1) {
				return false, fmt.Sprintf("status.backends does not show backend %s at weight %d", str(b, "name"), num(b, "weight", -1))
			}
		}
		return true, str(p, "message")
	}
	parents, _ := list(obj.Object, "status", "parents")
	ours := 0
	for _, p := range parents {
		m := asMap(p)
		if str(m, "controllerName") != ControllerName {
			continue
		}
		ours++
		conds, _ := m["conditions"].([]any)
		a := condition(conds, "Accepted")
		parent := fmt.Sprintf("parent %s", str(asMap(m["parentRef"]), "name"))
		if a == nil {
			return false, parent + ": no Accepted condition"
		}
		if og := num(a, "observedGeneration", -1); og != gen {
			return false, fmt.Sprintf("%s: Accepted is for generation %d, metadata.generation %d", parent, og, gen)
		}
		if str(a, "status") != "True" {
			return false, fmt.Sprintf("%s: Accepted %s: %s: %s", parent, str(a, "status"), str(a, "reason"), str(a, "message"))
		}
		if r := condition(conds, "ResolvedRefs"); r != nil && num(r, "observedGeneration", -1) == gen && str(r, "status") == "False" {
			return false, fmt.Sprintf("%s: ResolvedRefs False: %s: %s", parent, str(r, "reason"), str(r, "message"))
		}
	}
	if ours == 0 {
		return false, "no parent status from controller " + ControllerName
	}
	return true, fmt.Sprintf("%d parent(s) accepted generation %d", ours, gen)
}

// Verify is the VerifyWeight decision: the spec carries the step's weights and the status says they are served.
func Verify(obj *unstructured.Unstructured, t Target, desired int32, extra []v1alpha1.WeightDestination) (bool, string, error) {
	if err := noExtraDestinations(extra); err != nil {
		return false, "", err
	}
	ok, err := SpecHasWeight(obj, t, desired)
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("the spec does not carry weight %d/%d for %s", desired, t.MaxWeight, t.Canary), nil
	}
	served, why := Served(obj, t)
	return served, why, nil
}

// --- header routes -----------------------------------------------------------------------------------------------

// headerMatch turns one Argo header match into the Gateway API form (type, value): Exact, or RegularExpression for
// Argo's regex and prefix (a prefix becomes an anchored, quoted regular expression).
func headerMatch(m v1alpha1.HeaderRoutingMatch) (string, string, error) {
	v := m.HeaderValue
	switch {
	case v == nil:
		return "", "", fmt.Errorf("header %q has no headerValue", m.HeaderName)
	case v.Exact != "":
		return "Exact", v.Exact, nil
	case v.Regex != "":
		return "RegularExpression", v.Regex, nil
	case v.Prefix != "":
		return "RegularExpression", "^" + regexp.QuoteMeta(v.Prefix) + ".*", nil
	}
	return "", "", fmt.Errorf("header %q: headerValue needs exact, prefix or regex", m.HeaderName)
}

// SetHeaderRoute adds (or, with no match, removes) the header route named r.Name: requests carrying the headers go to
// the canary. On an HTTPRoute it is one rule named argo-<name>, appended after the route's rules, whose matches are the
// weighted rule's with the headers added (so it never widens what the route serves). Appended, not inserted: a rule's
// index names its sticky sessions (the gateway seals a session to route.rule-<index>), so shifting the weighted rule
// would re-pick every session it holds; the spec's match precedence (more header matches first) still sends the
// header's requests to this rule. On a TrafficSplit it is a
// spec.matches entry sending the header to the canary backend (a TrafficSplit match is one header, so one header only).
func SetHeaderRoute(obj *unstructured.Unstructured, t Target, r *v1alpha1.SetHeaderRoute) error {
	if err := checkName("managed route", r.Name); err != nil {
		return err
	}
	if err := RemoveHeaderRoutes(obj, t, r.Name); err != nil {
		return err
	}
	if len(r.Match) == 0 {
		return nil
	}
	mgd, err := managed(obj)
	if err != nil {
		return err
	}
	if t.Kind == KindTrafficSplit {
		if len(r.Match) != 1 {
			return errors.New("a TrafficSplit header route takes one header (spec.matches entries are single headers)")
		}
		typ, val, err := headerMatch(r.Match[0])
		if err != nil {
			return err
		}
		_, canary, err := splitBackends(obj, t)
		if err != nil {
			return err
		}
		entry := map[string]any{
			"header":  map[string]any{"name": r.Match[0].HeaderName, "type": typ, "value": val},
			"backend": str(canary, "name"),
		}
		matches, err := list(obj.Object, "spec", "matches")
		if err != nil {
			return err
		}
		// First: the split reads matches in order, and the header route must win over the user's own.
		if err := unstructured.SetNestedSlice(obj.Object, append([]any{entry}, matches...), "spec", "matches"); err != nil {
			return err
		}
		mgd[r.Name] = []any{entry}
		return setManaged(obj, mgd)
	}
	idx, rules, err := splitRules(obj, t)
	if err != nil {
		return err
	}
	var headers []any
	for _, m := range r.Match {
		typ, val, err := headerMatch(m)
		if err != nil {
			return err
		}
		headers = append(headers, map[string]any{"type": typ, "name": m.HeaderName, "value": val})
	}
	var matches []any
	for _, i := range idx {
		src, _ := asMap(rules[i])["matches"].([]any)
		if len(src) == 0 {
			src = []any{map[string]any{}} // no matches: the rule serves every path (PathPrefix /)
		}
		for _, m := range src {
			c := unstructured.Unstructured{Object: map[string]any{"m": m}}
			mm := asMap(c.DeepCopy().Object["m"])
			have, _ := mm["headers"].([]any)
			mm["headers"] = append(append([]any{}, have...), headers...)
			matches = append(matches, mm)
		}
	}
	name := ManagedRulePrefix + r.Name
	ref := map[string]any{"name": t.Canary, "weight": int64(1)}
	if port := canaryPort(rules[idx[0]], t); port != nil {
		ref["port"] = port
	}
	rule := map[string]any{"name": name, "matches": matches, "backendRefs": []any{ref}}
	out := append(append([]any{}, rules...), rule)
	if err := unstructured.SetNestedSlice(obj.Object, out, "spec", "rules"); err != nil {
		return err
	}
	mgd[r.Name] = name
	return setManaged(obj, mgd)
}

func canaryPort(rule any, t Target) any {
	for _, b := range asMap(rule)["backendRefs"].([]any) {
		if ref := asMap(b); isService(ref, t.Canary) {
			return ref["port"]
		}
	}
	return nil
}

// RemoveHeaderRoutes removes the named header routes this plugin added (all of them when names is empty).
func RemoveHeaderRoutes(obj *unstructured.Unstructured, t Target, names ...string) error {
	mgd, err := managed(obj)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		for n := range mgd {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	field := "rules"
	if t.Kind == KindTrafficSplit {
		field = "matches"
	}
	items, err := list(obj.Object, "spec", field)
	if err != nil {
		return err
	}
	changed := false
	for _, n := range names {
		rec, ok := mgd[n]
		if !ok {
			continue
		}
		changed = true
		kept := items[:0:0]
		for _, it := range items {
			drop := false
			if t.Kind == KindTrafficSplit {
				recorded, _ := rec.([]any)
				for _, r := range recorded {
					drop = drop || reflect.DeepEqual(normalize(r), normalize(it))
				}
			} else {
				drop = str(asMap(it), "name") == rec
			}
			if !drop {
				kept = append(kept, it)
			}
		}
		items = kept
		delete(mgd, n)
	}
	if !changed {
		return nil // nothing of ours: the object is left byte for byte as it was
	}
	if t.Kind == KindTrafficSplit && len(items) == 0 {
		unstructured.RemoveNestedField(obj.Object, "spec", "matches")
	} else if err := unstructured.SetNestedSlice(obj.Object, items, "spec", field); err != nil {
		return err
	}
	return setManaged(obj, mgd)
}

// normalize compares a recorded entry with the stored one through JSON (numbers and defaults read back alike).
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
